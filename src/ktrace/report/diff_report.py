"""The regression report of `ktrace diff`: steps, kernel time, top kernel changes, GPU memory and rules, A vs B.

build_diff computes one typed DiffReport; Markdown, the terminal and JSON (diff_document) render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from ktrace.analysis.diff import trace_diff
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.memory_diff import MemoryDiff, diff_memory
from ktrace.analysis.memory_timeline import memory_timeline
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import run_rules
from ktrace.analysis.units import format_bytes as fmt_bytes
from ktrace.model.display_text import printable
from ktrace.model.trace import Trace
from ktrace.model.units import format_ns as fmt_ns
from ktrace.presentation.json_rows import frame_records
from ktrace.presentation.report_memory import SOURCE_WORDS
from ktrace.presentation.summary_tables import frame_rows as rows
from ktrace.presentation.verdicts import SEVERITIES
from ktrace.report.markdown import md_table

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class Change:
    """One measure in A and B, and its change in % of A (None when either is missing or A is 0)."""

    a: float | None
    b: float | None
    change_pct: float | None

    @classmethod
    def of(cls, a: float | None, b: float | None) -> Change:
        """The change from `a` to `b`."""
        pct = None if a is None or b is None or a == 0 else round(100.0 * (b - a) / a, 4)
        return cls(a, b, pct)


@dataclass(frozen=True)
class DiffReport:
    """Baseline A against candidate B, and whether B is a regression."""

    step_mean: Change
    """Mean step time in ns."""
    kernel_time: Change
    """Total kernel time in ns."""
    kernels: pl.DataFrame
    """The kernels that changed most (analysis.diff.diff_kernels, first `top` rows)."""
    rules_a: dict[str, str]
    """Rule -> worst severity of its findings in A, for the rules that fired."""
    rules_b: dict[str, str]
    new_rules: tuple[str, ...]
    """Rules firing in B at severity >= fail_on that did not (at that level) in A."""
    threshold_pct: float
    reasons: tuple[str, ...]
    """Why B is a regression; empty when it is not."""
    memory: MemoryDiff | None = None
    """GPU memory of A and B (analysis.memory_diff); None unless both traces have a memory timeline."""
    memory_missing: str = ""
    """Without memory: which trace lacks a timeline ("A has", "B has", "A and B have")."""

    @property
    def regression(self) -> bool:
        """True when B regressed (some reason)."""
        return bool(self.reasons)

    def rules_fired(self) -> list[tuple[str, str, str]]:
        """(rule, worst severity in A, in B; "-" where it did not fire) for every rule that fired in A or B."""
        return [
            (r, self.rules_a.get(r, "-"), self.rules_b.get(r, "-"))
            for r in sorted(set(self.rules_a) | set(self.rules_b))
        ]


NO_MEMORY = (
    "memory: not compared, {which} no GPU memory timeline (Kineto [memory] events from profile_memory=True, "
    "nsys CUDA memory usage, or `ktrace run`'s NVML counters)"
)


def _fired(trace: Trace, config: RulesConfig | None, index: TraceIndex) -> dict[str, str]:
    """Rule -> worst severity of its findings, for the rules that fired."""
    out: dict[str, str] = {}
    for f in run_rules(trace, config, index=index).findings:
        if f.rule not in out or SEVERITIES.index(f.severity) > SEVERITIES.index(out[f.rule]):
            out[f.rule] = f.severity
    return out


def build_diff(
    a: Trace,
    b: Trace,
    *,
    threshold_pct: float = 5.0,
    top: int = 15,
    config: RulesConfig | None = None,
    fail_on: str = "error",
) -> DiffReport:
    """Compare baseline `a` with candidate `b`.

    A regression is: mean step time (or, without steps, total kernel time) up by more than threshold_pct,
    or a rule firing in B at severity >= fail_on that did not fire (at that level) in A.
    """
    d = trace_diff(a, b)
    step_mean = Change.of(d.step_mean_a_ns, d.step_mean_b_ns)
    kernel_time = Change(
        d.kernel_time_a_ns,
        d.kernel_time_b_ns,
        Change.of(float(d.kernel_time_a_ns), float(d.kernel_time_b_ns)).change_pct,
    )
    ix_a, ix_b = TraceIndex.of(a, None), TraceIndex.of(b, None)  # the rules and the memory diff share them
    rules_a, rules_b = _fired(a, config, ix_a), _fired(b, config, ix_b)
    floor = SEVERITIES.index(fail_on) if fail_on in SEVERITIES else len(SEVERITIES)
    new = sorted(
        r
        for r, s in rules_b.items()
        if SEVERITIES.index(s) >= floor and (r not in rules_a or SEVERITIES.index(rules_a[r]) < floor)
    )
    measure = step_mean.change_pct if step_mean.change_pct is not None else kernel_time.change_pct
    reasons = []
    if measure is not None and measure > threshold_pct:
        what = "mean step time" if step_mean.change_pct is not None else "total kernel time"
        reasons.append(f"{what} up {measure:.1f} % (threshold {threshold_pct:g} %)")
    if new:
        reasons.append(f"new findings at {fail_on} or above: {', '.join(new)}")
    return DiffReport(
        step_mean=step_mean,
        kernel_time=kernel_time,
        kernels=d.kernels.head(top),
        rules_a=rules_a,
        rules_b=rules_b,
        new_rules=tuple(new),
        threshold_pct=threshold_pct,
        reasons=tuple(reasons),
        memory=diff_memory(a, b, top=top, index_a=ix_a, index_b=ix_b),
        memory_missing=_missing(memory_timeline(a, index=ix_a) is None, memory_timeline(b, index=ix_b) is None),
    )


def _missing(a: bool, b: bool) -> str:
    return "A and B have" if a and b else "A has" if a else "B has" if b else ""


def _change_dict(change: Change) -> dict[str, Any]:
    return {"a": change.a, "b": change.b, "change_pct": change.change_pct}


def diff_document(diff: DiffReport) -> dict[str, Any]:
    """The diff as the JSON of `ktrace diff --json`: {"step_mean_ns", "kernel_time_ns", "kernels", "memory",
    "rules", "threshold_pct", "regression", "reasons"}; memory is {"source_a", "source_b", "devices",
    "operators"} (MemoryDiff's frames as records), or null with "memory_note" saying which trace lacks one."""
    memory = diff.memory
    return {
        "step_mean_ns": _change_dict(diff.step_mean),
        "kernel_time_ns": _change_dict(diff.kernel_time),
        "kernels": frame_records(diff.kernels),
        "memory": None
        if memory is None
        else {
            "source_a": memory.source_a,
            "source_b": memory.source_b,
            "devices": frame_records(memory.devices),
            "operators": frame_records(memory.operators),
        },
        **({} if memory is not None else {"memory_note": _memory_note(diff)}),
        "rules": {"a": diff.rules_a, "b": diff.rules_b, "new": list(diff.new_rules)},
        "threshold_pct": diff.threshold_pct,
        "regression": diff.regression,
        "reasons": list(diff.reasons),
    }


def _memory_note(diff: DiffReport) -> str:
    return NO_MEMORY.format(which=diff.memory_missing)


def _memory_rows(memory: MemoryDiff) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per device, per operator) rows with bytes: the terminal's and Markdown's tables."""
    devices = [
        {
            "device": printable(f"{r['node_b'] or r['node_a']}/{r['rank']}/{r['device']}"),
            **{f"{m}_{s}_bytes": r[f"peak_{m}_{s}"] for m in ("allocated", "reserved") for s in ("a", "b", "delta")},
        }
        for r in rows(memory.devices)
    ]
    operators = [
        {
            "name": "(outside operators)" if r["operator"] is None else printable(r["operator"]),
            "allocations_a": r["allocations_a"],
            "allocations_b": r["allocations_b"],
            "a_bytes": r["allocated_a"],
            "b_bytes": r["allocated_b"],
            "delta_bytes": r["allocated_delta"],
        }
        for r in rows(memory.operators)
    ]
    return devices, operators


def mixed_sources(memory: MemoryDiff) -> str:
    """A warning when A's and B's peaks are different measures (allocator bytes vs NVML's used memory), else ""."""
    if memory.source_a == memory.source_b:
        return ""
    return (
        f"A's memory comes from {SOURCE_WORDS.get(memory.source_a, memory.source_a)}, B's from "
        f"{SOURCE_WORDS.get(memory.source_b, memory.source_b)}: not the same measure, so the deltas mix the two"
    )


def _memory_markdown(diff: DiffReport) -> list[str]:
    if diff.memory is None:
        return ["## GPU memory", "", printable(_memory_note(diff)), ""]
    devices, operators = _memory_rows(diff.memory)
    out = ["## GPU memory (peak per device)", ""]
    if warning := mixed_sources(diff.memory):
        out += [f"_{warning}_", ""]
    out += md_table(
        ["device (node/rank/device)", "allocated A", "allocated B", "delta", "reserved A", "reserved B", "delta"],
        [[d["device"], *(fmt_bytes(d[k]) for k in list(d)[1:])] for d in devices],
    )
    if operators:
        out += ["## Allocating operators that changed most (bytes allocated)", ""]
        out += md_table(
            ["operator", "allocations A", "allocations B", "A", "B", "delta"],
            [
                [o["name"], o["allocations_a"], o["allocations_b"], *(fmt_bytes(o[k]) for k in list(o)[3:])]
                for o in operators
            ],
        )
    return out


def _pct_text(change: Change) -> object:
    return change.change_pct if change.change_pct is not None else "-"


def render_diff_markdown(diff: DiffReport) -> str:
    """The diff as Markdown."""
    step, kernel = diff.step_mean, diff.kernel_time
    out = ["# ktrace diff (A = baseline, B = candidate)", ""]
    out += md_table(
        ["", "A", "B", "change %"],
        [
            ["mean step time", fmt_ns(step.a), fmt_ns(step.b), _pct_text(step)],
            ["total kernel time", fmt_ns(kernel.a), fmt_ns(kernel.b), _pct_text(kernel)],
        ],
    )
    out += ["## Kernels that changed most", ""] + md_table(
        ["kernel", "count A", "count B", "total A", "total B", "delta", "status"],
        [
            [
                r["name"],
                r["count_a"],
                r["count_b"],
                fmt_ns(r["total_ns_a"]),
                fmt_ns(r["total_ns_b"]),
                fmt_ns(r["delta_ns"]),
                r["status"],
            ]
            for r in rows(diff.kernels)
        ],
    )
    out += _memory_markdown(diff)
    out += ["## Rules", ""] + md_table(["rule", "A", "B"], [list(fired) for fired in diff.rules_fired()])
    verdict = "REGRESSION: " + "; ".join(diff.reasons) if diff.regression else "no regression"
    return "\n".join(out + [printable(verdict), ""])


def render_diff_terminal(diff: DiffReport, console: Console) -> None:
    """The diff as terminal tables, like `ktrace summary` (kernel names shortened and distinct, nothing escaped;
    no control character from the trace reaches the terminal)."""
    from rich.markup import escape

    from ktrace.report.terminal_tables import print_table

    step, kernel = diff.step_mean, diff.kernel_time
    console.print("[bold]ktrace diff[/] (A = baseline, B = candidate)")
    print_table(
        console,
        "time",
        [
            {"measure": "mean step time", "a_ns": step.a, "b_ns": step.b, "change_pct": step.change_pct},
            {"measure": "total kernel time", "a_ns": kernel.a, "b_ns": kernel.b, "change_pct": kernel.change_pct},
        ],
    )
    print_table(
        console,
        "kernels that changed most",
        [
            {
                "name": printable(r["name"]),
                "count_a": r["count_a"],
                "count_b": r["count_b"],
                "total_a_ns": r["total_ns_a"],
                "total_b_ns": r["total_ns_b"],
                "delta_ns": r["delta_ns"],
                "status": printable(r["status"]),
            }
            for r in rows(diff.kernels)
        ],
    )
    if diff.memory is None:
        console.print(f"[dim]{escape(printable(_memory_note(diff)))}[/]")
    else:
        devices, operators = _memory_rows(diff.memory)
        if warning := mixed_sources(diff.memory):
            console.print(f"[yellow]{escape(warning)}[/]")
        print_table(console, "GPU memory: peak per device (node/rank/device)", devices)
        if operators:
            print_table(console, "allocating operators that changed most (bytes allocated)", operators)
    print_table(console, "rules that fired", [{"rule": printable(r), "a": a, "b": b} for r, a, b in diff.rules_fired()])
    if diff.regression:
        console.print("[bold red]REGRESSION:[/] " + escape(printable("; ".join(diff.reasons))))
    else:
        console.print("[green]no regression[/]")
