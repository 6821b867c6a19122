"""Job phases as in SageMaker Debugger's report: start, end, initialization / training loop / finalization."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ktrace.analysis.index import Slot, TraceIndex
from ktrace.analysis.steps import detect_steps
from ktrace.model.trace import Trace


@dataclass(frozen=True)
class JobPhases:
    """Where a job's wall time went, SageMaker Debugger's "training job summary".

    Initialization is job start -> first step start, the training loop is first step start -> last
    step end (over all ranks), finalization is last step end -> job end. Without steps the whole job
    counts as the training loop and ``steps`` is 0.
    """

    start_ns: int
    """First timestamp of the trace (any table, counters included)."""
    end_ns: int
    """Last timestamp of the trace."""
    steps: int
    """Steps per rank: the most steps any one rank has (a job of 8 ranks running 1 step has 1, not 8). Every view
    counts steps this way; the TUI's step keys walk the first rank's steps."""
    init_ns: int
    training_ns: int
    finalize_ns: int
    step_source: str = "none"
    """Where the steps come from: "profiler_step" (ProfilerStep ranges), "annotation" (step-named ranges),
    "periodic" (inferred from a kernel that repeats regularly: no range says so; views say "inferred"),
    "given" (passed in) or "none" (no steps)."""

    @property
    def steps_inferred(self) -> bool:
        """The steps were inferred from a periodic kernel, not read from ranges the program recorded."""
        return self.step_source == "periodic"

    @property
    def duration_ns(self) -> int:
        """end - start."""
        return self.end_ns - self.start_ns

    def pct(self, part_ns: int) -> float:
        """`part_ns` as a percentage of the job duration (0 for an empty job)."""
        return 100.0 * part_ns / self.duration_ns if self.duration_ns > 0 else 0.0

    @property
    def init_pct(self) -> float:
        """Initialization, % of the job."""
        return self.pct(self.init_ns)

    @property
    def training_pct(self) -> float:
        """Training loop, % of the job."""
        return self.pct(self.training_ns)

    @property
    def finalize_pct(self) -> float:
        """Finalization, % of the job."""
        return self.pct(self.finalize_ns)


_SPANS = Slot[pl.DataFrame]("step_spans")
_PHASES = Slot[JobPhases]("job_phases")


def step_spans(trace: Trace, *, pattern: str | None = None, index: TraceIndex | None = None) -> pl.DataFrame:
    """The training steps: ``node``, ``rank``, ``step`` (0-based per rank), ``name``, ``start_ns``, ``end_ns``.

    The steps are those of ktrace.analysis.steps.detect_steps (ProfilerStep ranges, `pattern`, or periodic).
    """
    ix = TraceIndex.of(trace, index)
    return ix.get(_SPANS, lambda: normalize_steps(detect_steps(trace, pattern=pattern, index=ix)), pattern)


def normalize_steps(frame: pl.DataFrame) -> pl.DataFrame:
    """Step rows of any source as ``node``, ``rank``, ``step`` (renumbered 0.. per rank), ``name``, ``start_ns``, ``end_ns``."""
    name = pl.col("name").cast(pl.String) if "name" in frame.columns else pl.lit("step")
    out = frame.select(
        pl.col("node").cast(pl.String),
        pl.col("rank").cast(pl.Int32),
        name.alias("name"),
        pl.col("start_ns").cast(pl.Int64),
        pl.col("end_ns").cast(pl.Int64),
    )
    out = out.sort(["node", "rank", "start_ns"])
    return out.with_columns(step=pl.int_range(pl.len()).over(["node", "rank"]).cast(pl.Int64)).select(
        "node", "rank", "step", "name", "start_ns", "end_ns"
    )


def job_phases(
    trace: Trace, *, steps: pl.DataFrame | None = None, pattern: str | None = None, index: TraceIndex | None = None
) -> JobPhases:
    """Initialization, training-loop and finalization times of the job.

    Args:
        trace: the trace.
        steps: precomputed step spans (``start_ns``, ``end_ns``); default step_spans(trace, pattern=pattern).
        pattern: regex of step range names when `steps` is not given.
        index: the trace's TraceIndex (the phases of its step spans are shared through it).

    Returns:
        JobPhases (all zero for an empty trace).
    """
    if steps is None:
        ix = TraceIndex.of(trace, index)
        return ix.get(
            _PHASES,
            lambda: _job_phases(
                trace, step_spans(trace, pattern=pattern, index=ix), step_source(trace, pattern=pattern, index=ix)
            ),
            pattern,
        )
    given = steps["source"].unique().to_list() if "source" in steps.columns and steps.height else []
    return _job_phases(trace, steps, given[0] if len(given) == 1 else "given")


def step_source(trace: Trace, *, pattern: str | None = None, index: TraceIndex | None = None) -> str:
    """Where step_spans' steps come from (see JobPhases.step_source): "none" when there are none."""
    found = detect_steps(trace, pattern=pattern, index=index)
    return str(found["source"][0]) if found.height else "none"


def _job_phases(trace: Trace, found: pl.DataFrame, source: str) -> JobPhases:
    return phases_of(trace.span_ns(), found, source)


def phases_of(span: tuple[int, int] | None, found: pl.DataFrame, source: str) -> JobPhases:
    """The JobPhases of a job's span and its step spans (``start_ns``, ``end_ns``, and ``node``/``rank``)."""
    if span is None:
        return JobPhases(0, 0, 0, 0, 0, 0)
    start, end = span
    if found.height == 0:
        return JobPhases(start, end, 0, 0, end - start, 0)
    first = max(start, int(found["start_ns"].min()))  # type: ignore[arg-type]
    last = min(end, int(found["end_ns"].max()))  # type: ignore[arg-type]
    return JobPhases(
        start, end, steps_per_rank(found), first - start, max(0, last - first), end - max(last, first), source
    )


def steps_per_rank(steps: pl.DataFrame) -> int:
    """The one step count every view shows: the most steps any one rank has (8 ranks of 1 step: 1)."""
    if steps.height == 0 or not {"node", "rank"} <= set(steps.columns):
        return steps.height
    return int(steps.group_by("node", "rank").len()["len"].max())  # type: ignore[arg-type]
