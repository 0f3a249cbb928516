"""Scenario files (TOML): parsing and validation with errors that name the key.

A scenario is the built-in default (``default.toml`` beside this file) overlaid
with the user's file, so a file only needs the keys it changes.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from crdscale.cluster.kubesource import check_tree
from crdscale.crds.options import SERVE_MODES
from crdscale.errors import UsageError
from crdscale.rundir.layout import OTHER_COMPONENTS, PROFILE_KINDS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

METRIC_SOURCES = ("auto", "prometheus", "direct")
TARGET_KINDS = ("local", "kubeconfig")
GROW_MODES = ("crds", "objects")
# The LIST kinds of crdscale.collect.probes.requests that apply to a run's objects as they are
# (the others need the LIST probe's own objects: its bucket label, a field, an old revision).
OBJECT_LIST_KINDS = (
    "consistent", "rv0", "paged", "paged-rv0", "metadata-only", "metadata-only-rv0", "exact", "not-older-than",
)  # fmt: skip


def _serve_modes() -> tuple[str, ...]:
    return SERVE_MODES


def _openapi_v2_modes() -> tuple[str, ...]:
    from crdscale.collect.openapi import OPENAPI_V2_FORMATS  # lazy: it imports requests, `--help` must not

    return ("none", *OPENAPI_V2_FORMATS)


def _object_shapes() -> tuple[str, ...]:
    # lazy: would bring yaml into --help
    from crdscale.crds.objects import SHAPES

    return SHAPES


def _apply_modes() -> tuple[str, ...]:
    # lazy: would bring yaml into --help
    from crdscale.crds.objects import APPLY_MODES

    return APPLY_MODES


def _control_kinds() -> tuple[str, ...]:
    # lazy: would bring yaml into --help
    from crdscale.crds.objects import CONTROL_KINDS

    return CONTROL_KINDS


# Upper bounds no real run comes near; values past them are typing mistakes (``repeat = 1000000000``)
# that would otherwise pass `run --check` and fail, or hang, later.
WEEK_S = 7 * 24 * 3600
NAME_MAX = 100  # the run directory is <UTC timestamp>-<name>[-<cell>]: well inside a file name's 255 bytes


def key(
    default: Any,
    help: str,  # noqa: A002 - the word the reference uses
    *,
    unit: str | None = None,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    choices: tuple | Callable[[], tuple] | None = None,
    max_len: int | None = None,
    min_len: int | None = None,
    unset: Any = None,
) -> Any:
    """A scenario field declared once: ``default`` is what the built-in scenario (``default.toml``)
    holds (``None``: unset there), ``help`` one line for the reference. ``gt``/``ge``/``le`` bound a
    number (numbers must also be finite), ``choices`` the allowed values (of each item for a list;
    a function when they live in a module `--help` must not import), ``min_len``/``max_len`` a string's length.
    ``unset``: the value a section holds when the key is unset (``default`` ``None``), so code
    reading it never needs its own fallback."""
    bounds = {"unit": unit, "gt": gt, "ge": ge, "le": le, "choices": choices, "max_len": max_len, "min_len": min_len}
    meta = {"help": help, "toml_default": default, **bounds}
    value = unset if default is None else default
    if isinstance(value, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(value), metadata=meta)
    return field(default=value, metadata=meta)


@dataclass(frozen=True)
class Top:
    """Top-level keys (``section`` ``""``)."""

    name: str = key("default", "names the run directory (runs/<UTC timestamp>-<name>)", max_len=NAME_MAX)
    description: str | None = key(None, "one line for reports; unset: derived from the settings")


@dataclass(frozen=True)
class Target:
    """``[target]``: what is measured. A new key is one field here (a ``[matrix]`` axis at once)."""

    kind: str = key(
        "local", '"local" (crdscale starts etcd + kube-apiserver) or "kubeconfig" (a cluster)', choices=TARGET_KINDS
    )
    kube_version: str = key("1.37.1", "kube-apiserver release X.Y.Z, built from Go modules and cached")
    kube_source: str | None = key(None, "build kube-apiserver from this source tree instead (cached per commit+diff)")
    etcd: str = key("v3.6.16", 'etcd version built from Go modules, "system" (etcd on PATH) or a path')
    apiserver_flags: list[str] = key([], 'extra kube-apiserver flags, e.g. ["--v=2"]')
    env: dict[str, str] = key({}, 'Go runtime env for kube-apiserver, e.g. { GOGC = "50", GOMEMLIMIT = "2GiB" }')
    apiserver_binary: str | None = key(None, "run this kube-apiserver binary instead of building one")
    controller_manager: bool = key(
        True,
        "run kube-controller-manager (same version) as real clusters do: its GC and quota controllers watch every CRD",
    )
    controller_manager_controllers: list[str] = key(
        ["*", "-podgc"],
        '--controllers; "-podgc": the pod GC would delete probe Pods bound to a node no kubelet runs',
    )
    controller_manager_flags: list[str] = key(
        None, "extra kube-controller-manager flags, checked against the binary's own", unset=[]
    )
    # Changes to the release (crdscale ab, docs/how-to/evaluate-a-pull-request.md): each a [matrix] axis too.
    patches: list[str] = key(
        None,
        "unified diffs (a forge's <pull request>.diff) applied to the release's module sources; no checkout needed",
        unset=[],
    )
    build_tags: list[str] = key(None, 'go build -tags for kube-apiserver, e.g. ["fieldsv1string"]', unset=[])
    feature_gates: dict[str, bool] = key(
        None, "feature gates that version defines, e.g. { CBORServingAndStorage = true }", unset={}
    )
    go: str = key(
        None,
        '"local" (this machine\'s Go), "release" (the Go the release shipped with) or a Go version',
        unset="local",
    )
    kubeconfig: str | None = key(None, 'kubeconfig of the cluster for kind = "kubeconfig" ("a.yaml:b.yaml" merged)')
    context: str | None = key(None, "kubeconfig context; unset: its current-context")
    prometheus_url: str | None = key(None, "an existing Prometheus scraping the cluster")
    prometheus_jobs: dict[str, str] | None = key(
        None, 'that Prometheus\' job label per source, e.g. { apiserver = "apiserver" }'
    )
    prometheus_bearer_token_file: str | None = key(None, "file with its bearer token (or $CRDSCALE_PROMETHEUS_TOKEN)")
    prometheus_username: str | None = key(None, "basic-auth user for it, with prometheus_password_file")
    prometheus_password_file: str | None = key(
        None, "file with the basic-auth password (or $CRDSCALE_PROMETHEUS_PASSWORD)"
    )
    prometheus_ca_file: str | None = key(None, "verify its certificate with this CA bundle")
    prometheus_insecure_skip_tls_verify: bool | None = key(None, "do not verify its certificate (explicit only)")

    def table(self) -> dict[str, Any]:
        """The section as the TOML table it came from (unset keys ``None``), for readers of a table
        such as :meth:`crdscale.collect.prometheus.PrometheusAccess.from_target`."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Crds:
    """``[crds]``: the CRD set. Generator keys left unset come from the preset."""

    source: str = key("generate", '"generate", or a directory / file of real CRDs', min_len=1)
    preset: str = key("apigen", 'generator preset: "apigen" (flat schemas) or "provider" (Crossplane-like)')
    count: int = key(500, "CRDs to generate", ge=0)
    groups: int = key(50, "API groups they are spread over, round-robin", ge=0)
    property_count: int = key(100, "properties per CRD schema, nested ones included; 0: random 1..100", ge=0)
    versions: int | None = key(None, "versions per CRD, each repeating the schema (preset: apigen 1, provider 2)")
    max_depth: int | None = key(None, "levels of nested properties (preset: apigen 8, provider 4)")
    description_length: int | None = key(None, "description characters per property (preset: apigen 0, provider 120)")
    scope: str | None = key(None, '"Cluster", "Namespaced" or "mixed" (default Cluster)')
    printer_columns: int | None = key(None, "additional printer columns per version (preset: apigen 0, provider 4)")
    categories: list[str] | None = key(
        None, "spec.names.categories of every CRD (preset: provider: crossplane, managed)"
    )
    shape: str | None = key(None, '"flat" or "provider" (spec.forProvider/status.atProvider); from the preset')
    group_suffix: str | None = key(None, "DNS suffix of generated groups (default crdscale.example.org)")
    seed: int = key(1, "random seed: the same parameters and seed give the same CRDs")
    cel_rules: int | None = key(
        None,
        "upjet-shaped CEL rules on each version's spec, one per top-level parameter up to this many (provider)",
        ge=0,
    )

    def generator_params(self):
        """The :class:`~crdscale.crds.generate.GeneratorParams` these keys generate (``source = "generate"``)."""
        # lazy: would bring yaml into --help
        from crdscale.crds.generate import preset

        fields = self.generator_fields()
        if "categories" in fields:
            fields["categories"] = tuple(fields["categories"])
        return preset(self.preset, **fields).validate()

    def generator_fields(self) -> dict[str, Any]:
        """The keys set (not ``source``/``preset``) as :class:`~crdscale.crds.generate.GeneratorParams` fields."""
        return {
            GENERATOR_FIELD.get(f.name, f.name): getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("source", "preset") and getattr(self, f.name) is not None
        }


