"""The model store: the one place that knows where footprint models and terms are and which one applies.

Three kinds of model, by the way they were made:

* ``shipped``: one ``v<version>.json`` per kube-apiserver version in ``crdscale/footprint/models/``,
  fitted by ``crdscale footprint fit model`` on ``sweep.toml`` (also there) on crdscale's
  reference machine, v1.37.1's also on ``benchmarks/footprint-calibration-provider-scale.toml``
  (2,000 CRDs); each file's provenance names its runs;
* ``calibrated``: refitted on the user's machine by ``crdscale footprint --calibrate``,
  in :func:`crdscale.paths.calibrated_models_dir`; for its version it wins over the
  shipped one, since it measured the machine it predicts for;
* ``file``: any model file named explicitly.

Each file is a :meth:`crdscale.footprint.model.FootprintModel.to_dict` with its
provenance (experiment, runs, machine, date).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from crdscale.errors import UsageError
from crdscale.footprint.model import FootprintModel
from crdscale.footprint.objects import ObjectTerm
from crdscale.footprint.states import StateTerms
from crdscale.fsutil import write_atomic
from crdscale.paths import calibrated_models_dir

SHIPPED, CALIBRATED, FILE = "shipped", "calibrated", "file"
SWEEP = "sweep.toml"


def _shipped():
    """The directory of the shipped models and terms (package data: ``crdscale/footprint/models/``)."""
    return resources.files("crdscale.footprint").joinpath("models")


def _file_name(version: str) -> str:
    return f"v{version.lstrip('v')}.json"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.lstrip("v").split("."))


def shipped_versions() -> list[str]:
    """Versions with shipped coefficients, oldest first, e.g. ``["1.24.0", "1.24.17", "1.37.1"]``."""
    names = [p.name for p in _shipped().iterdir() if p.name.endswith(".json")]
    return sorted((n[1 : -len(".json")] for n in names if n.startswith("v")), key=_version_key)


def same_minor_shipped(version: str) -> str | None:
    """The shipped version of ``version``'s minor release nearest to its patch, or None. A patch release
    keeps a minor's code paths (watch cache, OpenAPI aggregation), so its model stands in with a note;
    another minor's does not (v1.24 rebuilds the whole OpenAPI spec per CRD, v1.28+ aggregate lazily)."""

    def patch(v: str) -> int:
        key = _version_key(v)
        return key[2] if len(key) > 2 else 0

    minor = _version_key(version)[:2]
    same = [v for v in shipped_versions() if _version_key(v)[:2] == minor]
    return min(same, key=lambda v: abs(patch(v) - patch(version)), default=None)


def shipped_path(version: str) -> Path:
    """Where the shipped model of ``version`` lives (whether or not it exists yet)."""
    return Path(str(_shipped().joinpath(_file_name(version))))


def calibrated_path(version: str) -> Path:
    """Where ``crdscale footprint --calibrate`` keeps the model of ``version`` on this machine."""
    return calibrated_models_dir() / _file_name(version)


def states_path(version: str) -> Path:
    """Where the state terms of ``version`` live (``states-v<version>.json`` beside the shipped models,
    written by ``crdscale footprint fit states``): how installed, watched and openapi-v2 follow from
    a served prediction. They are differences measured per version, so they apply to a shipped,
    calibrated or named model of that version alike."""
    return Path(str(_shipped().joinpath(f"states-{_file_name(version)}")))


def read_states(version: str) -> StateTerms | None:
    """The state terms of ``version``, or None when none were measured for it."""
    return _read_term(states_path(version), StateTerms.from_dict, "state terms")


def _read_term(path: Path, from_dict, what: str):
    """``from_dict`` of the JSON in ``path``; None when there is no such file; UsageError (one line) when
    it is not ``what`` this crdscale reads."""
    if not path.is_file():
        return None
    try:
        return from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"{path}: not {what} this crdscale reads ({err})") from None


def objects_path(version: str) -> Path:
    """Where the per-object term of ``version`` lives (``objects-v<version>.json`` beside the shipped
    models, written by ``crdscale footprint fit objects`` from ``scenarios/objects-shapes.toml``): what each
    custom resource adds. Measured per version, it applies to any model of that version."""
    return Path(str(_shipped().joinpath(f"objects-{_file_name(version)}")))


