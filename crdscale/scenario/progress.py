"""What a run says as it goes: one :class:`StepSummary` per step, and the :class:`Progress` callbacks the
CLI renders (progress bars) while libraries stay quiet."""

from __future__ import annotations

from dataclasses import dataclass

from crdscale.cluster.clients import Cluster
from crdscale.collect.promtext import parse_exposition
from crdscale.errors import ClusterError
from crdscale.units import fmt_bytes, fmt_count


@dataclass
class StepSummary:
    """One line per step: what the CLI prints and the events log records."""

    step: int
    steps: int
    crds: int
    rss_bytes: float | None
    heap_inuse_bytes: float | None
    open_fds: float | None
    goroutines: float | None
    install_s: float
    serve_s: float
    elapsed_s: float
    # Objects per kind after the step (steps.grow = "objects"); None for a CRD step.
    objects: dict[str, int] | None = None

    def line(self) -> str:
        def mib(v):
            return fmt_bytes(v, unit="MiB", digits=0, missing="?")

        def num(v):
            return fmt_count(v, missing="?")

        objects = (
            " + " + ", ".join(f"{n:,} {kind}" for kind, n in self.objects.items()) if self.objects is not None else ""
        )
        return (
            f"step {self.step}/{self.steps}: {self.crds} CRDs{objects} | RSS {mib(self.rss_bytes)} | heap in use "
            f"{mib(self.heap_inuse_bytes)} | open fds {num(self.open_fds)} | goroutines {num(self.goroutines)} | "
            f"install {self.install_s:.1f} s, serve {self.serve_s:.1f} s | elapsed {self.elapsed_s:.0f} s"
        )


class Progress:
    """Callbacks the runner makes; the CLI renders them (progress bars), libraries stay quiet."""

    def message(self, text: str) -> None: ...

    def step_started(self, step: int, steps: int, crds: int, unit: str = "CRD") -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def step_finished(self, summary: StepSummary) -> None: ...


CURRENT = {
    "rss_bytes": "process_resident_memory_bytes",
    "heap_inuse_bytes": "go_memstats_heap_inuse_bytes",
    "open_fds": "process_open_fds",
    "goroutines": "go_goroutines",
}


def current_metrics(cluster: Cluster) -> dict[str, float | None]:
    """RSS, heap in use, open fds and goroutines from one ``/metrics`` scrape, as :class:`StepSummary`
    fields (``None`` when missing)."""
    try:
        text = cluster.get("/metrics", timeout=30).text
    except ClusterError:
        return dict.fromkeys(CURRENT)
    got = {name: value for name, labels, value in parse_exposition(text, set(CURRENT.values())) if not labels}
    return {field: got.get(name) for field, name in CURRENT.items()}