@dataclass(frozen=True)
class Steps:
    """``[steps]``: how the set is installed, served and settled."""

    count: int = key(5, "install the CRD set in this many equal steps", gt=0, le=10_000)
    size: int | None = key(None, "CRDs per step instead (wins over count; the last step takes the rest)", gt=0)
    serve: str = key(
        "watch",
        '"none", "list" (one LIST per new resource) or "watch" (LIST + a watch kept open)',
        choices=_serve_modes,
    )
    serve_clients: int = key(1, "watch: client-go informer processes sharing the resources", gt=0, le=1_000)
    settle_seconds: float = key(
        15,
        "wait after serving, before profiling, so transient garbage is collected",
        unit="s",
        ge=0,
        le=WEEK_S,
    )
    settle_queues: bool = key(
        True,
        "after settle_seconds, also wait until kube-apiserver's CRD work queues are idle (OpenAPI merges, discovery)",
    )
    settle_queues_timeout_seconds: float = key(
        900,
        "longest wait for those queues; the profile is then taken anyway and the event says so",
        unit="s",
        gt=0,
        le=WEEK_S,
    )
    hold_seconds: float = key(
        0, "after the last step, keep serving this long (watches stay open)", unit="s", ge=0, le=WEEK_S
    )
    memory_guard_mib: int = key(
        1024,
        "local target: stop the run (failed) when less memory is available",
        unit="MiB",
        ge=0,
        le=2**20,  # 1 TiB
    )
    establish_timeout_seconds: float = key(
        300, "how long a CRD may take to become Established", unit="s", gt=0, le=WEEK_S
    )
    concurrency: int = key(8, "CRD creations in flight", gt=0, le=1_000)
    qps: float = key(0, "client-side limit on CRD creations per second; 0: none", unit="1/s", ge=0, le=1e6)
    on_rejected: str = key(
        None,
        '"stop" (default) or "continue" past CRDs the server rejects',
        choices=("stop", "continue"),
        unset="stop",
    )
    grow: str = key(
        "crds",
        '"crds" (steps install CRDs) or "objects" (all CRDs first, then steps add [objects], one kind per step)',
        choices=GROW_MODES,
    )


