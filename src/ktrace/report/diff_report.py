"""The regression report of `ktrace diff`: steps, kernel time, top kernel changes and rules, A vs B."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ktrace.analysis.diff import trace_diff
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import run_rules
from ktrace.analysis.summary import frame_records
from ktrace.model.display_text import printable
from ktrace.model.trace import Trace
from ktrace.report.format import fmt_ns
from ktrace.report.markdown import md_table

if TYPE_CHECKING:
    from rich.console import Console


def _change(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else round(100.0 * (b - a) / a, 4)


def _fired(trace: Trace, config: RulesConfig | None) -> dict[str, str]:
    """Rule -> worst severity of its findings, for the rules that fired."""
    order = ("info", "warning", "error")
    out: dict[str, str] = {}
    for f in run_rules(trace, config).findings:
        if f.rule not in out or order.index(f.severity) > order.index(out[f.rule]):
            out[f.rule] = f.severity
    return out


def build_diff(a: Trace, b: Trace, *, threshold_pct: float = 5.0, top: int = 15,
               config: RulesConfig | None = None, fail_on: str = "error") -> dict[str, Any]:
    """Compare baseline `a` with candidate `b`.

    A regression is: mean step time (or, without steps, total kernel time) up by more than threshold_pct,
    or a rule firing in B at severity >= fail_on that did not fire (at that level) in A.
    """
    d = trace_diff(a, b)
    step_change = _change(d.step_mean_a_ns, d.step_mean_b_ns)
    kernel_change = _change(float(d.kernel_time_a_ns), float(d.kernel_time_b_ns))
    rules_a, rules_b = _fired(a, config), _fired(b, config)
    levels = ("info", "warning", "error")
    floor = levels.index(fail_on) if fail_on in levels else len(levels)
    new = sorted(r for r, s in rules_b.items() if levels.index(s) >= floor
                 and (r not in rules_a or levels.index(rules_a[r]) < floor))
    measure = step_change if step_change is not None else kernel_change
    reasons = []
    if measure is not None and measure > threshold_pct:
        what = "mean step time" if step_change is not None else "total kernel time"
        reasons.append(f"{what} up {measure:.1f} % (threshold {threshold_pct:g} %)")
    if new:
        reasons.append(f"new findings at {fail_on} or above: {', '.join(new)}")
    return {"step_mean_ns": {"a": d.step_mean_a_ns, "b": d.step_mean_b_ns, "change_pct": step_change},
            "kernel_time_ns": {"a": d.kernel_time_a_ns, "b": d.kernel_time_b_ns, "change_pct": kernel_change},
            "kernels": frame_records(d.kernels.head(top)), "rules": {"a": rules_a, "b": rules_b, "new": new},
            "threshold_pct": threshold_pct, "regression": bool(reasons), "reasons": reasons}


def render_diff_markdown(diff: dict[str, Any]) -> str:
    """The diff as Markdown."""
    s, k = diff["step_mean_ns"], diff["kernel_time_ns"]
    out = ["# ktrace diff (A = baseline, B = candidate)", ""]
    out += md_table(["", "A", "B", "change %"], [
        ["mean step time", fmt_ns(s["a"]), fmt_ns(s["b"]), s["change_pct"] if s["change_pct"] is not None else "-"],
        ["total kernel time", fmt_ns(k["a"]), fmt_ns(k["b"]), k["change_pct"] if k["change_pct"] is not None
         else "-"]])
    out += ["## Kernels that changed most", ""] + md_table(
        ["kernel", "count A", "count B", "total A", "total B", "delta", "status"],
        [[r["name"], r["count_a"], r["count_b"], fmt_ns(r["total_ns_a"]), fmt_ns(r["total_ns_b"]),
          fmt_ns(r["delta_ns"]), r["status"]] for r in diff["kernels"] or []])
    rules = diff["rules"]
    out += ["## Rules", ""] + md_table(["rule", "A", "B"], [[r, rules["a"].get(r, "-"), rules["b"].get(r, "-")]
                                                           for r in sorted(set(rules["a"]) | set(rules["b"]))])
    verdict = "REGRESSION: " + "; ".join(diff["reasons"]) if diff["regression"] else "no regression"
    return "\n".join(out + [printable(verdict), ""])


def render_diff_terminal(diff: dict[str, Any], console: Console) -> None:
    """The diff as terminal tables, like `ktrace summary` (kernel names shortened and distinct, nothing escaped)."""
    from rich.markup import escape

    from ktrace.model.display_text import printable_tree
    from ktrace.report.terminal import print_table

    diff = printable_tree(diff)  # trace text: no control character reaches the terminal
    s, k = diff["step_mean_ns"], diff["kernel_time_ns"]
    console.print("[bold]ktrace diff[/] (A = baseline, B = candidate)")
    print_table(console, "time", [
        {"measure": "mean step time", "a_ns": s["a"], "b_ns": s["b"], "change_pct": s["change_pct"]},
        {"measure": "total kernel time", "a_ns": k["a"], "b_ns": k["b"], "change_pct": k["change_pct"]}])
    print_table(console, "kernels that changed most", [
        {"name": r["name"], "count_a": r["count_a"], "count_b": r["count_b"], "total_a_ns": r["total_ns_a"],
         "total_b_ns": r["total_ns_b"], "delta_ns": r["delta_ns"], "status": r["status"]}
        for r in diff["kernels"] or []])
    rules = diff["rules"]
    print_table(console, "rules that fired", [{"rule": r, "a": rules["a"].get(r, "-"), "b": rules["b"].get(r, "-")}
                                              for r in sorted(set(rules["a"]) | set(rules["b"]))])
    if diff["regression"]:
        console.print("[bold red]REGRESSION:[/] " + escape("; ".join(diff["reasons"])))
    else:
        console.print("[green]no regression[/]")
