"""Load real CRDs from what users have: files, trees, provider packages, Helm charts, clusters.

What :func:`load_crds` reads (each source):

- a YAML/JSON file or a tree of them: multi-document streams, ``List`` documents
  (``kubectl get crd -o yaml``), an OLM bundle (``manifests/*.yaml`` beside a
  ClusterServiceVersion), an extracted Crossplane package (``package.yaml``);
- ``-``: the same from stdin (``kubectl get crd -o yaml | crdscale footprint -``);
- a tarball: a Crossplane package (``.xpkg``, an OCI image tarball whose layer holds
  ``package.yaml``: a ``meta.pkg.crossplane.io`` Provider followed by CRDs), a packaged
  Helm chart (``.tgz``), or any tar of YAML files;
- a Helm chart (a directory with ``Chart.yaml``, or packaged): its ``crds/`` and its
  subcharts'; CRDs in ``templates/`` are rendered by ``helm template`` when ``helm``
  is on PATH, else named in a warning.

:func:`cluster_crds` reads the CRDs a live cluster has installed (one LIST, read-only).

Only ``CustomResourceDefinition`` documents of ``apiextensions.k8s.io/v1`` are kept;
everything else is counted by kind. :func:`require_crds` is the one refusal of a set
without any, shared by every command that takes CRDs. A file that does not parse, a
document that is not an object, an alias bomb, a CRD over etcd's request limit or one
kube-apiserver would refuse (:mod:`crdscale.crds.validate`, in the server's words) raises
:class:`CRDError` naming the file and the document (1-based index in its stream).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crdscale.crds import forkpool
from crdscale.crds.summary import CrdSetSummary, summarize
from crdscale.crds.validate import rejection
from crdscale.crds.yamlstream import load_all
from crdscale.errors import CRDError, UsageError
from crdscale.schema import json_bytes
from crdscale.units import fmt_bytes

CRD_KIND = "CustomResourceDefinition"
CRD_API_VERSION = "apiextensions.k8s.io/v1"
FILE_SUFFIXES = (".yaml", ".yml", ".json")
TARBALL_SUFFIXES = (".xpkg", ".tgz", ".tar", ".tar.gz", ".gz")
STDIN = "-"
# etcd refuses a request over --max-request-bytes (1.5 MiB by default), so the API server
# cannot store a CRD larger than that ("etcdserver: request is too large").
ETCD_REQUEST_LIMIT = 1_572_864
# Entries walked under a CRD source before it is refused: real sets hold a few thousand files (the
# Crossplane providers' 2,000), a Kubernetes checkout ~30,000; a million is a home directory or /.
MAX_TREE_ENTRIES = 200_000
# A member of a tarball read into memory: far above any provider's package.yaml (~100 MB),
# far below what would hurt.
MAX_MEMBER_BYTES = 1 << 30
# v1beta1 CRDs are refused by every server since 1.22; keep them out with a
# count instead of letting the install fail on each.
_SKIP_KEY_OLD_CRD = "CustomResourceDefinition (apiextensions.k8s.io/v1beta1)"
# A packaged Helm chart: <chart>/crds/..., subcharts' <chart>/charts/<sub>/crds/...
_CHART_CRD_MEMBER = re.compile(r"^[^/]+(/charts/[^/]+)*/crds/.+\.(ya?ml|json)$")
# An image tarball: docker save / go-containerregistry (manifest.json) or an OCI layout (index.json, oci-layout).
_IMAGE_TARBALL_INDEX = re.compile(r"(manifest|index)\.json|oci-layout")
_CHART_TEMPLATE_MEMBER = re.compile(r"^[^/]+(/charts/[^/]+)*/templates/")


@dataclass(frozen=True)
class CrdSource:
    """Where one CRD came from: file path (``archive.xpkg:package.yaml`` inside a tarball) and
    1-based document index; ``cluster https://...`` for a cluster's CRD, numbered in its LIST."""

    path: Path | str
    document: int

    def __str__(self) -> str:
        return f"{self.path}: document {self.document}"