@dataclass(frozen=True)
class Profiles:
    """``[profiles]``: the pprof profiles taken at each step."""

    kinds: list[str] = key(
        ["heap"], "profiles after every step: any of heap, allocs, goroutine, cpu", choices=PROFILE_KINDS
    )
    cpu_seconds: int = key(10, "length of a cpu profile", unit="s", gt=0, le=3_600)
    installed_phase: bool = key(True, "also profile after a step's CRDs are Established, before serving")
    openapi_v2: str = key(
        "none",
        '"protobuf" (as kubectl) or "json": after each step\'s profile, GET /openapi/v2 and profile again',
        choices=_openapi_v2_modes,
    )
    components: list[str] = key(
        list(OTHER_COMPONENTS),
        "also heap-profile these at every profile mark (a local target's; others are skipped, saying why)",
        choices=OTHER_COMPONENTS,
    )


@dataclass(frozen=True)
class Metrics:
    """``[metrics]``: the time series recorded over the run."""

    source: str = key(
        "auto",
        '"auto" (local Prometheus if installed, else direct scrapes), "prometheus", "direct"',
        choices=METRIC_SOURCES,
    )
    scrape_interval_seconds: float = key(
        1, "/proc (RSS, CPU, fds, threads) and etcd sampling interval", unit="s", ge=0.1, le=3_600
    )
    apiserver_metrics_interval_seconds: float = key(
        20, "kube-apiserver /metrics interval (longer when a scrape outlasts it)", unit="s", ge=0.1, le=3_600
    )
    apiserver_cpu_budget_percent: float = key(
        5, "longer still while scrapes cost more than this share of its CPU; 0: never", unit="%", ge=0, le=100
    )


@dataclass(frozen=True)
class Objects:
    """``[objects]``: what steps add when ``steps.grow = "objects"``."""

    count: int = key(
        0, 'custom resources per CRD, added over steps.count steps (steps.grow = "objects")', ge=0, le=10_000_000
    )
    bytes: int = key(1024, "JSON bytes of each object as sent (within 1 %); at most 1.5 MiB, etcd's limit", unit="B")
    shape: str = key(
        "flat",
        '"flat" (strings), "nested" (maps of maps), "list" (a list of small maps), "schema" (the CRD\'s own schema)',
        choices=_object_shapes,
    )
    managed_fields: bool = key(
        True, "the server records managedFields; false: created with managedFields [{}], which records none"
    )
    apply: str = key(
        "create", '"create" (POST) or "server-side-apply" (PATCH, field manager crdscale)', choices=_apply_modes
    )
    concurrency: int = key(16, "object writes in flight", gt=0, le=1_000)
    crd_steps: int = key(
        1, "the CRDs first, in this many equal profiled steps; more than one: heap per CRD from increments too", gt=0,
        le=10_000,
    )  # fmt: skip
    control: list[str] = key(
        [],
        'built-in kinds of the same count and bytes, in their own namespace: "configmaps", "secrets"',
        choices=_control_kinds,
    )
    list_repeats: int = key(
        0,
        "> 0: after the last object step, time each list_kinds LIST of every kind this often; 0: not measured",
        ge=0,
        le=10_000,
    )
    list_kinds: list[str] = key(
        ["consistent", "rv0", "paged", "paged-rv0"],
        "LISTs timed: consistent, rv0, paged, paged-rv0, metadata-only, metadata-only-rv0, exact, not-older-than",
        choices=OBJECT_LIST_KINDS,
    )


@dataclass(frozen=True)
class Probes:
    """``[probes]``: probes run at every step."""

    each_step: list[str] = key([], 'probes run after every step, e.g. ["discovery"]')
    options: dict[str, dict] = key(None, "options per probe: { probe = { option = value } }", unset={})

    def table(self) -> dict[str, Any]:
        """The section as a TOML table (for :func:`crdscale.collect.probes.configs.check_scenario_probes`)."""
        return dataclasses.asdict(self)


# The sections, in file order: section name -> its class ("" = the top-level keys).
SECTIONS: dict[str, type] = {
    "": Top,
    "target": Target,
    "crds": Crds,
    "steps": Steps,
    "profiles": Profiles,
    "metrics": Metrics,
    "objects": Objects,
    "probes": Probes,
}


def _toml_type(annotation: Any) -> type | tuple[type, ...]:
    """What a TOML file must give for a field annotated ``annotation``: ``float`` takes integers too."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if _is_union(annotation) else [annotation]
    (inner,) = args
    origin = typing.get_origin(inner) or inner
    return (int, float) if origin is float else origin


def _item_type(annotation: Any) -> type | None:
    """``str`` for ``list[str]`` (or ``list[str] | None``); ``None`` for anything else."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if _is_union(annotation) else [annotation]
    (inner,) = args
    if typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        return item if isinstance(item, type) else None
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


@dataclass(frozen=True)
class Key:
    """One scenario key, made from its section's field: ``name`` is ``section.key`` (``name``/``description``
    at the top level), ``type`` what a file must give, ``default`` what the built-in scenario holds
    (``None``: unset, see ``help``), ``help`` one line for people and the scenario reference, and the
    bounds :func:`key` declared."""

    name: str
    type: type | tuple[type, ...]
    default: Any
    help: str
    unit: str | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    choices: tuple | Callable[[], tuple] | None = None
    max_len: int | None = None
    min_len: int | None = None
    item_type: type | None = None  # what each entry of a list must be

    @property
    def section(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def key(self) -> str:
        return self.name.rpartition(".")[2]

    def bounds(self) -> str:
        """What the declaration allows beyond the type, for the reference: ``" (s; >= 0, <= 604,800)"``."""
        parts = [
            f"> {_num(self.gt)}" if self.gt is not None else "",
            f">= {_num(self.ge)}" if self.ge is not None else "",
        ]
        parts += [f"<= {_num(self.le)}" if self.le is not None else ""]
        parts += [f"at most {self.max_len} characters" if self.max_len is not None else ""]
        said = ", ".join(p for p in parts if p)
        if self.unit and said:
            return f" ({self.unit}; {said})"
        return f" ({self.unit or said})" if self.unit or said else ""

    def check(self, value: Any, where: str) -> None:
        """:class:`UsageError` naming the key when ``value`` (of the right type) is out of its declared range."""
        if value is None:
            return
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{where}: '{self.name}' must be a finite number, got {value!r}")
        if self.gt is not None and value <= self.gt:
            raise UsageError(f"{where}: '{self.name}' must be > {_num(self.gt)}, got {value!r}")
        if self.ge is not None and value < self.ge:
            raise UsageError(f"{where}: '{self.name}' must be >= {_num(self.ge)}, got {value!r}")
        if self.le is not None and value > self.le:
            unit = f" {self.unit}" if self.unit else ""
            raise UsageError(f"{where}: '{self.name}' must be <= {_num(self.le)}{unit}, got {value!r}")
        if self.min_len is not None and len(value) < self.min_len:
            raise UsageError(f"{where}: '{self.name}' must not be empty")
        if self.item_type is not None and isinstance(value, list):
            for item in value:
                if not isinstance(item, self.item_type) or isinstance(item, bool) is not (self.item_type is bool):
                    raise UsageError(
                        f"{where}: '{self.name}' entries must each be {_type_name(self.item_type)}, got {item!r}"
                    )
        if self.max_len is not None and len(value) > self.max_len:
            raise UsageError(f"{where}: '{self.name}' must be at most {self.max_len} characters, got {len(value)}")
        if self.choices is not None:
            allowed = self.choices() if callable(self.choices) else self.choices
            for item in value if isinstance(value, list) else [value]:
                _choice(item, allowed, self.name, where)


def _num(value: float) -> str:
    """``10,000``, ``0.1``: a bound as people write it."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _keys() -> tuple[Key, ...]:
    out = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            m = f.metadata
            out.append(
                Key(
                    f"{section}.{f.name}" if section else f.name,
                    _toml_type(hints[f.name]),
                    m["toml_default"],
                    m["help"],
                    **{k: m[k] for k in ("unit", "gt", "ge", "le", "choices", "max_len", "min_len")},  # the bounds
                    item_type=_item_type(hints[f.name]),
                )
            )
    return tuple(out)


# Every scenario key, made from the section classes above. Validation (SCHEMA and Key.check), `--set`
# typing and the scenario reference come from here; default.toml (the defaults with comments, printed
# by `run --print-default`) is tested to agree.
KEYS: tuple[Key, ...] = _keys()
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}

# section -> key -> expected type(s), from KEYS. Anything else in a file is an error naming it.
SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {"": {}}
for _key in KEYS:
    SCHEMA.setdefault(_key.section, {})[_key.key] = _key.type
del _key


def scenario_reference():
    """``(section, key, type name, default, help)`` per scenario key, in file order, for the
    scenario reference (``section`` is ``""`` for top-level keys; ``default`` ``None`` = unset)."""
    for key in KEYS:
        yield key.section, key.key, _type_name(key.type), key.default, key.help + key.bounds()


# Keys whose value is a free-form table (merged whole, addressed as section.key.NAME).
FREE_TABLES = ("env", "options", "prometheus_jobs", "feature_gates")

# The table of experiment axes (see crdscale.scenario.matrix); not a scenario section.
MATRIX = "matrix"
# Bounds no experiment comes near: each cell is a run of minutes, so past them a matrix is a typing mistake.
MATRIX_REPEAT_MAX = 1_000
MATRIX_CELLS_MAX = 10_000

# Scenario [crds] keys -> GeneratorParams fields where the names differ.
GENERATOR_FIELD = {"count": "crd_count", "groups": "group_count"}


def _section(cls: type, table: dict[str, Any]):
    """The typed section from its (validated) TOML table."""
    return cls(**table)


@dataclass
class Scenario:
    """A validated scenario: typed sections (``scenario.steps.concurrency``) and ``raw``, the merged
    TOML (recorded in the run manifest)."""

    name: str
    description: str
    target: Target
    crds: Crds
    steps: Steps
    profiles: Profiles
    metrics: Metrics
    probes: Probes
    objects: Objects = field(default_factory=Objects)
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    source_path: str | None = None
    # The [matrix] table flattened to ``dotted.key -> values`` (``repeat`` -> N); empty for one run.
    matrix: dict[str, Any] = field(default_factory=dict)
    # What the file said (without [matrix]) and the --set overrides, so matrix cells can be rebuilt from them.
    user: dict[str, Any] = field(repr=False, default_factory=dict)
    overrides: dict[str, Any] = field(repr=False, default_factory=dict)
    # Matrix axes an override replaced by its one value: ``dotted.key -> the file's values`` (see _pin_axes).
    replaced_axes: dict[str, list] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.target.kind == "local"

    def summary(self) -> str:
        """One line saying what the scenario does, e.g. for the run's first line and reports."""
        c, st, t = self.crds, self.steps, self.target
        if c.source == "generate":
            what = f"{c.count} generated CRDs ({c.groups} groups, {c.property_count} properties, {c.preset} preset)"
        else:
            what = f"the CRDs in {c.source}"
        steps = f"{st.size} per step" if st.size is not None else f"{st.count} steps"
        serve = {"none": "not served", "list": "each LISTed once", "watch": "each LISTed and watched"}[st.serve]
        if self.is_local and t.kube_source:
            where = f"a local kube-apiserver built from {t.kube_source} (etcd {t.etcd or 'default'})"
        elif self.is_local:
            where = f"a local kube-apiserver v{t.kube_version.lstrip('v')} (etcd {t.etcd or 'default'})"
        else:
            where = f"the cluster of {t.kubeconfig}"
        if self.grows_objects:
            o = self.objects
            control = f" and the same in {' and '.join(o.control)}" if o.control else ""
            return (
                f"{what} installed{f' in {o.crd_steps} steps' if o.crd_steps > 1 else ''}, then {o.count} "
                f"{o.shape} custom resources of "
                f"{o.bytes} bytes per CRD{control} added in {st.count} steps each, {serve}, on {where}"
            )
        return f"{what} installed in {steps}, {serve}, on {where}"

    @property
    def grows_objects(self) -> bool:
        """Steps add objects (``steps.grow = "objects"``), not CRDs."""
        return self.steps.grow == "objects"

    def object_steps(self) -> list[tuple[str, int]]:
        """What each object step adds: ``(kind, per_crd)`` for ``steps.grow = "objects"`` (else empty).

        ``kind`` is ``customresources`` (``per_crd`` objects of every CRD) or a control kind
        (``per_crd`` × CRDs objects in its own namespace). Rounds interleave the kinds, so drift
        over the run (GC timing, caches warming) falls on every kind alike, and each step
        adds one kind only: its increment belongs to that kind.
        """
        if not self.grows_objects:
            return []
        # lazy: would bring yaml into --help
        from crdscale.crds.objects import CUSTOM_RESOURCES

        count, rounds = self.objects.count, self.steps.count
        base, extra = divmod(count, rounds)
        kinds = [CUSTOM_RESOURCES, *self.objects.control]
        return [(kind, base + (1 if r < extra else 0)) for r in range(rounds) for kind in kinds]

    def generator_params(self):
        """The :class:`~crdscale.crds.generate.GeneratorParams` for ``[crds] source = "generate"``."""
        return self.crds.generator_params()

    def step_sizes(self, total: int) -> list[int]:
        """How many CRDs each step installs (sizes differ by at most one; ``size`` wins over ``count``)."""
        if total == 0:
            return []
        if self.steps.size is not None:
            size = self.steps.size
            return [min(size, total - i) for i in range(0, total, size)]
        count = min(self.steps.count, total)
        base, extra = divmod(total, count)
        return [base + (1 if i < extra else 0) for i in range(count)]

    def crd_step_sizes(self, total: int) -> list[int]:
        """How many CRDs each CRD step installs: :meth:`step_sizes`, or with ``steps.grow = "objects"``
        ``objects.crd_steps`` equal steps (the object steps follow)."""
        if not self.grows_objects:
            return self.step_sizes(total)
        if total == 0:
            return []
        count = min(self.objects.crd_steps, total)
        base, extra = divmod(total, count)
        return [base + (1 if i < extra else 0) for i in range(count)]

    def with_setting(self, dotted: str, value: Any) -> None:
        """Set ``section.key`` to ``value`` in the typed section and in ``raw`` (in place): for the
        few values resolved after parsing (paths made absolute)."""
        section, _, name = dotted.partition(".")
        setattr(self, section, dataclasses.replace(getattr(self, section), **{name: value}))
        self.raw[section][name] = value


def default_text() -> str:
    return resources.files("crdscale.scenario").joinpath("default.toml").read_text()


def _merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in FREE_TABLES:
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _type_name(t) -> str:
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }
    if isinstance(t, tuple):
        return " or ".join(names[x] for x in t)
    return names[t]


