"""Training steps for step navigation: from ktrace.analysis.steps.detect_steps, run in a worker after the first screen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from numpy.typing import NDArray

from ktrace.model.trace import Trace

if TYPE_CHECKING:
    from ktrace.analysis.index import TraceIndex


@dataclass(frozen=True)
class StepSpans:
    """Steps of one rank, sorted by start: the timeline jumps between them."""

    starts: NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    ends: NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    names: tuple[str, ...] = ()
    source: str = "none"
    """"analysis" (detect_steps), "none" (no steps found) or "pending" (detection still running)."""
    frame: pl.DataFrame | None = None
    """detect_steps' whole result (all ranks), for the dashboard."""

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def ready(self) -> bool:
        """False while step detection still runs (navigation keys then say so instead of jumping)."""
        return self.source != "pending"

    def after(self, t_ns: int) -> int | None:
        """Index of the first step starting after t, or None."""
        i = int(np.searchsorted(self.starts, t_ns, side="right"))
        return i if i < len(self) else None

    def before(self, t_ns: int) -> int | None:
        """Index of the last step starting before t, or None."""
        i = int(np.searchsorted(self.starts, t_ns, side="left")) - 1
        return i if i >= 0 else None

    def containing(self, t_ns: int) -> int | None:
        """Index of the step whose span holds t, or None."""
        i = int(np.searchsorted(self.starts, t_ns, side="right")) - 1
        return i if i >= 0 and t_ns <= self.ends[i] else None


PENDING_STEPS = StepSpans(source="pending")
"""The steps of a trace whose step detection has not finished yet."""
STEPS_PENDING = "still detecting steps… (step keys work once they are found)"
"""What the step keys say before the steps are known."""


def step_spans(trace: Trace, index: TraceIndex | None = None) -> StepSpans:
    """Steps of the first rank that has any, as ktrace.analysis.steps.detect_steps finds them (shared through
    the trace's `index` with the dashboard)."""
    from ktrace.analysis.steps import detect_steps

    frame = detect_steps(trace, index=index)
    return _from_frame(frame, "analysis", frame)


def _from_frame(frame: pl.DataFrame, source: str, whole: pl.DataFrame | None) -> StepSpans:
    if frame.height == 0 or not {"start_ns", "end_ns"} <= set(frame.columns):
        return StepSpans(source="none", frame=whole)
    if {"node", "rank"} <= set(frame.columns):
        first = frame.select(pl.col("node").cast(pl.String), "rank").sort("node", "rank").row(0)
        frame = frame.filter((pl.col("node").cast(pl.String) == first[0]) & (pl.col("rank") == first[1]))
    frame = frame.sort("start_ns")
    name_col = next((c for c in ("name", "step_name", "step") if c in frame.columns), None)
    names = (
        tuple(str(v) for v in frame[name_col].cast(pl.String).to_list())
        if name_col
        else tuple(f"step {i}" for i in range(frame.height))
    )
    return StepSpans(
        frame["start_ns"].to_numpy().astype(np.int64), frame["end_ns"].to_numpy().astype(np.int64), names, source, whole
    )


def find_step(steps: StepSpans, text: str) -> int | None:
    """Index of the step a user typed: the number in its name (ProfilerStep#12 <- "12"), else its 1-based rank."""
    text = text.strip()
    if not text or len(steps) == 0:
        return None
    for i, name in enumerate(steps.names):
        if name == text or name.rsplit("#", 1)[-1] == text or name.rsplit(" ", 1)[-1] == text:
            return i
    if text.isdigit() and 1 <= int(text) <= len(steps):
        return int(text) - 1
    return None


def counts_line(trace: Trace, steps: StepSpans) -> str:
    """The status line's counts: kernels, API calls and steps (per rank, with their source; "detecting steps…"
    until they are)."""
    from ktrace.analysis.phases import steps_per_rank
    from ktrace.presentation.labels import step_source_note

    counts = trace.counts()
    whole = steps.frame  # every rank's steps (a small frame); the step keys walk the first rank's
    n = steps_per_rank(whole) if whole is not None else len(steps)
    n_ranks = whole.select("node", "rank").n_unique() if whole is not None and "rank" in whole.columns else 1
    source = str(whole["source"][0]) if whole is not None and whole.height and "source" in whole.columns else ""
    text = (
        f"{n} step{'' if n == 1 else 's'}{' per rank' if n_ranks > 1 else ''}{step_source_note(source)}"
        if steps.ready
        else "detecting steps…"
    )
    return f"{counts['kernels']:,} kernels · {counts['api']:,} API calls · {text}"
