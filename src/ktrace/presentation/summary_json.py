"""The summary as a stable JSON document: summary_to_dict (what `ktrace summary --json` prints and the report's
`summary` key) and record_to_dict for any dataclass built of the Summary's kinds of fields."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import polars as pl

from ktrace.analysis.annotation_histograms import AnnotationHistogram
from ktrace.analysis.kernel_sequences import KernelSequences
from ktrace.analysis.memory_timeline import MemoryTimeline
from ktrace.analysis.modules import NO_MODULES, ModuleSummary
from ktrace.analysis.operators import OperatorSummary
from ktrace.analysis.phases import JobPhases
from ktrace.analysis.python_frames import NO_PYTHON_FRAMES, PythonFrameSummary
from ktrace.analysis.summary import Summary
from ktrace.presentation.critical_path_json import critical_path_dict
from ktrace.presentation.hardware_json import collectives_dict, roofline_dict
from ktrace.presentation.json_rows import clean, frame_records
from ktrace.presentation.summary_python import python_profile_dict

if TYPE_CHECKING:  # (types only: the multi-rank analyses are imported where a summary has 2+ ranks)
    from ktrace.analysis.ranks import LoadBalance
    from ktrace.analysis.stragglers import Stragglers


def _operators_dict(o: OperatorSummary | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {
        "source": o.source,
        "operators": o.operators,
        "records": o.records,
        **_attribution(o),
        "top_by_gpu_time": frame_records(o.top_by_gpu_time),
        "top_by_cpu_self_time": frame_records(o.top_by_cpu_self_time),
        "kernels_of_top_operators": frame_records(o.kernels_of_top),
        "modules": _modules_dict(o.modules),
        **({"modules_note": NO_MODULES} if o.modules is None and o.source == "cpu_op" else {}),
        **({} if o.by_shape is None else {"by_shape": frame_records(o.by_shape)}),
        "python_frames": _python_frames_dict(o.python_frames),
        **({"python_frames_note": NO_PYTHON_FRAMES} if o.python_frames is None and o.source == "cpu_op" else {}),
    }


def _attribution(view: OperatorSummary | ModuleSummary | PythonFrameSummary) -> dict[str, Any]:
    return {"attributed_records": view.attributed, "attributed_gpu_share": view.attributed_gpu_share}


def _modules_dict(m: ModuleSummary | None) -> dict[str, Any] | None:
    top = None if m is None else frame_records(m.top_by_gpu_time)
    return None if m is None else {"modules": m.modules, "frames": m.frames, **_attribution(m), "top_by_gpu_time": top}


def _python_frames_dict(p: PythonFrameSummary | None) -> dict[str, Any] | None:
    top = None if p is None else frame_records(p.top_by_gpu_time)
    return None if p is None else {"frames": p.frames, "names": p.names, **_attribution(p), "top_by_gpu_time": top}


def _sequences_dict(k: KernelSequences | None) -> dict[str, Any] | None:
    if k is None:
        return None
    return {"length": k.length, "distinct_repeated": k.distinct, "top": frame_records(k.top)}


def memory_timeline_dict(
    timeline: MemoryTimeline, records: Callable[[pl.DataFrame], list[dict[str, Any]] | None]
) -> dict[str, Any]:
    """The summary JSON's `memory_timeline` (frames as `records` rows; the series is left out: it can be long)."""
    return {
        "source": timeline.source,
        "running_sum": timeline.running_sum,
        "addresses": timeline.addresses,
        "events": timeline.event_count(),
        "per_device": records(timeline.per_device),
        "by_operator": records(timeline.by_operator),
        "growth": records(timeline.growth),
    }


def _phases_dict(p: JobPhases) -> dict[str, Any]:
    return {
        "start_ns": p.start_ns,
        "end_ns": p.end_ns,
        "duration_ns": p.duration_ns,
        "steps": p.steps,
        "step_source": p.step_source,
        "init_ns": p.init_ns,
        "training_ns": p.training_ns,
        "finalize_ns": p.finalize_ns,
        "init_pct": p.init_pct,
        "training_pct": p.training_pct,
        "finalize_pct": p.finalize_pct,
    }


def _load_balance_dict(lb: LoadBalance | None) -> dict[str, Any] | None:
    if lb is None:
        return None
    return {
        "per_rank": frame_records(lb.per_rank),
        "busy_spread": lb.busy_spread,
        "step_spread": lb.step_spread,
        "histogram_distance": lb.histogram_distance,
        "worst_pair": list(lb.worst_pair) if lb.worst_pair else None,
        "source": lb.source,
    }


def _stragglers_dict(s: Stragglers | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "basis": s.basis,
        "per_step": frame_records(s.per_step),
        "table": frame_records(s.table),
        "causes": frame_records(s.causes),
        "waited_for": frame_records(s.waited_for),
        "waited_for_matched_by": s.waited.matched_by if s.waited else None,
        "waited_for_reason": s.waited.reason if s.waited else None,
    }


def _histogram_dict(h: AnnotationHistogram) -> dict[str, Any]:
    return {
        "pattern": h.pattern,
        "count": h.count,
        "edges_ns": list(h.edges_ns),
        "counts": list(h.counts),
        "stats": frame_records(h.stats),
    }


_FIELD_DICTS: dict[str, Callable[[Any], Any]] = {
    "load_balance": _load_balance_dict,
    "operators": _operators_dict,
    "kernel_sequences": _sequences_dict,
    "stragglers": _stragglers_dict,
    "memory_timeline": lambda m: None if m is None else memory_timeline_dict(m, frame_records),
    "critical_path": lambda cp: critical_path_dict(cp),
    "annotations": lambda hs: [_histogram_dict(h) for h in hs],
    "roofline": lambda r: None if r is None else roofline_dict(r, frame_records),
    "collectives": lambda c: None if c is None else collectives_dict(c, frame_records),
    "python_profile": python_profile_dict,
}
"""Summary fields with their own JSON form (the rest: frames as rows, tuples as lists, values as they are)."""


def summary_to_dict(summary: Summary) -> dict[str, Any]:
    """A stable, JSON-ready dict of a Summary: sorted top-level keys (rows keep their frame's column order;
    dump with sort_keys=True for fully sorted JSON), floats rounded to FLOAT_DIGITS, frames as rows.

    Step spans are left out (they can be long); step statistics stay.
    """
    return record_to_dict(summary)


def record_to_dict(record: Any, skip: tuple[str, ...] = ("steps",)) -> dict[str, Any]:
    """summary_to_dict of any dataclass built of Summary's kinds of fields (the fleet's FleetSummary too), its
    fields in `skip` left out."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name in skip:
            continue
        convert = _FIELD_DICTS.get(f.name)
        if convert is not None:
            out[f.name] = convert(value)
        elif isinstance(value, pl.DataFrame):
            out[f.name] = frame_records(value)
        elif isinstance(value, JobPhases):
            out[f.name] = _phases_dict(value)
        else:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    cleaned: dict[str, Any] = clean(out)
    return dict(sorted(cleaned.items()))
