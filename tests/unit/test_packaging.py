"""environment.yml (conda) and pyproject.toml must list the same dependencies, and
requirements.lock must satisfy pyproject.toml."""

import re
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
# conda-forge names that differ from PyPI names
CONDA_TO_PYPI = {"python-kubernetes": "kubernetes"}
NOT_PACKAGES = {"python", "pip", "-e ."}


def _name(requirement: str) -> str:
    name = re.split(r"[<>=!;\[ ]", requirement.strip(), maxsplit=1)[0].lower()
    return CONDA_TO_PYPI.get(name, name).replace("_", "-")


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return {_name(r): r for r in reqs if _name(r) != "crdscale"}  # extras made of other extras


def _conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    reqs = []
    for dep in env["dependencies"]:
        reqs += dep["pip"] if isinstance(dep, dict) else [dep]
    return {_name(r): r for r in reqs if _name(r) not in NOT_PACKAGES and not r.startswith("-e")}


def test_environment_yml_lists_the_same_packages_as_pyproject():
    pyproject, conda = _pyproject_requirements(), _conda_requirements()
    # tomli is only needed on Python 3.10, which conda's python>=3.10 may or may not be
    pyproject.pop("tomli", None)
    assert sorted(conda) == sorted(pyproject)


def test_minimum_versions_agree():
    pyproject, conda = _pyproject_requirements(), _conda_requirements()
    for name, req in conda.items():
        want = re.search(r">=\s*([\w.]+)", pyproject[name])
        have = re.search(r">=\s*([\w.]+)", req)
        assert (want and want.group(1)) == (have and have.group(1)), name


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _requirements(extras: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        for r in map(Requirement, project["optional-dependencies"][extra]):
            reqs += _requirements(sorted(r.extras)) if canonicalize_name(r.name) == "crdscale" else [r]
    return reqs


def test_the_lock_satisfies_pyproject():
    """requirements.lock (what bootstrap installs) has every requirement of crdscale and its extras
    dev, report, lab and s3, in pyproject's ranges, for Python 3.11: run scripts/lock.sh after editing them."""
    pins = _locked()
    environment = {
        "python_version": "3.11",
        "python_full_version": "3.11.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
        "extra": "",
    }
    for req in _requirements(["dev", "report", "lab", "s3"]):
        if req.marker and not req.marker.evaluate(environment):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements.lock: run scripts/lock.sh"
        assert req.specifier.contains(pins[name], prereleases=True), f"locked {name}=={pins[name]} is outside {req}"