def _check_types(data: dict, where: str) -> None:
    for key, value in data.items():
        if key in SCHEMA and key != "":
            if not isinstance(value, dict):
                raise UsageError(f"{where}: [{key}] must be a table")
            for sub, subvalue in value.items():
                expected = SCHEMA[key].get(sub)
                if expected is None:
                    raise UsageError(f"{where}: unknown key '{key}.{sub}' (known: {', '.join(sorted(SCHEMA[key]))})")
                ok = isinstance(subvalue, expected) and not (
                    isinstance(subvalue, bool) and expected in (int, (int, float))
                )
                if not ok:
                    raise UsageError(f"{where}: '{key}.{sub}' must be {_type_name(expected)}, got {subvalue!r}")
        elif key in SCHEMA[""]:
            if not isinstance(value, SCHEMA[""][key]):
                raise UsageError(f"{where}: '{key}' must be {_type_name(SCHEMA[''][key])}, got {value!r}")
        else:
            known = sorted(set(SCHEMA[""]) | {f"[{s}]" for s in SCHEMA if s})
            raise UsageError(f"{where}: unknown key '{key}' (known: {', '.join(known)})")


def _choice(value, allowed, key: str, where: str) -> None:
    if value not in allowed:
        raise UsageError(f"{where}: '{key}' must be one of {', '.join(allowed)}, got {value!r}")


