"""Scenario files (TOML): parsing and validation with errors that name the key.

A scenario is the built-in default (``default.toml`` beside this file) overlaid
with the user's file, so a file only needs the keys it changes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from crdscale.cluster.kubesource import check_tree
from crdscale.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PROFILE_KINDS = ("heap", "allocs", "goroutine", "cpu")
SERVE_MODES = ("none", "list", "watch")
METRIC_SOURCES = ("auto", "prometheus", "direct")
TARGET_KINDS = ("local", "kubeconfig")

# section -> key -> expected type(s). Anything else in a file is an error naming it.
SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "": {"name": str, "description": str},
    "target": {
        "kind": str,
        "kube_version": str,
        "kube_source": str,
        "etcd": str,
        "apiserver_flags": list,
        "env": dict,
        "apiserver_binary": str,
        "controller_manager": bool,
        "controller_manager_controllers": list,
        "kubeconfig": str,
        "context": str,
        "prometheus_url": str,
        "prometheus_jobs": dict,
        "prometheus_bearer_token_file": str,
        "prometheus_username": str,
        "prometheus_password_file": str,
        "prometheus_ca_file": str,
        "prometheus_insecure_skip_tls_verify": bool,
    },
    "crds": {
        "source": str,
        "preset": str,
        "count": int,
        "groups": int,
        "property_count": int,
        "versions": int,
        "max_depth": int,
        "description_length": int,
        "scope": str,
        "printer_columns": int,
        "categories": list,
        "shape": str,
        "group_suffix": str,
        "seed": int,
    },
    "steps": {
        "count": int,
        "size": int,
        "serve": str,
        "serve_clients": int,
        "settle_seconds": (int, float),
        "establish_timeout_seconds": (int, float),
        "concurrency": int,
        "qps": (int, float),
        "on_rejected": str,
        "hold_seconds": (int, float),
        "memory_guard_mib": int,
    },
    "profiles": {"kinds": list, "cpu_seconds": int, "installed_phase": bool},
    "metrics": {
        "source": str,
        "scrape_interval_seconds": (int, float),
        "apiserver_metrics_interval_seconds": (int, float),
        "apiserver_cpu_budget_percent": (int, float),
    },
    "probes": {"each_step": list, "options": dict},
}

# Keys whose value is a free-form table (merged whole, addressed as section.key.NAME).
FREE_TABLES = ("env", "options", "prometheus_jobs")

# The table of experiment axes (see crdscale.scenario.matrix); not a scenario section.
MATRIX = "matrix"

# Scenario [crds] keys -> GeneratorParams fields where the names differ.
GENERATOR_FIELD = {"count": "crd_count", "groups": "group_count"}


@dataclass
class Scenario:
    """A validated scenario. ``raw`` is the merged TOML (recorded in the run manifest)."""

    name: str
    description: str
    target: dict[str, Any]
    crds: dict[str, Any]
    steps: dict[str, Any]
    profiles: dict[str, Any]
    metrics: dict[str, Any]
    probes: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    source_path: str | None = None
    # The [matrix] table flattened to ``dotted.key -> values`` (``repeat`` -> N); empty for one run.
    matrix: dict[str, Any] = field(default_factory=dict)
    # What the file said (without [matrix]) and the --set overrides, so matrix cells can be rebuilt from them.
    user: dict[str, Any] = field(repr=False, default_factory=dict)
    overrides: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.target["kind"] == "local"

    def summary(self) -> str:
        """One line saying what the scenario does, e.g. for the run's first line and reports."""
        c, st = self.crds, self.steps
        if c["source"] == "generate":
            what = f"{c['count']} generated CRDs ({c['groups']} groups, {c.get('property_count', 0)} properties, {c.get('preset', 'apigen')} preset)"
        else:
            what = f"the CRDs in {c['source']}"
        steps = f"{st['size']} per step" if "size" in st else f"{st['count']} steps"
        serve = {"none": "not served", "list": "each LISTed once", "watch": "each LISTed and watched"}[st["serve"]]
        if self.is_local and self.target.get("kube_source"):
            where = f"a local kube-apiserver built from {self.target['kube_source']} (etcd {self.target.get('etcd') or 'default'})"
        elif self.is_local:
            where = f"a local kube-apiserver v{self.target['kube_version'].lstrip('v')} (etcd {self.target.get('etcd') or 'default'})"
        else:
            where = f"the cluster of {self.target['kubeconfig']}"
        return f"{what} installed in {steps}, {serve}, on {where}"

    def generator_params(self):
        """The :class:`~crdscale.crds.generate.GeneratorParams` for ``[crds] source = "generate"``."""
        from crdscale.crds.generate import preset

        fields = {GENERATOR_FIELD.get(k, k): v for k, v in self.crds.items() if k not in ("source", "preset")}
        if "categories" in fields:
            fields["categories"] = tuple(fields["categories"])
        return preset(self.crds.get("preset", "apigen"), **fields).validate()

    def step_sizes(self, total: int) -> list[int]:
        """How many CRDs each step installs (sizes differ by at most one; ``size`` wins over ``count``)."""
        if total == 0:
            return []
        if "size" in self.steps:
            size = self.steps["size"]
            return [min(size, total - i) for i in range(0, total, size)]
        count = min(self.steps["count"], total)
        base, extra = divmod(total, count)
        return [base + (1 if i < extra else 0) for i in range(count)]


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


