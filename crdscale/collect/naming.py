"""File names inside a run directory, so a listing explains itself.

Profiles: ``{kind}-step{NN}-crds{NNNN}[-{phase}].pb.gz``; step 0 is the
baseline before any CRD. ``phase`` is ``installed`` for a profile taken once a
step's CRDs are Established but before they are served; a profile without a
phase is the end of the step (after serving and settling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROFILE_KINDS = ("heap", "allocs", "cpu", "goroutine")
PHASES = ("installed", "served")

_PROFILE_RE = re.compile(
    r"^(?P<kind>[a-z]+)-step(?P<step>\d+)-crds(?P<crds>\d+)(?:-(?P<phase>[a-z]+))?\.pb\.gz$"
)


@dataclass(frozen=True)
class ProfileName:
    kind: str
    step: int
    crds: int
    phase: str | None = None

    @property
    def filename(self) -> str:
        suffix = f"-{self.phase}" if self.phase else ""
        return f"{self.kind}-step{self.step:02d}-crds{self.crds:04d}{suffix}.pb.gz"


def profile_filename(kind: str, step: int, crds: int, phase: str | None = None) -> str:
    """``profile_filename("heap", 3, 300)`` -> ``heap-step03-crds0300.pb.gz``."""
    return ProfileName(kind, step, crds, phase).filename


def parse_profile_filename(name: str) -> ProfileName | None:
    """Inverse of :func:`profile_filename`; ``None`` for names that do not match."""
    m = _PROFILE_RE.match(name)
    if not m:
        return None
    return ProfileName(m["kind"], int(m["step"]), int(m["crds"]), m["phase"])