def flatten_keys(table: dict, prefix: str = "", *, where: str = "scenario") -> dict[str, Any]:
    """``{"target": {"env": {"GOGC": [..]}}}`` -> ``{"target.env.GOGC": [..]}`` (TOML dotted keys,
    quoted or not, end up the same). A key written both ways (``"steps.count" = [1, 2]`` beside
    ``steps.count = [3, 4]``) is :class:`UsageError`: one of the two would be lost."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        found = flatten_keys(value, name + ".", where=where) if isinstance(value, dict) else {name: value}
        for twice in found.keys() & out.keys():
            raise UsageError(f"{where}: '{twice}' is given twice (as a quoted and as a dotted key)")
        out.update(found)
    return out


def declared_type(key: str) -> type | tuple[type, ...] | None:
    """The type :data:`SCHEMA` declares for the dotted scenario ``key`` (``str`` for a name inside
    ``target.env`` or ``target.prometheus_jobs``); ``None`` when it declares none (unknown keys,
    ``probes.options`` entries)."""
    parts = key.split(".")
    if len(parts) == 1:
        return SCHEMA[""].get(parts[0])
    section = SCHEMA.get(parts[0]) if parts[0] else None
    if section is None:
        return None
    if len(parts) == 2:
        return section.get(parts[1])
    if len(parts) == 3 and parts[0] == "target" and parts[1] in ("env", "prometheus_jobs"):
        return str  # the Go runtime reads strings (GOGC=50 is "50"), and job labels are strings
    return None


def parse_override(key: str, text: str) -> Any:
    """The value of ``--set KEY=TEXT``: ``TEXT`` read as a TOML value, then typed by what
    :data:`SCHEMA` declares for ``key``, so a value means what the key needs.

    A string key takes ``TEXT`` as written unless it is a quoted TOML string: ``1.30``
    stays ``"1.30"`` (a version, not the number 1.3), ``GOGC=50`` is ``"50"``. A list key
    takes a TOML array, or a comma-separated list of words (``heap,cpu``). Anything that
    does not fit the declared type is left as parsed, for validation to name.
    """
    text = text.strip()
    try:
        value = tomllib.loads(f"v = {text}")["v"]
        parsed = True
    except tomllib.TOMLDecodeError:
        value, parsed = text, False  # a bare word: take it as a string
    expected = declared_type(key)
    if expected is str:
        return value if parsed and isinstance(value, str) else text
    if expected is list and not isinstance(value, list):
        return [part.strip() for part in text.split(",") if part.strip()] if not parsed else [value]
    return value


def set_key(data: dict, key: str, value: Any, where: str = "scenario") -> None:
    """Set the dotted scenario ``key`` in ``data`` in place: ``name``, ``steps.count``,
    ``target.env.GOGC`` (a name inside a free-form table such as ``env``)."""
    parts = key.split(".")
    if len(parts) > 3 or any(not p for p in parts) or (len(parts) == 3 and parts[1] not in FREE_TABLES):
        raise UsageError(
            f"{where}: cannot set '{key}' (keys look like section.key, or section.{'|'.join(FREE_TABLES)}.NAME)"
        )
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
        node[part] = child = dict(child)  # a copy: tables may be shared with the defaults
        node = child
    node[parts[-1]] = value


def _check_matrix(matrix: Any, where: str) -> dict[str, Any]:
    """The ``[matrix]`` table, flattened and checked for shape (cells are validated when expanded)."""
    if not isinstance(matrix, dict):
        raise UsageError(f"{where}: [matrix] must be a table")
    flat = flatten_keys(matrix, where=f"{where}: [matrix]")
    for key, values in flat.items():
        if key == "repeat":
            if not isinstance(values, int) or isinstance(values, bool) or not 1 <= values <= MATRIX_REPEAT_MAX:
                raise UsageError(
                    f"{where}: 'matrix.repeat' must be an integer from 1 to {MATRIX_REPEAT_MAX}, got {values!r}"
                )
            continue
        section, _, rest = key.partition(".")
        if section not in SCHEMA or not section or rest.split(".")[0] not in SCHEMA[section]:
            raise UsageError(
                f"{where}: matrix axis '{key}' is not a scenario key (e.g. \"target.kube_version\", "
                f'"target.env.GOGC", "crds.property_count")'
            )
        if not isinstance(values, list) or not values:
            raise UsageError(f"{where}: matrix axis '{key}' must be a non-empty list of values, got {values!r}")
    cells = math.prod(len(v) for k, v in flat.items() if k != "repeat") * flat.get("repeat", 1)
    if cells > MATRIX_CELLS_MAX:
        raise UsageError(
            f"{where}: [matrix] makes {cells:,} cells, more than {MATRIX_CELLS_MAX:,}: split the experiment"
        )
    return flat


def _pin_axes(matrix: dict[str, Any], overrides: dict, where: str) -> tuple[dict[str, Any], dict[str, list]]:
    """The matrix without the axes an override names, and those axes' values in the file.

    ``--set target.kube_version=1.37.1`` on a file whose matrix varies ``target.kube_version`` runs
    that one value: a user who names a key's value on the command line means it (one version of a
    two-version scenario, with no copy of the file). The other axes still vary; a matrix left with no
    axis (and no repeat) is one plain run. An override inside an axis's table (``target.env.GOGC``
    when ``target.env`` is an axis), or an axis inside an overridden table, would be silently lost to
    the cell's value or lose the axis, so it is refused.
    """
    replaced = {}
    for key in overrides:
        for axis in matrix:
            if axis == key and axis != "repeat":
                replaced[axis] = matrix[axis]
            elif axis != "repeat" and (key.startswith(axis + ".") or axis.startswith(key + ".")):
                raise UsageError(
                    f"{where}: --set {key} overlaps the matrix axis '{axis}': set the axis's whole key "
                    f"(--set {axis}=...) to run one value of it"
                )
    kept = {axis: values for axis, values in matrix.items() if axis not in replaced}
    if set(kept) == {"repeat"} and int(kept["repeat"]) == 1:
        kept = {}
    return kept, replaced


def parse_scenario(
    text: str | None = None, *, where: str = "scenario", overrides: dict | None = None, base_dir: Path | None = None
) -> Scenario:
    """Parse a scenario TOML text (``None`` = the default) over the defaults and validate it.

    A ``[matrix]`` table is kept (flattened) in ``Scenario.matrix``; the
    scenario itself is the matrix's base (see :mod:`crdscale.scenario.matrix`).
    Raises :class:`UsageError` with a one-line message naming the offending key.
    """
    user: dict = {}
    if text is not None:
        try:
            user = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise UsageError(f"{where}: not valid TOML: {err}") from err
    return build_scenario(user, where=where, overrides=overrides, base_dir=base_dir)


def build_scenario(
    user: dict, *, where: str = "scenario", overrides: dict | None = None, base_dir: Path | None = None
) -> Scenario:
    """A validated :class:`Scenario` from the keys of a scenario file (already parsed TOML)
    over the defaults, then ``overrides`` (dotted keys, see :func:`set_key`).

    ``base_dir``: the scenario file's directory; the file's relative ``target.prometheus_*_file``
    paths are taken from there (overrides come from the command line, relative to the current one).
    """
    # lazy: would bring requests into --help (collect.prometheus)
    from crdscale.cluster.goenv import check_env
    from crdscale.collect.prometheus import FILE_KEYS, PrometheusAccess

    defaults = tomllib.loads(default_text())
    user = dict(user)
    if base_dir is not None and isinstance(user.get("target"), dict):
        user["target"] = {
            k: str(Path(base_dir) / Path(v).expanduser()) if k in FILE_KEYS and isinstance(v, str) else v
            for k, v in user["target"].items()
        }
    matrix = _check_matrix(user.pop(MATRIX), where) if MATRIX in user else {}
    matrix, replaced_axes = _pin_axes(matrix, overrides or {}, where)
    _check_types(user, where)
    data = _merge(defaults, user)
    for key, value in (overrides or {}).items():
        set_key(data, key, value, where)
    _check_types(data, where)

    _check_values(data, where)
    target = _section(Target, data["target"])
    steps, objects = _section(Steps, data["steps"]), _section(Objects, data.get("objects", {}))
    name = data.get("name", "scenario")
    if not name.strip() or "/" in name or "\0" in name:
        # It becomes a directory name (runs/<UTC timestamp>-<name>): a "/" would put the run elsewhere.
        raise UsageError(f"{where}: 'name' names the run directory: no '/', not empty, got {name!r}")
    if target.kind == "kubeconfig" and not target.kubeconfig:
        raise UsageError(f"{where}: 'target.kubeconfig' is required when target.kind = \"kubeconfig\"")
    if target.kube_source and target.apiserver_binary:
        raise UsageError(
            f"{where}: set 'target.kube_source' (a source tree to build) or 'target.apiserver_binary', not both"
        )
    for item in target.apiserver_flags:
        if not (isinstance(item, str) and item.startswith("--")):
            raise UsageError(f"{where}: 'target.apiserver_flags' entries must look like \"--flag=value\", got {item!r}")
    for item in target.controller_manager_controllers:
        if not (isinstance(item, str) and item.strip()):
            raise UsageError(
                f"{where}: 'target.controller_manager_controllers' entries are controller names "
                f'such as "*" or "-ttl", got {item!r}'
            )
    if target.controller_manager and not target.controller_manager_controllers:
        raise UsageError(f"{where}: 'target.controller_manager_controllers' is empty; [\"*\"] runs the default set")
    try:
        check_env(target.env)
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    for source, job in (target.prometheus_jobs or {}).items():
        if not isinstance(job, str) or not job.strip():
            raise UsageError(f"{where}: 'target.prometheus_jobs.{source}' must be a job label (a string), got {job!r}")
    # Before anything starts: a missing token file or a password in the URL is a one-line error now.
    PrometheusAccess.from_target(target.table(), where=where)
    _check_objects(objects, steps, where)

    scenario = Scenario(
        name=name,
        description=data.get("description") or "",
        target=target,
        crds=_section(Crds, data["crds"]),
        steps=steps,
        profiles=_section(Profiles, data["profiles"]),
        metrics=_section(Metrics, data["metrics"]),
        probes=_section(Probes, data.get("probes", {})),
        objects=objects,
        raw=data,
        matrix=matrix,
        user=user,
        overrides=dict(overrides or {}),
        replaced_axes=replaced_axes,
    )
    if not scenario.description:
        scenario.description = scenario.summary()
        data["description"] = scenario.description
    if scenario.crds.source == "generate":
        try:
            scenario.generator_params()
        except UsageError as err:
            raise UsageError(f"{where}: [crds]: {err}") from err
        except TypeError as err:  # an unexpected generator field
            raise UsageError(f"{where}: [crds]: {err}") from err
    return scenario


def _check_values(data: dict, where: str) -> None:
    """Every set key's value within what its field declares (finite, bounds, choices, length), in file order."""
    for k in KEYS:
        table = data if not k.section else data.get(k.section, {})
        if k.key in table:
            k.check(table[k.key], where)


