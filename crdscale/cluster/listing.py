"""What a LIST asks for: the collection (:class:`ListTarget`) and the shape of the answer (Accept headers).

Plain data, no I/O: the object writer (:mod:`crdscale.crds.populate`) names the
collections it fills with it, and the probes (:mod:`crdscale.collect.probes`)
build their LISTs of them (:mod:`crdscale.collect.probes.requests`).
"""

from __future__ import annotations

from dataclasses import dataclass

JSON_ACCEPT = "application/json"
METADATA_ONLY_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
TABLE_ACCEPT = "application/json;as=Table;g=meta.k8s.io;v=v1"


@dataclass(frozen=True)
class ListTarget:
    """A resource to LIST.

    Attributes:
        resource: plural name, e.g. ``secrets`` or ``listprobes``.
        group: API group, ``""`` for core.
        version: API version.
        namespace: the namespace used by the namespaced request kinds.
        field_selector: a field selector on neither namespace nor name (``spec.nodeName=node-0``)
            for the ``field-selector`` kind; ``None`` when the resource has no such field.
    """

    resource: str
    group: str = ""
    version: str = "v1"
    namespace: str | None = None
    field_selector: str | None = None

    def collection_path(self, namespace: str | None = None) -> str:
        """``/api/v1/secrets`` (cluster-wide) or ``/api/v1/namespaces/NS/secrets``."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            return f"{prefix}/namespaces/{namespace}/{self.resource}"
        return f"{prefix}/{self.resource}"

    @property
    def group_resource(self) -> str:
        """``secrets`` or ``listprobes.probe.crdscale.io`` (as in ``apiserver_*`` metric labels)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource
