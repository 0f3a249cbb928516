"""Load real CRDs from files: a tree of YAML/JSON, multi-document streams, provider packages.

Provider packages mix CRDs with other objects: a Crossplane package stream
(``package.yaml``: a ``meta.pkg.crossplane.io`` Provider followed by CRDs, or
an extracted package with a ``crds/`` folder), an OLM bundle
(``manifests/*.clusterserviceversion.yaml`` beside the CRDs,
``metadata/annotations.yaml``). The loader keeps ``CustomResourceDefinition``
documents of ``apiextensions.k8s.io/v1`` and counts everything else by kind.

A file that does not parse, or a document that is not an object, raises
:class:`CRDError` naming the file and the document (1-based index in its stream).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crdscale.crds.summary import CrdSetSummary, summarize
from crdscale.errors import CRDError

CRD_KIND = "CustomResourceDefinition"
CRD_API_VERSION = "apiextensions.k8s.io/v1"
FILE_SUFFIXES = (".yaml", ".yml", ".json")
# v1beta1 CRDs are refused by every server since 1.22; keep them out with a
# count instead of letting the install fail on each.
_SKIP_KEY_OLD_CRD = "CustomResourceDefinition (apiextensions.k8s.io/v1beta1)"


@dataclass(frozen=True)
class CrdSource:
    """Where one CRD came from: file path and 1-based document index."""

    path: Path
    document: int

    def __str__(self) -> str:
        return f"{self.path}: document {self.document}"


@dataclass
class LoadedCrdSet:
    """CRDs found under a source, in file order, and what was left out.

    Attributes:
        crds: CRD dicts as read.
        sources: ``sources[i]`` is where ``crds[i]`` came from.
        files: files read.
        documents: non-empty documents read (list items counted one by one).
        skipped: documents left out, by kind (``"<no kind>"`` for objects without one).
    """

    crds: list[dict[str, Any]] = field(default_factory=list)
    sources: list[CrdSource] = field(default_factory=list)
    files: int = 0
    documents: int = 0
    skipped: Counter = field(default_factory=Counter)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> CrdSetSummary:
        return summarize(self.crds)


def _loader():
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def find_files(source: str | Path) -> list[Path]:
    """YAML/JSON files under ``source`` (a file or directory), sorted; hidden entries skipped."""
    root = Path(source)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise CRDError(f"no such file or directory: {root}")
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).parts
        if any(part.startswith(".") for part in relative):
            continue
        if path.is_file() and path.suffix.lower() in FILE_SUFFIXES:
            files.append(path)
    return files


def iter_documents(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(document index, object)`` for each non-empty document in a file (index 1-based).

    Raises :class:`CRDError` naming file and document for a parse error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CRDError(f"{path}: cannot read: {err}") from err
    if path.suffix.lower() == ".json":
        # JSON is also YAML, but the json module is faster and its errors clearer.
        try:
            yield 1, json.loads(text)
        except json.JSONDecodeError as err:
            raise CRDError(f"{path}: document 1: invalid JSON at line {err.lineno}: {err.msg}") from err
        return
    index = 0
    documents = yaml.load_all(text, Loader=_loader())
    while True:
        index += 1
        try:
            document = next(documents)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise CRDError(f"{path}: document {index}: {_yaml_error(err)}") from err
        if document is not None:
            yield index, document


def _yaml_error(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{where}: {problem}"


def check_crd(crd: Any, where: CrdSource | str) -> None:
    """Raise :class:`CRDError` if ``crd`` lacks what a CRD needs to be installed and summarized."""

    def need(condition: bool, what: str) -> None:
        if not condition:
            raise CRDError(f"{where}: CustomResourceDefinition {what}")

    metadata, spec = crd.get("metadata"), crd.get("spec")
    need(
        isinstance(metadata, dict) and isinstance(metadata.get("name"), str) and metadata["name"],
        "has no metadata.name",
    )
    need(isinstance(spec, dict), f"{metadata['name']} has no spec")
    need(isinstance(spec.get("group"), str) and spec["group"], f"{metadata['name']} has no spec.group")
    names = spec.get("names")
    need(
        isinstance(names, dict) and isinstance(names.get("plural"), str) and isinstance(names.get("kind"), str),
        f"{metadata['name']} needs spec.names.plural and spec.names.kind",
    )
    versions = spec.get("versions")
    need(
        isinstance(versions, list) and versions and all(isinstance(v, dict) and v.get("name") for v in versions),
        f"{metadata['name']} needs a non-empty spec.versions list of named versions",
    )


def _objects(document: Any, where: CrdSource) -> Iterator[dict[str, Any]]:
    if not isinstance(document, dict):
        raise CRDError(f"{where}: expected an object, got {type(document).__name__}")
    if document.get("kind") == "List" or (
        isinstance(document.get("kind"), str)
        and document["kind"].endswith("List")
        and isinstance(document.get("items"), list)
    ):
        for item in document.get("items") or []:
            if not isinstance(item, dict):
                raise CRDError(f"{where}: list item is not an object")
            yield item
    else:
        yield document


def load_crds(sources: str | Path | Iterable[str | Path]) -> LoadedCrdSet:
    """Read every CRD under ``sources`` (files or directories).

    Returns a :class:`LoadedCrdSet`. Raises :class:`CRDError` for a missing
    source, a malformed file or document, or two CRDs with the same name.
    """
    if isinstance(sources, (str, Path)):
        sources = [sources]
    result = LoadedCrdSet()
    first_seen: dict[str, CrdSource] = {}
    for source in sources:
        for path in find_files(source):
            result.files += 1
            for index, document in iter_documents(path):
                where = CrdSource(path, index)
                for obj in _objects(document, where):
                    result.documents += 1
                    kind = obj.get("kind")
                    if kind != CRD_KIND:
                        result.skipped[kind if isinstance(kind, str) and kind else "<no kind>"] += 1
                        continue
                    if obj.get("apiVersion") != CRD_API_VERSION:
                        result.skipped[
                            _SKIP_KEY_OLD_CRD
                            if "v1beta1" in str(obj.get("apiVersion"))
                            else f"{kind} ({obj.get('apiVersion')})"
                        ] += 1
                        continue
                    check_crd(obj, where)
                    name = obj["metadata"]["name"]
                    if name in first_seen:
                        raise CRDError(f"{where}: CRD {name} already defined in {first_seen[name]}")
                    first_seen[name] = where
                    result.crds.append(obj)
                    result.sources.append(where)
    return result