def _check_objects(objects: Objects, steps: Steps, where: str) -> None:
    """The [objects] section and steps.grow together, before anything slow starts."""
    # lazy: would bring yaml into --help
    from crdscale.crds.objects import check_size

    try:
        check_size(objects.bytes)
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from err
    if len(set(objects.control)) != len(objects.control):
        raise UsageError(f"{where}: 'objects.control' names a kind twice: {objects.control!r}")
    if objects.apply == "server-side-apply" and objects.managed_fields is False:
        raise UsageError(
            f"{where}: 'objects.managed_fields' = false needs 'objects.apply' = \"create\" "
            "(server-side apply always records managedFields)"
        )
    growing = steps.grow == "objects"
    if growing and not objects.count:
        raise UsageError(f"{where}: steps.grow = \"objects\" needs 'objects.count' > 0")
    if objects.crd_steps != 1 and not growing:
        raise UsageError(f"{where}: 'objects.crd_steps' is set: add steps.grow = \"objects\" (or use steps.count)")
    if objects.count and not growing:
        raise UsageError(f"{where}: 'objects.count' is set: add steps.grow = \"objects\" (steps then add objects)")
    if growing and objects.count < steps.count:
        raise UsageError(
            f"{where}: 'objects.count' ({objects.count}) is fewer than steps.count ({steps.count}): "
            "every step must add objects"
        )