def read_object_term(version: str) -> ObjectTerm | None:
    """The per-object term of ``version``, or None when none was measured for it."""
    return _read_term(objects_path(version), ObjectTerm.from_dict, "an object term")


def object_term_versions() -> list[str]:
    """Versions with a per-object term, oldest first."""
    names = [p.name for p in _shipped().iterdir() if p.name.startswith("objects-v")]
    return sorted((n[len("objects-v") : -len(".json")] for n in names if n.endswith(".json")), key=_version_key)


def sweep_path() -> Path:
    """The scenario file of the sweep models are fitted on."""
    return Path(str(_shipped().joinpath(SWEEP)))


def read_model(path: str | Path) -> FootprintModel:
    """The model in ``path``; UsageError (one line) when it is missing or not a model this crdscale reads."""
    try:
        return FootprintModel.from_dict(json.loads(Path(path).read_text()))
    except OSError as err:
        raise UsageError(f"cannot read footprint model {path}: {err.strerror}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(
            f"{path}: not a footprint model this crdscale reads ({err}); "
            f"recalibrate with 'crdscale footprint --calibrate'"
        ) from None


def write_model(model: FootprintModel, path: str | Path) -> Path:
    """Write ``model`` to ``path`` atomically (a reader never sees half a model); returns the path."""
    return write_atomic(path, json.dumps(model.to_dict(), indent=1) + "\n")


@dataclass
class ChosenModel:
    """The model a prediction uses, how it was made (:data:`SHIPPED`, :data:`CALIBRATED` or
    :data:`FILE`) and the file it came from."""

    model: FootprintModel
    origin: str
    path: Path
    # How the states besides served follow from its prediction (None: only served can be predicted).
    states: StateTerms | None = None
    # The version asked for, when a shipped model of another patch release of its minor stands in.
    stands_in_for: str | None = None

    def describe(self) -> str:
        """One line: which model, from where, fitted on what, on which machine, when."""
        prov = self.model.provenance
        made = {
            SHIPPED: "shipped with crdscale",
            CALIBRATED: f"calibrated on this machine ({self.path})",
            FILE: f"from {self.path}",
        }[self.origin]
        standing_in = (
            f" (v{self.model.kube_version}'s, standing in for v{self.stands_in_for}: same minor release)"
            if self.stands_in_for
            else ""
        )
        return (
            f"model: {made}{standing_in}; {' + '.join(self.model.features)}, fitted on "
            f"{prov.get('experiment', '?')}, {prov.get('machine', '?')}, {prov.get('date', '?')}"
        )


def choose_model(
    version: str, *, path: str | Path | None = None, shipped_only: bool = False, same_minor: bool = False
) -> ChosenModel:
    """The model for kube-apiserver ``version``: the file ``path`` when given, else the one
    calibrated on this machine (unless ``shipped_only``), else the shipped one; with ``same_minor``,
    when none of ``version`` itself was shipped, the shipped one of the nearest patch release of its
    minor (:func:`same_minor_shipped`; ``stands_in_for`` says so).

    Raises UsageError when there is none, or when ``path`` holds a model of another version.
    """
    version = version.lstrip("v")
    if path is not None:
        model = read_model(path)
        if model.kube_version.lstrip("v") != version:
            raise UsageError(f"{path} is a model of kube-apiserver v{model.kube_version}, not v{version}")
        return ChosenModel(model, FILE, Path(path), read_states(version))
    calibrated = calibrated_path(version)
    if not shipped_only and calibrated.is_file():
        return ChosenModel(read_model(calibrated), CALIBRATED, calibrated, read_states(version))
    shipped = shipped_path(version)
    stand_in = same_minor_shipped(version) if same_minor and not shipped.is_file() else None
    if stand_in:
        path = shipped_path(stand_in)
        return ChosenModel(read_model(path), SHIPPED, path, read_states(stand_in), stands_in_for=version)
    if not shipped.is_file():
        known = ", ".join(shipped_versions()) or "none"
        raise UsageError(
            f"no footprint coefficients for kube-apiserver v{version} (shipped: {known}); "
            f"fit them on this machine with 'crdscale footprint --calibrate --kube-version {version}'"
        )
    return ChosenModel(read_model(shipped), SHIPPED, shipped, read_states(version))
