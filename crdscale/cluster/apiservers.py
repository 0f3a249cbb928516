"""The kube-apiservers a LIST can be sent to: the one behind a cluster and, on a local instance, a second
one with ``--watch-cache=false`` on the same etcd, so the same request on the same stored objects is
served once from the watch cache and once from etcd.

v1.37 has no switch left to send one LIST to etcd on a server with a watch cache
(the ConsistentListFromCache gate is gone, and Exact and paged LISTs are served from
the cache's snapshots), so a second server is the way to the etcd path.
:func:`apiservers` starts it with the instance's binary, flags and credentials
(:meth:`~crdscale.cluster.local.LocalControlPlane.start_second_apiserver`), and
stops it on exit; the LIST probes (:mod:`crdscale.collect.probes.listcost`)
measure the servers it yields.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from crdscale.cluster.local import instance_serving

log = logging.getLogger(__name__)

DEFAULT_APISERVER = "default"
ETCD_ONLY_FLAGS = ("--watch-cache=false",)
ETCD_ONLY_APISERVER = " ".join(ETCD_ONLY_FLAGS)


@dataclass(frozen=True)
class ApiServer:
    """A kube-apiserver to send the LISTs to.

    Attributes:
        label: how the tables name it (:data:`DEFAULT_APISERVER`, :data:`ETCD_ONLY_APISERVER`).
        cluster: its :class:`~crdscale.cluster.clients.Cluster`.
        pid: its process id when it runs on this machine: CPU and RSS then come from
            ``/proc``, leaving out what reading ``/metrics`` costs it.
        etcd_pid: the etcd behind it, when local (its CPU per request is reported too).
    """

    label: str
    cluster: object
    pid: int | None = None
    etcd_pid: int | None = None


@dataclass
class ApiServers:
    """What :func:`apiservers` yields: the servers to measure (the default one first), and a
    note on the etcd comparison: which server serves from etcd, or why there is none."""

    servers: list[ApiServer]
    note: str = ""


@contextlib.contextmanager
def apiservers(cluster, *, compare_etcd: bool, name_suffix: str = "") -> Iterator[ApiServers]:
    """The kube-apiserver behind ``cluster``, and with ``compare_etcd`` a second one started
    with ``--watch-cache=false`` on the same etcd when ``cluster`` is a ready local instance.

    The second server is stopped on exit. For other clusters there is no second server and
    :attr:`ApiServers.note` says so; process ids are known only for local instances.
    """
    plane = instance_serving(cluster.server)
    etcd = plane.process("etcd") if plane else None
    etcd_pid = etcd.pid if etcd else None
    found = ApiServers([ApiServer(DEFAULT_APISERVER, cluster, plane.apiserver_pid if plane else None, etcd_pid)])
    if not compare_etcd:
        found.note = "not asked for"
        yield found
        return
    if plane is None:
        found.note = (
            f"{cluster.server} is not a crdscale local instance: no second kube-apiserver to serve LISTs from etcd"
        )
        log.info(f"etcd comparison skipped: {found.note}")
        yield found
        return
    name = f"kube-apiserver-etcd-only{'-' + name_suffix if name_suffix else ''}"
    log.info(f"starting a second kube-apiserver ({ETCD_ONLY_APISERVER}) on {plane.name}'s etcd")
    with plane.start_second_apiserver(name, ETCD_ONLY_FLAGS) as second:
        etcd_only = second.connect(cluster)
        try:
            found.servers.append(ApiServer(ETCD_ONLY_APISERVER, etcd_only, second.pid, etcd_pid))
            found.note = f"{ETCD_ONLY_APISERVER} on the same etcd ({second.server})"
            yield found
        finally:
            etcd_only.close()