@dataclass
class LoadedCrdSet:
    """CRDs found under a source, in file order, and what was left out.

    Attributes:
        names: CRD names, in file order.
        crds: CRD dicts as read (empty when loaded with a ``measure``).
        measures: what ``measure`` made of each CRD (when loaded with one).
        sources: ``sources[i]`` is where CRD ``names[i]`` came from.
        files: files read (tarball members and rendered charts count one each).
        documents: non-empty documents read (list items counted one by one).
        skipped: documents left out, by kind (``"<no kind>"`` for objects without one).
        warnings: what could not be read, each with a way out (e.g. a chart's templated CRDs without helm).
    """

    names: list[str] = field(default_factory=list)
    crds: list[dict[str, Any]] = field(default_factory=list)
    measures: list[Any] = field(default_factory=list)
    sources: list[CrdSource] = field(default_factory=list)
    files: int = 0
    documents: int = 0
    skipped: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> CrdSetSummary:
        return summarize(self.crds)

    def found(self) -> str:
        """What was read, in words: ``"2 Deployment, 1 CustomResourceDefinition (apiextensions.k8s.io/v1beta1)"``,
        ``"3 files with no documents"``, ``"nothing (no YAML or JSON files)"``."""
        if self.skipped:
            return ", ".join(f"{n} {kind}" for kind, n in sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        if self.files:
            return f"{self.files} file{'s' if self.files != 1 else ''} with no documents"
        return "nothing (no YAML or JSON files)"


def require_crds(loaded: LoadedCrdSet, where: str) -> None:
    """Raise :class:`CRDError` when ``loaded`` holds no ``apiextensions.k8s.io/v1`` CRD, naming what it
    found instead (v1beta1 CRDs, other kinds, or nothing). One wording for every command."""
    if loaded.names:
        return
    hint = ""
    if _SKIP_KEY_OLD_CRD in loaded.skipped:
        hint = " (v1beta1 CRDs are served by no kube-apiserver since 1.22: convert them to v1)"
    if loaded.warnings:  # e.g. a chart whose CRDs are all in templates, and no helm to render them
        hint += f"; {loaded.warnings[0]}"
    raise CRDError(f"no {CRD_API_VERSION} CustomResourceDefinitions in {where}: found {loaded.found()}{hint}")


def find_files(source: str | Path) -> list[Path]:
    """YAML/JSON files under ``source`` (a file or directory), sorted; hidden entries skipped.
    :class:`CRDError` past :data:`MAX_TREE_ENTRIES` entries (``footprint /`` would walk the machine)."""
    root = Path(source)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise CRDError(f"no such file or directory: {root}")
    files, seen, pseudo = [], 0, _pseudo_mounts()
    for folder, dirs, names in os.walk(root):  # symlinked folders are not followed, as rglob did not
        dirs[:] = [d for d in dirs if not d.startswith(".") and os.path.join(folder, d) not in pseudo]
        seen += len(dirs) + len(names)
        if seen > MAX_TREE_ENTRIES:
            raise CRDError(
                f"{root}: more than {MAX_TREE_ENTRIES:,} files and folders: not a CRD set "
                f"(name the folder that holds the CRDs)"
            )
        here = Path(folder)
        files += [
            here / n
            for n in names
            if not n.startswith(".") and Path(n).suffix.lower() in FILE_SUFFIXES and (here / n).is_file()
        ]
    return sorted(files)


# Kernel filesystems hold no CRDs, and walking /proc takes minutes (a folder per thread of every process).
_PSEUDO_FILESYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs"})


def _pseudo_mounts() -> frozenset[str]:
    """Mount points of kernel filesystems (Linux's /proc/self/mounts; none elsewhere)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return frozenset()
    fields = [line.split() for line in lines]
    # Octal escapes (a space is \040) are left as they are: such mount points are not pruned.
    return frozenset(f[1] for f in fields if len(f) > 2 and f[2] in _PSEUDO_FILESYSTEMS)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise CRDError(f"{path}: cannot read: {err.strerror or err}") from err


def _is_tarball(path: Path) -> bool:
    if path.name.lower().endswith(TARBALL_SUFFIXES):
        return True
    try:
        return path.suffix.lower() not in FILE_SUFFIXES and tarfile.is_tarfile(path)
    except OSError:
        return False


def _texts(source: str | Path, warnings: list[str]) -> Iterator[tuple[Path, bytes]]:
    """``(label, bytes)`` of every YAML/JSON text ``source`` holds (see the module docstring)."""
    if str(source) == STDIN:
        yield Path("<stdin>"), sys.stdin.buffer.read()
        return
    root = Path(source)
    if root.is_dir() and (root / "Chart.yaml").is_file():
        yield from _chart_dir(root, warnings)
    elif root.is_file() and _is_tarball(root):
        yield from _tarball(root, warnings)
    else:
        for path in find_files(root):
            yield path, _read(path)


def _chart_dir(chart: Path, warnings: list[str]) -> Iterator[tuple[Path, bytes]]:
    """A Helm chart directory: ``crds/`` of the chart and its subcharts, plus its templates rendered."""
    for path in find_files(chart / "crds") if (chart / "crds").is_dir() else []:
        yield path, _read(path)
    charts = chart / "charts"
    for sub in sorted(charts.iterdir()) if charts.is_dir() else []:
        if sub.is_dir() and (sub / "Chart.yaml").is_file():
            yield from _chart_dir(sub, warnings)
        elif sub.is_file() and _is_tarball(sub):
            yield from _tarball(sub, warnings, templates=False)
    templates = chart / "templates"
    mentions = (
        [p for p in sorted(templates.rglob("*")) if p.is_file() and CRD_KIND.encode() in _read(p)]
        if templates.is_dir()
        else []
    )
    yield from _templated(chart, len(mentions), warnings)


def _templated(chart: Path, mentions: int, warnings: list[str]) -> Iterator[tuple[Path, bytes]]:
    """``helm template`` of a chart when its templates mention CRDs and helm is there; else a warning."""
    if not mentions:
        return
    helm = shutil.which("helm")
    if helm is None:
        warnings.append(
            f"{chart}: {mentions} template(s) mention {CRD_KIND} and were not rendered: helm is not on PATH "
            f"(install helm, or render them yourself: helm template {chart} | crdscale footprint -)"
        )
        return
    # No --include-crds: crds/ was read above; templates only. Values are the chart's defaults.
    done = subprocess.run(
        [helm, "template", "crdscale-footprint", str(chart)], capture_output=True, timeout=120, check=False
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise CRDError(f"{chart}: helm template failed: {message[-1] if message else done.returncode}")
    yield Path(f"helm template {chart}"), done.stdout


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo, where: str) -> bytes:
    if member.size > MAX_MEMBER_BYTES:
        raise CRDError(
            f"{where}: {member.name} is {member.size:,} bytes, over the {MAX_MEMBER_BYTES:,} read from a tarball"
        )
    handle = archive.extractfile(member)
    return handle.read() if handle is not None else b""


def _tarball(path: Path, warnings: list[str], *, templates: bool = True) -> Iterator[tuple[Path, bytes]]:
    """A Crossplane package (OCI image tarball or a tar holding ``package.yaml``), a packaged Helm
    chart, or a tar of YAML/JSON files."""
    try:
        with tarfile.open(path, "r:*") as archive:
            members = [m for m in archive.getmembers() if m.isfile()]
            names = [m.name.removeprefix("./") for m in members]
            if any(re.fullmatch(r"[^/]+/Chart\.yaml", n) for n in names):
                for member, name in zip(members, names, strict=True):
                    if _CHART_CRD_MEMBER.match(name):
                        yield Path(f"{path}:{name}"), _member_bytes(archive, member, str(path))
                if templates:
                    mentions = sum(
                        1
                        for member, name in zip(members, names, strict=True)
                        if _CHART_TEMPLATE_MEMBER.match(name)
                        and CRD_KIND.encode() in _member_bytes(archive, member, str(path))
                    )
                    yield from _templated(path, mentions, warnings)
                return
            packages = [m for m, n in zip(members, names, strict=True) if n.rsplit("/", 1)[-1] == "package.yaml"]
            if packages:
                for member in packages:
                    yield Path(f"{path}:{member.name}"), _member_bytes(archive, member, str(path))
                return
            if any(_IMAGE_TARBALL_INDEX.fullmatch(n) for n in names):
                yield from _image_layers(path, archive, members)
                return
            for member, name in zip(members, names, strict=True):
                if name.lower().endswith(FILE_SUFFIXES):
                    yield Path(f"{path}:{name}"), _member_bytes(archive, member, str(path))
    except (tarfile.TarError, EOFError, OSError) as err:
        raise CRDError(f"{path}: not a readable tarball: {err}") from err


def _image_layers(path: Path, archive: tarfile.TarFile, members: list[tarfile.TarInfo]) -> Iterator[tuple[Path, bytes]]:
    """``package.yaml`` from the layers of an image tarball (``docker save``/go-containerregistry or
    OCI layout): every member that is itself a (gzipped) tar is a layer candidate."""
    found = False
    for member in members:
        if member.name.endswith((".json", "oci-layout")) or member.size == 0:
            continue
        try:
            with tarfile.open(fileobj=io.BytesIO(_member_bytes(archive, member, str(path))), mode="r:*") as layer:
                for inner in layer.getmembers():
                    if inner.isfile() and inner.name.removeprefix("./") == "package.yaml":
                        found = True
                        yield Path(f"{path}:{member.name}:package.yaml"), _member_bytes(layer, inner, str(path))
        except tarfile.TarError:
            continue  # a config blob or a layer of another format: not a package layer
    if not found:
        raise CRDError(f"{path}: an image tarball with no package.yaml in its layers (not a Crossplane package?)")


def _documents(label: Path, data: bytes) -> Iterator[tuple[int, Any]]:
    """Yield ``(document index, object)`` for each non-empty document of one text (index 1-based).

    Raises :class:`CRDError` naming file and document for a parse error or an alias bomb.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CRDError(f"{label}: cannot read: not UTF-8 ({err.reason} at byte {err.start})") from err
    if label.suffix.lower() == ".json":
        # JSON is also YAML, but the json module is faster and its errors clearer.
        try:
            yield 1, json.loads(text)
        except json.JSONDecodeError as err:
            raise CRDError(f"{label}: document 1: invalid JSON at line {err.lineno}: {err.msg}") from err
        return
    index = 0
    documents = load_all(text)
    while True:
        index += 1
        try:
            document = next(documents)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise CRDError(f"{label}: document {index}: {_yaml_error(err)}") from err
        if document is not None:
            yield index, document


def iter_documents(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(document index, object)`` for each non-empty document in a file (index 1-based).

    Raises :class:`CRDError` naming file and document for a parse error.
    """
    return _documents(path, _read(path))


def objects_in_text(label: Path, data: bytes) -> list[dict[str, Any]]:
    """Every object of one YAML/JSON text, read as CRD files are (:func:`_documents`: UTF-8, alias bombs
    refused) with kubectl ``List`` documents opened into their items (:func:`_objects`): what
    ``footprint --object-sample`` reads. Raises :class:`CRDError` naming file and document."""
    return [obj for index, document in _documents(label, data) for obj in _objects(document, CrdSource(label, index))]


def read_objects_file(path: str | Path, where: str) -> list[dict[str, Any]]:
    """Every object of the YAML/JSON file ``path`` (:func:`objects_in_text`), for an option that names a file of
    objects (``where``, e.g. ``--object-sample FILE``): a file that cannot be read or parsed is a one-line
    :class:`UsageError` starting with ``where``."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"{where}: {err.strerror}") from None
    try:
        return objects_in_text(Path(path), data)
    except CRDError as err:
        raise UsageError(f"{where}: not YAML or JSON objects ({err})") from None


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


def check_size(crd: Mapping[str, Any], where: CrdSource | str) -> None:
    """Raise :class:`CRDError` for a CRD the API server could not store: its JSON over :data:`ETCD_REQUEST_LIMIT`."""
    size = json_bytes(crd)
    if size > ETCD_REQUEST_LIMIT:
        name = (crd.get("metadata") or {}).get("name", "?")
        raise CRDError(
            f"{where}: CustomResourceDefinition {name} is {fmt_bytes(size, unit='MiB')} as JSON, over the 1.5 MiB "
            f"etcd accepts in one request (--max-request-bytes): the API server would refuse it"
        )


def _skip_key(obj: Mapping[str, Any]) -> str | None:
    """How a document that is not a v1 CRD is counted (None for a v1 CRD)."""
    kind = obj.get("kind")
    if kind != CRD_KIND:
        return kind if isinstance(kind, str) and kind else "<no kind>"
    if obj.get("apiVersion") != CRD_API_VERSION:
        return _SKIP_KEY_OLD_CRD if "v1beta1" in str(obj.get("apiVersion")) else f"{kind} ({obj.get('apiVersion')})"
    return None


# One object of a text: (document index, skip key or None, CRD name, the CRD or what ``measure`` made of it).
_Record = tuple[int, str | None, str | None, Any]
Measure = Callable[[dict[str, Any]], Any]


def check_accepted(crd: Mapping[str, Any], where: CrdSource | str) -> None:
    """Raise :class:`CRDError` with kube-apiserver's own answer when it would refuse to create ``crd``
    (:func:`crdscale.crds.validate.rejection`: field types, names, versions, storage, structural schema)."""
    reason = rejection(crd)
    if reason is not None:
        raise CRDError(f"{where}: kube-apiserver would reject this CRD: {reason}")


def _records(
    label: Path | str, documents: Iterable[tuple[int, Any]], measure: Measure | None, *, validate: bool = True
) -> list[_Record]:
    """Every object of one text, checked (a malformed or oversized CRD raises :class:`CRDError`, and
    with ``validate`` one kube-apiserver would refuse)."""
    out = []
    index = 0
    try:
        for index, document in documents:
            where = CrdSource(label, index)
            for obj in _objects(document, where):
                skip = _skip_key(obj)
                if skip is not None:
                    out.append((index, skip, None, None))
                    continue
                check_crd(obj, where)
                if validate:
                    check_accepted(obj, where)
                check_size(obj, where)
                out.append((index, None, obj["metadata"]["name"], obj if measure is None else measure(obj)))
    except RecursionError:
        # JSON, and YAML PyYAML loads itself, are not bounded while parsing; measuring them recurses.
        raise CRDError(
            f"{label}: document {index or 1}: nests too deeply "
            f"for crdscale to measure (real CRDs nest a few dozen levels)"
        ) from None
    return out


def _collect(result: LoadedCrdSet, parsed: Iterable[tuple[Path | str, list[_Record]]], measured: bool) -> None:
    first_seen: dict[str, CrdSource] = {}
    for label, records in parsed:
        result.files += 1
        for index, skip, name, payload in records:
            result.documents += 1
            if skip is not None:
                result.skipped[skip] += 1
                continue
            where = CrdSource(label, index)
            if name in first_seen:
                raise CRDError(f"{where}: CRD {name} already defined in {first_seen[name]}")
            first_seen[name] = where
            result.names.append(name)
            result.sources.append(where)
            (result.measures if measured else result.crds).append(payload)


def load_crds(sources: str | Path | Iterable[str | Path], *, measure: Measure | None = None) -> LoadedCrdSet:
    """Read every CRD under ``sources`` (files, directories, tarballs, charts, ``-`` for stdin).

    Returns a :class:`LoadedCrdSet` (possibly empty: see :func:`require_crds`). With ``measure``
    (a module-level function of one CRD dict), ``measures`` holds what it returns for each CRD
    instead of ``crds`` holding the CRDs, and a large set is parsed by one worker process per CPU
    (a provider's 17 MB of YAML take ~1.5 s of one core; a few numbers per CRD come back, not the
    CRDs). Raises :class:`CRDError` for a missing source, a malformed file or document, a CRD the
    API server would refuse for its size, or two CRDs with the same name.
    """
    if isinstance(sources, (str, Path)):
        sources = [sources]
    result = LoadedCrdSet()
    texts = [text for source in sources for text in _texts(source, result.warnings)]
    _collect(result, _parse(texts, measure), measured=measure is not None)
    return result


# Below this much YAML, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 4 << 20


def _parse_texts(texts: list[tuple[Path, bytes]], measure: Measure | None) -> list[tuple[Path, list[_Record]]]:
    return [(label, _records(label, _documents(label, data), measure)) for label, data in texts]


def _parse(texts: list[tuple[Path, bytes]], measure: Measure | None) -> Iterator[tuple[Path, list[_Record]]]:
    """Each text's records, in order; with ``measure`` and enough YAML, by one worker process per CPU
    (:mod:`crdscale.crds.forkpool`: Ctrl-C stops them without a hang or a traceback)."""
    total = sum(len(data) for _, data in texts)
    cpus = forkpool.cpu_count()
    if measure is None or cpus < 2 or total < PARALLEL_MIN_BYTES or not forkpool.can_fork():
        yield from _parse_texts(texts, measure)
        return
    # Chunks of about equal bytes, a few per worker so one slow chunk does not hold up the rest.
    chunks: list[list[tuple[Path, bytes]]] = [[]]
    target, size = total / (cpus * 4), 0
    for text in texts:
        if size >= target:
            chunks.append([])
            size = 0
        chunks[-1].append(text)
        size += len(text[1])
    # fork: the workers need nothing imported again and no __main__ guard. The chunks come back in
    # order, so the first error in file order is the one raised, as in one process.
    for parsed in forkpool.ordered_map(_parse_texts, chunks, (measure,), workers=cpus):
        yield from parsed


def cluster_crds(cluster, *, measure: Measure | None = None) -> LoadedCrdSet:
    """The CRDs ``cluster`` (a :class:`crdscale.cluster.clients.Cluster`) has installed: one paged LIST,
    nothing written; ``measure`` as for :func:`load_crds`. Their sources name the server."""
    items, _ = cluster.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    # A LIST's items carry no kind or apiVersion; the collection says what they are.
    items = [{"apiVersion": CRD_API_VERSION, "kind": CRD_KIND, **item} for item in items]
    label = f"cluster {cluster.server}"
    result = LoadedCrdSet()
    # Not validated: the server has accepted them (perhaps under rules older than crdscale's).
    records = _records(label, enumerate(items, start=1), measure, validate=False)
    _collect(result, [(label, records)], measured=measure is not None)
    result.files = 0
    return result