def _positive(value, key: str, where: str, *, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{where}: '{key}' must be {'>= 0' if zero_ok else '> 0'}, got {value!r}")


def flatten_keys(table: dict, prefix: str = "") -> dict[str, Any]:
    """``{"target": {"env": {"GOGC": [..]}}}`` -> ``{"target.env.GOGC": [..]}`` (TOML dotted keys,
    quoted or not, end up the same)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_keys(value, name + "."))
        else:
            out[name] = value
    return out


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
    flat = flatten_keys(matrix)
    for key, values in flat.items():
        if key == "repeat":
            if not isinstance(values, int) or isinstance(values, bool) or values < 1:
                raise UsageError(f"{where}: 'matrix.repeat' must be an integer >= 1, got {values!r}")
            continue
        section, _, rest = key.partition(".")
        if section not in SCHEMA or not section or rest.split(".")[0] not in SCHEMA[section]:
            raise UsageError(
                f"{where}: matrix axis '{key}' is not a scenario key (e.g. \"target.kube_version\", "
                f'"target.env.GOGC", "crds.property_count")'
            )
        if not isinstance(values, list) or not values:
            raise UsageError(f"{where}: matrix axis '{key}' must be a non-empty list of values, got {values!r}")
    return flat


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
    from crdscale.collect.prometheus import FILE_KEYS, PrometheusAccess

    defaults = tomllib.loads(default_text())
    user = dict(user)
    if base_dir is not None and isinstance(user.get("target"), dict):
        user["target"] = {
            k: str(Path(base_dir) / Path(v).expanduser()) if k in FILE_KEYS and isinstance(v, str) else v
            for k, v in user["target"].items()
        }
    matrix = _check_matrix(user.pop(MATRIX), where) if MATRIX in user else {}
    _check_types(user, where)
    data = _merge(defaults, user)
    for key, value in (overrides or {}).items():
        set_key(data, key, value, where)
    _check_types(data, where)

    target, steps, profiles, metrics = data["target"], data["steps"], data["profiles"], data["metrics"]
    _choice(target["kind"], TARGET_KINDS, "target.kind", where)
    if target["kind"] == "kubeconfig" and not target.get("kubeconfig"):
        raise UsageError(f"{where}: 'target.kubeconfig' is required when target.kind = \"kubeconfig\"")
    if target.get("kube_source") and target.get("apiserver_binary"):
        raise UsageError(
            f"{where}: set 'target.kube_source' (a source tree to build) or 'target.apiserver_binary', not both"
        )
    for item in target.get("apiserver_flags", []):
        if not (isinstance(item, str) and item.startswith("--")):
            raise UsageError(f"{where}: 'target.apiserver_flags' entries must look like \"--flag=value\", got {item!r}")
    for item in target.get("controller_manager_controllers", []):
        if not (isinstance(item, str) and item.strip()):
            raise UsageError(
                f"{where}: 'target.controller_manager_controllers' entries are controller names "
                f'such as "*" or "-ttl", got {item!r}'
            )
    if target.get("controller_manager") and not target.get("controller_manager_controllers"):
        raise UsageError(f"{where}: 'target.controller_manager_controllers' is empty; [\"*\"] runs the default set")
    for k, v in target.get("env", {}).items():
        if not isinstance(v, str):
            raise UsageError(f"{where}: 'target.env.{k}' must be a string, got {v!r}")
    # Before anything starts: a missing token file or a password in the URL is a one-line error now.
    PrometheusAccess.from_target(target, where=where)
    _choice(steps["serve"], SERVE_MODES, "steps.serve", where)
    _choice(steps.get("on_rejected", "stop"), ("stop", "continue"), "steps.on_rejected", where)
    _positive(steps["count"], "steps.count", where)
    _positive(steps.get("serve_clients", 1), "steps.serve_clients", where)
    if "size" in steps:
        _positive(steps["size"], "steps.size", where)
    _positive(steps["settle_seconds"], "steps.settle_seconds", where, zero_ok=True)
    _positive(steps.get("hold_seconds", 0), "steps.hold_seconds", where, zero_ok=True)
    _positive(steps.get("memory_guard_mib", 0), "steps.memory_guard_mib", where, zero_ok=True)
    _positive(steps["establish_timeout_seconds"], "steps.establish_timeout_seconds", where)
    _positive(steps["concurrency"], "steps.concurrency", where)
    _positive(steps["qps"], "steps.qps", where, zero_ok=True)
    for kind in profiles["kinds"]:
        _choice(kind, PROFILE_KINDS, "profiles.kinds", where)
    _positive(profiles["cpu_seconds"], "profiles.cpu_seconds", where)
    _choice(metrics["source"], METRIC_SOURCES, "metrics.source", where)
    _positive(metrics["scrape_interval_seconds"], "metrics.scrape_interval_seconds", where)
    _positive(metrics["apiserver_metrics_interval_seconds"], "metrics.apiserver_metrics_interval_seconds", where)
    _positive(
        metrics.get("apiserver_cpu_budget_percent", 0), "metrics.apiserver_cpu_budget_percent", where, zero_ok=True
    )

    scenario = Scenario(
        name=data.get("name", "scenario"),
        description=data.get("description") or "",
        target=target,
        crds=data["crds"],
        steps=steps,
        profiles=profiles,
        metrics=metrics,
        probes=data.get("probes", {}),
        raw=data,
        matrix=matrix,
        user=user,
        overrides=dict(overrides or {}),
    )
    if not scenario.description:
        scenario.description = scenario.summary()
        data["description"] = scenario.description
    if scenario.crds["source"] == "generate":
        try:
            scenario.generator_params()
        except UsageError as err:
            raise UsageError(f"{where}: [crds]: {err}") from err
        except TypeError as err:  # an unexpected generator field
            raise UsageError(f"{where}: [crds]: {err}") from err
    return scenario


def load_scenario(path: str | Path | None, **kwargs) -> Scenario:
    """Read and parse a scenario file; ``None`` gives the built-in default."""
    if path is None:
        return check_inputs(resolve_paths(parse_scenario(None, where="default scenario", **kwargs)), "default scenario")
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as err:
        raise UsageError(f"cannot read scenario {p}: {err.strerror}") from err
    scenario = parse_scenario(text, where=p.name, base_dir=p.parent, **kwargs)
    scenario.source_path = str(p)
    return check_inputs(resolve_paths(scenario), p.name)


def resolve_paths(scenario: Scenario) -> Scenario:
    """Make a relative ``crds.source`` and ``target.kube_source`` relative to the scenario file
    (in place; returns ``scenario``); ``target.kube_source`` becomes absolute (relative to the
    current directory without a file), as the build cache records it."""
    base = Path(scenario.source_path).parent if scenario.source_path else Path.cwd()
    if scenario.source_path and scenario.crds["source"] not in ("generate",):
        crd_path = Path(scenario.crds["source"]).expanduser()
        if not crd_path.is_absolute():
            crd_path = base / crd_path
        scenario.crds["source"] = str(crd_path)
    if scenario.target.get("kube_source"):
        scenario.target["kube_source"] = str(base / Path(scenario.target["kube_source"]).expanduser())
    return scenario


def check_inputs(scenario: Scenario, where: str) -> Scenario:
    """Check what a run of ``scenario`` will build from before it starts (a matrix: before its
    first cell), so a bad path is a one-line error, not a failed run: ``target.kube_source``
    must be a Kubernetes source tree. Not part of parsing: reports on an experiment whose
    tree has moved since must still open it. Returns ``scenario``."""
    if scenario.is_local and scenario.target.get("kube_source"):
        try:
            check_tree(scenario.target["kube_source"])
        except UsageError as err:
            raise UsageError(f"{where}: 'target.kube_source': {err}") from err
    return scenario