def read_scenario_text(path: Path) -> str:
    """The text of the scenario file ``path``; :class:`UsageError` (one line) when it cannot be
    read or is not UTF-8, which TOML requires."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read scenario {path}: {err.strerror or err}") from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise UsageError(
            f"{path.name}: not UTF-8 (byte 0x{data[err.start]:02x} on line {line}); TOML files are UTF-8"
        ) from err


def load_scenario(path: str | Path | None, **kwargs) -> Scenario:
    """Read and parse a scenario file; ``None`` gives the built-in default."""
    if path is None:
        return check_inputs(resolve_paths(parse_scenario(None, where="default scenario", **kwargs)), "default scenario")
    p = Path(path).expanduser()
    text = read_scenario_text(p)
    scenario = parse_scenario(text, where=p.name, base_dir=p.parent, **kwargs)
    scenario.source_path = str(p)
    return check_inputs(resolve_paths(scenario), p.name)


def resolve_paths(scenario: Scenario) -> Scenario:
    """Make a relative ``crds.source`` and ``target.kube_source`` relative to the scenario file
    (in place; returns ``scenario``); ``target.kube_source`` becomes absolute (relative to the
    current directory without a file), as the build cache records it."""
    base = Path(scenario.source_path).parent if scenario.source_path else Path.cwd()
    if scenario.source_path and scenario.crds.source not in ("generate",):
        crd_path = Path(scenario.crds.source).expanduser()
        if not crd_path.is_absolute():
            crd_path = base / crd_path
        scenario.with_setting("crds.source", str(crd_path))
    if scenario.target.kube_source:
        scenario.with_setting("target.kube_source", str(base / Path(scenario.target.kube_source).expanduser()))
    if scenario.target.patches:
        scenario.with_setting("target.patches", [str(base / Path(p).expanduser()) for p in scenario.target.patches])
    return scenario


def check_inputs(scenario: Scenario, where: str) -> Scenario:
    """Check what a run of ``scenario`` will build from before it starts (a matrix: before its
    first cell), so a bad path is a one-line error, not a failed run: ``target.kube_source``
    must be a Kubernetes source tree. Not part of parsing: reports on an experiment whose
    tree has moved since must still open it. Returns ``scenario``."""
    if scenario.is_local and scenario.target.kube_source:
        try:
            check_tree(scenario.target.kube_source)
        except UsageError as err:
            raise UsageError(f"{where}: 'target.kube_source': {err}") from err
    return scenario
