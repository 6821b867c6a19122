"""SageMaker Debugger's step and job rules: StepOutlier, Dataloader, MaxInitializationTime (analyses.md §5.2)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.phases import JobPhases
from ktrace.analysis.rules.base import Evidence, Outcome, Param, ParamValue, Rule, Skip
from ktrace.analysis.rules.frames import evidence_rows, pct
from ktrace.analysis.rules.inputs import dataloader_time, job_phases, outlier_steps, steps
from ktrace.model.trace import Trace


def _step_outlier(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return step_outlier_outcome(steps(index), p)


def step_outlier_outcome(found: pl.DataFrame, p: Mapping[str, ParamValue]) -> Outcome:
    """The StepOutlier rule on step spans (a trace's, or a fleet's reduced ones, in the same (node, rank) order)."""
    if found.height < 3:
        raise Skip(f"the trace has {found.height} training steps; at least 3 are needed")
    outliers = outlier_steps(found, float(p["stddev"]))
    limit = int(p["n_outliers"])
    durations = ((found["end_ns"] - found["start_ns"]) / 1e6).to_numpy()
    mean, std = float(durations.mean()), float(durations.std())
    message = (
        f"{outliers.height} of {found.height} steps took longer than mean + {p['stddev']} σ of their rank "
        f"(mean {mean:.2f} ms, σ {std:.2f} ms over all ranks); the rule fires past {limit} outliers"
    )
    ev = (
        outliers.sort("duration_ms", descending=True)
        .head(int(p["max_evidence"]))
        .select("start_ns", "end_ns", "node", "rank", "name", pl.col("duration_ms").alias("value"))
    )
    hist_counts, edges = np.histogram(durations, bins=min(30, max(5, found.height // 5)))
    return Outcome(
        found.height,
        outliers.height,
        outliers.height > limit,
        message,
        tuple(evidence_rows(ev, "step")),
        details={
            "mean_ms": round(mean, 6),
            "std_ms": round(std, 6),
            "histogram": {"edges_ms": [round(float(x), 6) for x in edges], "counts": [int(c) for c in hist_counts]},
        },
    )


STEP_OUTLIER = Rule(
    name="StepOutlier",
    family="sagemaker",
    description="Steps much slower than usual: duration above mean + stddev x σ of the rank's steps, "
    "more than n_outliers times.",
    recommendation="Look at what the slow steps do differently (evidence gives their times): data-loader stalls, "
    "checkpointing, evaluation, garbage collection, recompilation (torch.compile guards), or "
    "a straggling rank in a collective.",
    params=(
        Param("stddev", 3.0, "a step is an outlier above mean + stddev x standard deviation"),
        Param("n_outliers", 10, "fire when more than this many steps are outliers"),
        Param("max_evidence", 20, "how many outlier steps to keep as evidence (slowest first)"),
    ),
    check=_step_outlier,
    source="SageMaker Debugger StepOutlier",
    fleet_mode="exact",
)


def _worker_share(index: TraceIndex, p: Mapping[str, ParamValue]) -> tuple[int, int] | None:
    """(data-loader worker processes, CPU cores) when the trace tells both, else None."""
    threads = index.trace.threads
    if not threads.height:
        return None
    workers = threads.filter(pl.col("name").cast(pl.String).str.contains(str(p["worker_pattern"])))
    cores = index.trace.counters.filter(pl.col("metric") == "cpu.core.util")["instance"].n_unique()
    if not workers.height or not cores:
        return None
    return int(workers["pid"].n_unique()), int(cores)


def _dataloader(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    loaded = dataloader_time(index, str(p["pattern"]))
    workers = _worker_share(index, p)
    if loaded is None and workers is None:
        raise Skip("the trace has neither data-loading annotations nor data-loader worker threads")
    outcomes = []
    if loaded is not None:
        share = pct(loaded["loader_ns"], loaded["loop_ns"])
        fired = share > float(p["max_step_pct"])
        message = (
            f"data loading took {loaded['loader_ns'] / 1e6:.2f} ms = {share:.1f} % of the training loop "
            f"({loaded['ranges']:,} '{p['pattern']}' ranges; threshold {p['max_step_pct']} %)"
        )
        outcomes.append(
            Outcome(
                int(loaded["ranges"]),
                int(fired),
                fired,
                message,
                loaded["evidence"],
                details={"share_pct": round(share, 4)},
            )
        )
    if workers is not None:
        n, cores = workers
        share = pct(n, cores)
        fired = not float(p["min_threshold"]) <= share <= float(p["max_threshold"])
        message = (
            f"{n} data-loader worker processes for {cores} CPU cores ({share:.0f} %, expected "
            f"{p['min_threshold']}-{p['max_threshold']} %)"
        )
        outcomes.append(Outcome(1, int(fired), fired, message, (Evidence(kind="workers", value=float(n)),)))
    shown = [o for o in outcomes if o.fired] or outcomes[:1]
    head = shown[0]
    rest = tuple(shown[1:])
    dp = sum(o.datapoints for o in outcomes) - sum(o.datapoints for o in rest)
    tr = sum(o.triggered for o in outcomes) - sum(o.triggered for o in rest)
    return Outcome(dp, tr, head.fired, head.message, head.evidence, details=head.details, extra=rest)


DATALOADER = Rule(
    name="Dataloader",
    family="sagemaker",
    description="Data loading slows training: data-loading ranges take a large share of the training loop "
    "(TB plugin: > 5 %), or the number of loader workers is far from the number of cores "
    "(SageMaker: outside 70-200 %).",
    recommendation="Use more DataLoader workers (num_workers close to the cores per GPU), pin_memory=True, "
    "persistent_workers=True and a prefetch_factor of 2-4; move heavy decoding off the "
    "training process.",
    params=(
        Param("max_step_pct", 5.0, "fire when data loading takes more than this % of the training loop"),
        Param("min_threshold", 70.0, "fire when loader workers are fewer than this % of CPU cores"),
        Param("max_threshold", 200.0, "fire when loader workers are more than this % of CPU cores"),
        Param(
            "pattern",
            r"(?i)dataloader|data_loader|_next_data|fetch_batch",
            "regex of range/op names that are data loading",
        ),
        Param(
            "worker_pattern",
            r"(?i)pt_data_worker|dataloader|data_loader",
            "regex of thread names of data-loader worker processes",
        ),
        Param("max_evidence", 10, "how many data-loading ranges to keep as evidence (longest first)"),
    ),
    check=_dataloader,
    source="SageMaker Debugger Dataloader; TB plugin DataLoader recommendation",
    fleet_mode="per rank",
)


def _max_init(trace: Trace, index: TraceIndex, p: Mapping[str, ParamValue]) -> Outcome:
    return max_init_outcome(job_phases(index), p)


def max_init_outcome(phases: JobPhases, p: Mapping[str, ParamValue]) -> Outcome:
    """The MaxInitializationTime rule on the job's phases (a trace's, or a fleet's reduced ones)."""
    if not phases.steps:
        raise Skip("no training step found, so the end of initialization is unknown")
    minutes = phases.init_ns / 60e9
    limit = float(p["threshold"])
    message = (
        f"the first step started {minutes:.2f} min ({phases.init_ns / 1e9:.1f} s, {phases.init_pct:.1f} % "
        f"of the trace) after the trace began (threshold {limit:g} min)"
    )
    evidence = (
        Evidence(
            kind="phase",
            start_ns=phases.start_ns,
            end_ns=phases.start_ns + phases.init_ns,
            name="initialization",
            value=round(minutes, 4),
        ),
    )
    return Outcome(
        1,
        int(minutes > limit),
        minutes > limit,
        message,
        evidence,
        details={"init_s": round(phases.init_ns / 1e9, 6), "init_pct": round(phases.init_pct, 4)},
    )


MAX_INITIALIZATION_TIME = Rule(
    name="MaxInitializationTime",
    family="sagemaker",
    description="Initialization (trace start to the first training step) takes too long.",
    recommendation="Speed up start-up: download data and checkpoints in parallel or stream them, cache "
    "compiled models (torch.compile cache, TORCHINDUCTOR_CACHE_DIR), defer evaluation set-up.",
    params=(Param("threshold", 20.0, "fire when initialization takes more than this many minutes"),),
    check=_max_init,
    source="SageMaker Debugger MaxInitializationTime",
    fleet_mode="exact",
)

RULES: tuple[Rule, ...] = (STEP_OUTLIER, DATALOADER, MAX_INITIALIZATION_TIME)
