"""The probes and their configurations: one frozen dataclass per probe, every field's default and help
declared once, and :data:`PROBES`, the one registry of probes (name -> config class).

A probe's config class names the probe (``name``), the module holding its
measurement (``module``) and the entry point there (``entry``, ``run(cluster,
config, writer, *, step, run_id) -> ProbeResult``), with a one-line ``summary``.
``crdscale probe NAME`` makes one subcommand per entry of :data:`PROBES` and its
flags from the fields (:func:`add_arguments`); a scenario's ``[probes] each_step``
names and ``[probes.options.NAME]`` tables are read into the same classes
(:func:`from_options`, :func:`check_scenario_probes`, which ``crdscale run
--check`` calls too); both hand the config to the entry point through
:func:`crdscale.collect.probes.run_probe`. A class's docstring opens its
``--help``, and so the generated CLI reference: what the probe measures, how,
and the seed number it reproduces.

Where the CLI deliberately starts from another value than a scenario step (a
second kube-apiserver for ``probe list``; fewer discovery limits per step), the
class says so once, with why, in ``cli_defaults`` or ``step_defaults``.

This module imports nothing heavy, so ``crdscale probe --help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from crdscale.errors import UsageError

from .requests import LIST_KINDS

if TYPE_CHECKING:
    from crdscale.models import tokenbucket


def option(
    default: Any,
    help: str,  # noqa: A002 - argparse's word
    *,
    flag: str | None = None,
    metavar: str | None = None,
    group: str | None = None,
    separator: str | None = None,
    cli: bool = True,
) -> Any:
    """A config field with its help text. ``flag`` names the CLI flag when it is not ``--field-name``
    (a ``--no-...`` flag for a field that defaults to True); ``separator`` makes a tuple field one
    argument split on it (``--load 1,4,16``) instead of several; ``cli=False`` keeps it out of the CLI."""
    meta = {"help": help, "flag": flag, "metavar": metavar, "group": group, "separator": separator, "cli": cli}
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """Options every probe takes."""

    keep: bool = option(False, "leave the created objects in place")

    # A registered probe's name (the subcommand and the scenario's name for it), the module holding its
    # measurement, the entry point in that module, and the one line `crdscale probe --help` lists it with.
    name: ClassVar[str] = ""
    module: ClassVar[str] = ""
    entry: ClassVar[str] = "run"
    summary: ClassVar[str] = ""

    # Field values the CLI starts from instead of the field defaults, and those a scenario step starts from.
    cli_defaults: ClassVar[Mapping[str, Any]] = {}
    step_defaults: ClassVar[Mapping[str, Any]] = {}

    def validate(self) -> None:
        """Raise :class:`UsageError` for a value the probe cannot run with (before anything is created)."""

    def parameters(self) -> dict[str, Any]:
        """The fields as plain JSON values (the run manifest's ``parameters``)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def entry_point(cls) -> Callable[..., Any]:
        """The probe's entry point, ``run(cluster, config, writer, *, step, run_id) -> ProbeResult``.

        Its module is imported only now, so that listing the probes (``--help``) stays fast."""
        return getattr(importlib.import_module(cls.module), cls.entry)


def _non_negative(config: ProbeConfig, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(config, name) < 0:
            raise UsageError(f"{name.replace('_', '-')} must be >= 0")


# --- LIST objects, shared by the list and apf probes -------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ListObjects(ProbeConfig):
    """What the LIST and APF probes create and how they measure each LIST kind."""

    custom_resources: int = option(2000, "custom resources to create, each with --cr-bytes of data", group="objects")
    cr_bytes: int = option(1024, "data per custom resource", metavar="B", group="objects")
    secrets: int = option(0, "Secrets to create", group="objects")
    secret_bytes: int = option(100_000, "data per Secret", metavar="B", group="objects")
    configmaps: int = option(0, "ConfigMaps to create", group="objects")
    configmap_bytes: int = option(10_000, "data per ConfigMap", metavar="B", group="objects")
    pods: int = option(
        0, "Pods to create, bound to 10 nodes that do not exist (for fieldSelector=spec.nodeName)", group="objects"
    )
    pod_bytes: int = option(20_000, "data per Pod, in environment variables", metavar="B", group="objects")
    namespaces: int = option(2, "spread objects round-robin over N namespaces", group="objects")
    repeats: int = option(3, "measurements per LIST kind; the median is reported", group="objects")
    page_size: int = option(500, "limit of the paged LISTs", group="objects")
    kinds: tuple[str, ...] = option(LIST_KINDS, "LIST kinds to measure", metavar="KIND", group="objects")
    workers: int = option(16, "parallel creates", cli=False)

    def validate(self) -> None:
        sizes = ("custom_resources", "secrets", "configmaps", "pods")
        _non_negative(self, sizes + ("cr_bytes", "secret_bytes", "configmap_bytes", "pod_bytes"))
        if max(self.secret_bytes, self.configmap_bytes, self.pod_bytes) > 1_000_000:
            raise UsageError("Secrets, ConfigMaps and Pods hold at most 1 MB of data each (etcd's request limit)")
        if self.namespaces < 1 or self.repeats < 1:
            raise UsageError("namespaces and repeats must be >= 1")
        unknown = set(self.kinds) - set(LIST_KINDS)
        if unknown:
            raise UsageError(f"unknown LIST kinds: {', '.join(sorted(unknown))} (known: {', '.join(LIST_KINDS)})")


# --- the LIST probe, and its shape experiment ----------------------------------------------------------


@dataclass(frozen=True)
class LoadShape:
    """One way to make up a LIST response: ``objects`` Secrets holding ``object_bytes`` of data each."""

    objects: int
    object_bytes: int

    @property
    def label(self) -> str:
        return f"{self.objects}x{self.object_bytes}"

    @property
    def data_bytes(self) -> int:
        return self.objects * self.object_bytes


def parse_load_shapes(text: str) -> tuple[LoadShape, ...]:
    """``"40x1000000,4000x10000"`` -> two :class:`LoadShape` (objects x data bytes each)."""
    shapes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        count, sep, size = part.lower().partition("x")
        try:
            shape = LoadShape(int(count), int(size))
        except ValueError:
            shape = None
        if not sep or shape is None or shape.objects < 1 or shape.object_bytes < 1:
            raise UsageError(f"load shape {part!r}: expected OBJECTSxBYTES such as 40x1000000")
        if shape.object_bytes > 1_000_000:
            raise UsageError(f"load shape {part!r}: a Secret holds at most 1000000 B of data (etcd's request limit)")
        shapes.append(shape)
    if len(shapes) < 2:
        raise UsageError(f"load shapes {text!r}: give at least two shapes to compare, e.g. 40x1000000,4000x10000")
    return tuple(shapes)


@dataclass(frozen=True, kw_only=True)
class ListProbeConfig(ListObjects):
    """LIST cost: latency, bytes, kube-apiserver CPU and allocations per kind of LIST, from the watch cache and
    from etcd.

    Creates the objects below (ownership-labelled, deleted afterwards) and sends each LIST kind (rv=0,
    consistent, exact, paged, selectors, metadata-only, Table, ...) to the kube-apiserver and, on a crdscale
    local instance, to a second kube-apiserver started with --watch-cache=false on the same etcd: the same
    request on the same objects, once from the watch cache and once from etcd, each place read from the
    server's own counters, with the etcd/cache ratios of latency, CPU and allocated bytes. Reproduces the
    LIST-cost seed (seed 002: LISTs served from etcd read every object) and the metadata-only response of
    the cert-manager PR #7161 (seed 004: 141 MB full vs 86 KB metadata-only for 100 x 1 MB Secrets).

    With --load-shapes it asks instead whether kube-apiserver's memory under concurrent LISTs follows a
    response's bytes or its object count (the APF proposal, seed 003): one namespace of Secrets per shape
    OBJECTSxBYTES (about the same data), LISTed by --load clients per level.
    """

    name: ClassVar[str] = "list"
    module: ClassVar[str] = "crdscale.collect.probes.listcost"
    summary: ClassVar[str] = "LIST latency, bytes and server cost per request kind, from the watch cache and from etcd"

    compare_etcd: bool = option(
        False,
        "send every LIST to a second kube-apiserver with --watch-cache=false on the same etcd too (local instances)",
        flag="--no-etcd-comparison",
    )
    load_levels: tuple[int, ...] = option(
        (),
        "concurrent load: concurrency levels, e.g. 1,4,16 (loopback servers only unless --allow-remote-load; "
        "--load-shapes without it: 1,4,16)",
        flag="--load",
        metavar="LEVELS",
        separator=",",
        group="concurrent load (optional)",
    )
    load_requests: int = option(100, "requests per level", group="concurrent load (optional)")
    load_seconds: float = option(30.0, "time limit per level", metavar="S", group="concurrent load (optional)")
    allow_remote_load: bool = option(
        False, "allow load against a non-loopback cluster (yours)", group="concurrent load (optional)"
    )
    load_shapes: tuple[str, ...] = option(
        (),
        "one response size, two shapes: comma-separated OBJECTSxBYTES, e.g. 40x1000000,4000x10000 (at most "
        "1000000 B per Secret); replaces the per-kind measurement and ignores the object options",
        metavar="SHAPES",
        separator=",",
        group="one response size, two shapes (optional)",
    )
    load_kinds: tuple[str, ...] = option(
        ("rv0",),
        "LISTs per shape: rv0 (resourceVersion=0), consistent (unset), or rv0,consistent",
        metavar="KINDS",
        separator=",",
        group="one response size, two shapes (optional)",
    )

    # A second kube-apiserver costs as much memory as the first: at thousands of CRDs too much for every
    # scenario step, while `crdscale probe list` exists to show both paths.
    cli_defaults: ClassVar[Mapping[str, Any]] = {"compare_etcd": True}

    SHAPE_LOAD_LEVELS: ClassVar[tuple[int, ...]] = (1, 4, 16)

    def validate(self) -> None:
        _non_negative(self, ("load_requests", "load_seconds"))
        if any(level < 1 for level in self.load_levels):
            raise UsageError(f"--load {','.join(map(str, self.load_levels))}: levels must be >= 1")
        if self.load_shapes:
            parse_load_shapes(",".join(self.load_shapes))
            unknown = set(self.load_kinds) - {"rv0", "consistent"}
            if unknown or not self.load_kinds:
                raise UsageError(f"--load-kinds {','.join(self.load_kinds)!r}: choose from rv0, consistent")
            return  # the object options are not used
        super().validate()


# registry/generic/registry/store.go startObservingCount: the object count and size estimate the
# list work estimator reads (and apiserver_resource_objects / apiserver_resource_size_estimate_bytes
# report) are refreshed every --etcd-count-metric-poll-period (1 min by default), each wait jittered
# up to 1.2 periods longer (resourceCountPollPeriodJitter): refreshes are up to 132 s apart. Until
# the first refresh after the objects were created, a new CRD's count is 0 and every LIST of it gets
# the minimum of 1 seat (a CI run observed 1 seat for a 300-object, 856 KB LIST where the size-based
# estimator gives 8).
COUNT_POLL_PERIOD_S = 60.0
COUNT_POLL_JITTER = 1.2
STATS_REFRESH_MAX_S = COUNT_POLL_PERIOD_S * (1 + COUNT_POLL_JITTER)
STATS_WAIT_S = STATS_REFRESH_MAX_S + 18.0


@dataclass(frozen=True, kw_only=True)
class ApfConfig(ListObjects):
    """APF seats: how many seats kube-apiserver's API Priority and Fairness gives each measured LIST.

    Runs the LIST probe's requests, applies both of kube-apiserver's list work estimators to them -- the
    object-count one (1 seat per 100 objects, at most 10) and the size-based one of the APF proposal
    (seed 003: 1 seat per 100 KB of response, at most 10 when streamed from the cache, 100 otherwise;
    on by default since v1.34 as SizeBasedListCostEstimate) -- and replays each LIST as an impersonated
    non-exempt user to read the seats the server itself estimated
    (apiserver_flowcontrol_work_estimated_seats), capped at the priority level's max seats, which it
    reads from the server's nominal concurrency limit and the level's hand size.
    """

    name: ClassVar[str] = "apf"
    module: ClassVar[str] = "crdscale.collect.probes.apfseats"
    summary: ClassVar[str] = "APF seats of LISTs: object-count vs size-based estimator vs the server"

    observe: bool = option(
        True,
        "replay the LISTs as a non-exempt user to read the server's seats",
        flag="--no-observe",
    )
    stats_wait_s: float = option(
        STATS_WAIT_S,
        "wait up to S seconds for the server to refresh the object counts its estimator reads (every 60-132 s); "
        "seats observed from older counts are labelled stats-not-current",
        metavar="S",
    )


# --- discovery and client memory ------------------------------------------------------------------

DISCOVERY_LIMITS = ("legacy", "kubectl-1.24", "disabled")


def validate_limits(names: Iterable[str]) -> list[tokenbucket.RateLimit]:
    """The rate limits ``names`` (presets or ``BURST,QPS``) name; a :class:`UsageError` for one that is neither."""
    from crdscale.models import tokenbucket  # lazy: numpy and pandas, not for --help

    try:
        return [tokenbucket.parse_rate_limit(n) for n in names]
    except ValueError as err:
        raise UsageError(str(err)) from err


# Which discovery client each kubectl version has: (first version, preset or None = aggregated).
# kubectl raised its discovery burst to 300 at 50 QPS in v1.24 (and v1.23.5); it uses
# aggregated discovery, two requests, from v1.30 when the server serves it.
KUBECTL_DISCOVERY = (
    ((1, 0, 0), "legacy"),
    ((1, 23, 5), "kubectl-1.24"),
    ((1, 30, 0), None),
)


def kubectl_limit(version: str) -> tokenbucket.RateLimit | None:
    """The discovery rate limit of kubectl ``version`` (``v1.23.3``), ``None`` for aggregated discovery."""
    from crdscale.models import tokenbucket  # lazy: numpy and pandas, not for --help

    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise UsageError(f"kubectl version {version!r}: expected X.Y.Z")
    key = tuple(int(x) for x in m.groups())
    preset = None
    for first, name in KUBECTL_DISCOVERY:
        if key >= first:
            preset = name
    return tokenbucket.PRESETS[preset] if preset else None


@dataclass(frozen=True, kw_only=True)
class DiscoveryConfig(ProbeConfig):
    """Discovery: how long clients take to discover the API when CRDs add group-versions, and how much of it
    is client-side throttling.

    Runs client-go's legacy discovery (one GET per group-version, through crdscale-client) under each
    token-bucket rate limit, aggregated discovery (one GET), and kubectl. With --sweep it adds CRDs in new
    groups up to each target count of group-versions and compares the measured delay with the token-bucket
    model's. Reproduces the Crossplane one-pager's table (seed 000: kubectl v1.23.3 at (burst 100, 5 qps),
    cold cache, 192 group-versions ~20 s of which ~18.4 s throttling, 368 group-versions ~56 s).
    """

    name: ClassVar[str] = "discovery"
    module: ClassVar[str] = "crdscale.collect.probes.discovery"
    summary: ClassVar[str] = "legacy/aggregated discovery and client-side throttling"

    limits: tuple[str, ...] = option(
        (),
        "rate limits: presets legacy (100,5), kubectl-1.24 (300,50), burst-400 (400,50), disabled, or BURST,QPS "
        "(default: legacy kubectl-1.24 disabled; with --sweep: legacy kubectl-1.24 burst-400 disabled)",
        metavar="LIMIT",
    )
    sweep: bool = option(
        False, "add CRDs in new groups up to each --targets count and compare measured with predicted delays"
    )
    targets: tuple[int, ...] = option((192, 368), "group-version counts for --sweep", metavar="GVS")
    sweep_repeats: int = option(1, "discoveries per limit and target")
    with_kubectl: bool = option(True, "measure kubectl", flag="--no-kubectl")
    kubectl_versions: tuple[str, ...] = option(
        (),
        "kubectl versions to build from Go modules and time (get pods, api-resources), e.g. 1.23.3,1.24.0,1.37.1 "
        "(default: a real kubectl on PATH, if any)",
        flag="--kubectl",
        metavar="VERSIONS",
        separator=",",
    )
    tolerance: float = option(0.15, "sweep: allowed relative error; exit 1 beyond it")

    # The (100, 5) preset waits (N - 100) / 5 s, three minutes at 1,000 group-versions: too long for every step.
    step_defaults: ClassVar[Mapping[str, Any]] = {"limits": ("kubectl-1.24", "disabled")}

    def limit_names(self) -> tuple[str, ...]:
        """The limits to measure: the given ones, else the defaults of the mode."""
        if self.limits:
            return self.limits
        from crdscale.models.tokenbucket import SWEEP_PRESETS  # lazy: numpy and pandas, not for --help

        return tuple(SWEEP_PRESETS) if self.sweep else DISCOVERY_LIMITS

    def validate(self) -> None:
        validate_limits(self.limit_names())
        for version in self.kubectl_versions:
            kubectl_limit(version)  # a malformed version fails before anything is created
        if self.sweep_repeats < 1 or any(t < 1 for t in self.targets):
            raise UsageError("sweep-repeats and targets must be >= 1")


# What the client-memory probe caches, and how a client-go cache may hold it.
CLIENTMEM_CACHES = ("secrets", "configmaps", "custom-resources", "crds")
CLIENTMEM_MODES = ("full", "metadata", "transform")
CLIENTMEM_WATCH_LIST = ("off", "on")


@dataclass(frozen=True, kw_only=True)
class ClientMemConfig(ProbeConfig):
    """Client memory: what a controller's informer cache costs, per object and per CRD, with client-go itself.

    Creates --objects objects of --object-bytes each (or, for --cache crds, installs the CRDs of --crds-from, or
    takes the cluster's) and runs one client-go informer over them in a fresh crdscale-client process per mode
    and WatchList setting: full (decoded objects: typed Secrets, ConfigMaps and CRDs as kube-apiserver and
    controller-runtime hold them, Unstructured maps for custom resources), metadata (a metadata-only informer,
    PartialObjectMetadata, as the garbage collector's), and transform (full, through SetTransform stripping
    managedFields and, of CRDs, spec.versions[*].schema). WatchList is client-go's WatchListClient feature (a
    streaming initial sync instead of a LIST; on by default since client-go 1.35), set per process with
    KUBE_FEATURE_WatchListClient. Reports per run: peak RSS (VmHWM), Go heap after a forced GC minus the heap
    before the informer started (the cache), objects cached, bytes per object and per CRD, the managedFields
    entries and CRD schemas left in the cache, and each mode's ratio to the full cache.

    Reproduces: the cert-manager cainjector PR #7161 (seed 004; the default: 100 x 1 MB Secrets, peak RSS
    ~290 MB -> ~46 MB metadata-only); the Crossplane one-pager's CRD informer caches (seed 000: < ~80 MB of
    heap for provider-jet-aws's ~780 CRDs); crossplane-runtime#1056 (a provider caching ~900 CRDs with their
    schemas at ~1.5 GB until a transform stripped them).
    """

    name: ClassVar[str] = "clientmem"
    module: ClassVar[str] = "crdscale.collect.probes.clientmem"
    summary: ClassVar[str] = (
        "a client-go informer cache: full, metadata-only or transformed; heap per object and per CRD"
    )

    cache: str = option(
        "secrets",
        f"what the client caches: {', '.join(CLIENTMEM_CACHES)} (custom resources of one probe CRD; crds: "
        "every CRD in the cluster)",
        metavar="WHAT",
    )
    objects: int = option(100, "objects to create and cache (not for --cache crds)")
    object_bytes: int = option(1_000_000, "data per object (100 x 1 MB Secrets as in the PR)", metavar="B")
    modes: tuple[str, ...] = option(
        CLIENTMEM_MODES, "cache modes: full, metadata, transform", metavar="MODES", separator=","
    )
    watch_list: tuple[str, ...] = option(
        CLIENTMEM_WATCH_LIST,
        "client-go's WatchListClient feature per run: off (LIST), on (streaming watch-list), or off,on",
        metavar="SETTINGS",
        separator=",",
    )
    crds_from: str = option(
        "",
        "--cache crds: install the CRDs under PATH first (files, directories, tarballs, Crossplane packages); "
        "removed afterwards",
        metavar="PATH",
        group="CRDs (--cache crds)",
    )
    crd_match: str = option(
        "", "only the CRDs of --crds-from whose name matches REGEX", metavar="REGEX", group="CRDs (--cache crds)"
    )
    crd_limit: int = option(0, "at most N CRDs of --crds-from, in file order (0: all)", group="CRDs (--cache crds)")

    def validate(self) -> None:
        _non_negative(self, ("objects", "object_bytes", "crd_limit"))
        if self.cache not in CLIENTMEM_CACHES:
            raise UsageError(f"--cache {self.cache!r}: choose from {', '.join(CLIENTMEM_CACHES)}")
        for name, values, known in (
            ("modes", self.modes, CLIENTMEM_MODES),
            ("watch-list", self.watch_list, CLIENTMEM_WATCH_LIST),
        ):
            unknown = [v for v in values if v not in known]
            if unknown or not values:
                raise UsageError(f"--{name} {','.join(values)!r}: choose from {', '.join(known)}")
        if self.object_bytes > 1_000_000:
            raise UsageError("objects hold at most 1 MB of data each (etcd's request limit)")
        if self.cache != "crds" and (self.crds_from or self.crd_match or self.crd_limit):
            raise UsageError("--crds-from, --crd-match and --crd-limit go with --cache crds")
        if self.crd_match:
            try:
                re.compile(self.crd_match)
            except re.error as err:
                raise UsageError(f"--crd-match {self.crd_match!r}: {err}") from err
        if self.crds_from:
            if not Path(self.crds_from).exists():
                raise UsageError(f"--crds-from {self.crds_from}: no such file or directory")


# The one registry of probes, in the order `crdscale probe --help` lists them. Adding a probe: its config
# class (with name, module, entry and summary) and one entry here.
PROBES: dict[str, type[ProbeConfig]] = {
    cls.name: cls for cls in (DiscoveryConfig, ListProbeConfig, ApfConfig, ClientMemConfig)
}


# --- the two ways in: CLI flags and scenario options -------------------------------------------------


def _fields(cls: type[ProbeConfig]) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


def _field(cls: type[ProbeConfig], name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def _element_type(hint: Any) -> type:
    args = typing.get_args(hint)
    return args[0] if args else str


def _split(text: str, separator: str, kind: type, flag: str) -> tuple:
    try:
        return tuple(kind(x.strip()) for x in text.split(separator) if x.strip())
    except ValueError as err:
        raise UsageError(f"{flag} {text!r}: expected {kind.__name__} values separated by {separator!r}") from err


def flag_of(f: dataclasses.Field) -> str:
    """The CLI flag of field ``f``."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser, cls: type[ProbeConfig]) -> None:
    """Add one flag per field of ``cls`` to ``parser`` (fields sharing a ``group`` in an argument group)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    defaults = {f.name: f.default for f in dataclasses.fields(cls)} | dict(cls.cli_defaults)
    for f, hint in _fields(cls):
        meta = f.metadata
        if not meta.get("cli", True):
            continue
        title = meta.get("group")
        target = groups.setdefault(title, parser.add_argument_group(title)) if title else parser
        default, flag, text = defaults[f.name], flag_of(f), meta.get("help", "")
        if hint is bool:
            action = "store_false" if default else "store_true"
            text = f"do not {text}" if default else text  # the flag turns a default-on field off
            target.add_argument(flag, dest=f.name, action=action, default=default, help=text)
            continue
        kind = _element_type(hint) if typing.get_origin(hint) is tuple else hint
        metavar = meta.get("metavar") or ("N" if kind is int else None)
        if typing.get_origin(hint) is tuple:
            shown = meta["separator"].join(map(str, default)) if meta.get("separator") else " ".join(map(str, default))
            text += f" (default {shown})" if default and "default" not in text else ""
            if meta.get("separator"):
                target.add_argument(flag, dest=f.name, default=None, metavar=metavar, help=text)
            else:
                target.add_argument(flag, dest=f.name, nargs="+", type=kind, default=None, metavar=metavar, help=text)
        else:
            shown = f" (default {default})" if default != "" else ""  # an empty string default reads as "not set"
            target.add_argument(flag, dest=f.name, type=kind, default=default, metavar=metavar, help=text + shown)


def from_args(cls: type[ProbeConfig], args: argparse.Namespace):
    """The config ``cls`` the parsed CLI ``args`` describe (validated)."""
    values = {}
    defaults = {f.name: f.default for f in dataclasses.fields(cls)} | dict(cls.cli_defaults)
    for f, hint in _fields(cls):
        value = getattr(args, f.name, None) if f.metadata.get("cli", True) else None
        if typing.get_origin(hint) is tuple:
            if isinstance(value, str):
                value = _split(value, f.metadata["separator"], _element_type(hint), flag_of(f))
            value = defaults[f.name] if value is None else tuple(value)
        elif value is None:
            value = defaults[f.name]
        values[f.name] = value
    config = cls(**values)
    check_numbers(config)
    config.validate()
    return config


def check_numbers(config: ProbeConfig, name_of: Callable[[dataclasses.Field], str] = flag_of) -> None:
    """Every number a probe takes is a count, a size, a duration or a tolerance: finite and >= 0
    (``--stats-wait-s nan``, ``--tolerance -1`` are refused before connecting). :class:`UsageError` naming
    the option by ``name_of`` (its flag; a scenario's table: its key)."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value) or value < 0:
                raise UsageError(f"{name_of(f)} must be a finite number >= 0, got {value!r}")


def from_options(name: str, options: Mapping[str, Any] | ProbeConfig | None):
    """The config of probe ``name`` from a scenario's ``[probes.options.NAME]`` table (validated).

    Keys are the class's field names; an unknown key, a value of the wrong type or one the probe cannot run
    with is a :class:`UsageError` that starts with the table (``[probes.options.NAME]``). An existing config
    passes through (validated)."""
    if name not in PROBES:
        raise UsageError(f"unknown probe {name!r}; known: {', '.join(PROBES)}")
    cls = PROBES[name]
    if isinstance(options, ProbeConfig):
        options.validate()
        return options
    options = dict(options or {})
    known = {f.name: hint for f, hint in _fields(cls)}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise UsageError(
            f"[probes.options.{name}]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    values = dict(cls.step_defaults)
    for key, value in options.items():
        hint = known[key]
        kind = _element_type(hint) if typing.get_origin(hint) is tuple else hint
        if typing.get_origin(hint) is tuple and isinstance(value, str):  # "1,4,16", as on the command line
            value = _split(value, _field(cls, key).metadata.get("separator") or ",", kind, key)
        items = value if typing.get_origin(hint) is tuple and isinstance(value, list | tuple) else [value]
        for item in items:
            ok = isinstance(item, kind) and not (kind is not bool and isinstance(item, bool))
            if not (ok or (kind is float and isinstance(item, int) and not isinstance(item, bool))):
                raise UsageError(f"[probes.options.{name}] {key} = {value!r}: expected {hint}".replace("typing.", ""))
        values[key] = tuple(value) if typing.get_origin(hint) is tuple else value
    config = cls(**values)
    try:
        check_numbers(config, name_of=lambda f: f.name)
        config.validate()
    except UsageError as err:
        raise UsageError(f"[probes.options.{name}]: {err}") from None
    return config


def check_scenario_probes(section: Mapping[str, Any]) -> dict[str, ProbeConfig]:
    """A scenario's ``[probes]`` table checked before anything starts: every ``each_step`` name is a probe
    and its ``options`` table makes a valid config. Returns the configs by name; raises :class:`UsageError`
    starting with the key at fault (``'probes.each_step'``, ``[probes.options]``, ``[probes.options.NAME]``)."""
    names = list(section.get("each_step") or [])
    options = dict(section.get("options") or {})
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise UsageError(f"'probes.each_step': unknown probe {unknown[0]!r}; known: {', '.join(PROBES)}")
    stray = sorted(set(options) - set(names))
    if stray:
        raise UsageError(f"[probes.options]: {', '.join(stray)} not in [probes] each_step")
    return {name: from_options(name, options.get(name)) for name in names}
