"""The report as Markdown: the same sections and numbers as the HTML report, as tables (no plots)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ktrace.analysis.phases import step_source_note
from ktrace.model.display_text import printable
from ktrace.report.format import fmt_ns, fmt_num, fmt_time_range
from ktrace.report.identity import identity_line

MD_ESCAPES = str.maketrans({"|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "`": "\\`",
                            "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]"})


def cell(value: object, limit: int = 120) -> str:
    """A table cell: shortened and escaped so trace text cannot break the table or inject markup."""
    s = "" if value is None else printable(str(value))
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.translate(MD_ESCAPES)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table (empty list when there are no rows)."""
    if not rows:
        return []
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out + [""]


def _job(c: dict[str, Any]) -> list[str]:
    s, p = c["summary"], c["summary"]["phases"]
    out = ["## Training job summary", ""]
    out += md_table(["", "value"], [["source", s["source"]], ["ranks", s["ranks"]], ["kernels", fmt_num(s["kernels"])],
                                    ["trace span", fmt_time_range(p["start_ns"], p["end_ns"])],
                                    ["steps per rank" if s["ranks"] > 1 else "steps",
                                     f"{p['steps']}{step_source_note(p.get('step_source', 'none'))}"]])
    out += md_table(["phase", "time", "% of job"], [
        [name, fmt_ns(p[f"{key}_ns"]), f"{p[f'{key}_pct']:.1f}"]
        for name, key in (("initialization", "init"), ("training loop", "training"), ("finalization", "finalize"))])
    return out + [f"_{cell(n)}_" for n in s.get("notes") or []] + [""]


def _system(c: dict[str, Any]) -> list[str]:
    rows = [[r["node"], r["metric"], r.get("instance", ""), r["samples"],
             *(fmt_num(r[k]) for k in ("min", "p50", "p95", "p99", "max"))] for r in c["summary"]["counters"] or []]
    return (["## System usage statistics", ""]
            + (md_table(["node", "metric", "instance", "samples", "min", "p50", "p95", "p99", "max"], rows)
               or ["The trace has no counter samples.", ""]))


def _framework(c: dict[str, Any]) -> list[str]:
    s = c["summary"]
    out = ["## Framework metrics", ""]
    out += md_table(["node", "rank", "steps", "min", "mean", "p50", "p95", "max"],
                    [[r["node"], r["rank"], r["steps"], *(fmt_ns(r[k]) for k in ("min_ns", "mean_ns", "p50_ns",
                                                                                  "p95_ns", "max_ns"))]
                     for r in s["step_stats"] or []])
    out += md_table(["launches", "count", "start→start p50", "p95", "end→start p50", "p95"],
                    [[r["kind"], fmt_num(r["count"]), fmt_ns(r.get("launch_latency_ns_p50")),
                      fmt_ns(r.get("launch_latency_ns_p95")), fmt_ns(r.get("queue_delay_ns_p50")),
                      fmt_ns(r.get("queue_delay_ns_p95"))] for r in s.get("latency") or []])
    return out


def _status(r: dict[str, Any]) -> str:
    if r["status"] != "fired":
        return r["status"]
    return max((f["severity"] for f in r["findings"]), key=("info", "warning", "error").index)


def _rules_summary(c: dict[str, Any]) -> list[str]:
    counts = c["rules"]["counts"]
    out = ["## Rules summary", "",
           f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes.", ""]
    return out + md_table(["rule", "verdict", "description", "recommendation", "times triggered", "datapoints",
                           "parameters"],
                          [[r["rule"], _status(r), r["description"], r["recommendation"], fmt_num(r["triggered"]),
                            fmt_num(r["datapoints"]),
                            ", ".join(f"{k}={v}" for k, v in r["params"].items() if k != "max_evidence")]
                           for r in c["rules"]["rules"]])


def _dashboard(c: dict[str, Any]) -> list[str]:
    s = c["summary"]
    out = ["## Dashboard", "", "### Active time", ""]
    out += md_table(["resource", "node", "rank", "instance", "method", "active %"],
                    [[r["resource"], r["node"], r["rank"], r["instance"], r["method"],
                      f"{100 * r['active_share']:.1f}"] for r in s["active"] or []])
    for key, title in (("top_by_time", "Top kernels by time"), ("top_by_count", "Top kernels by launch count")):
        out += [f"### {title}", ""] + md_table(
            ["#", "kernel", "count", "total", "mean", "share %"],
            [[r.get("position") or "", r["name"], fmt_num(r["count"]), fmt_ns(r["total_ns"]), fmt_ns(r["mean_ns"]),
              f"{100 * (r['time_share'] if key == 'top_by_time' else r['count_share']):.1f}"] for r in s[key] or []])
    hist = c["steps_histogram"]
    if hist["counts"]:
        out += ["### Step time distribution", ""] + md_table(
            ["from (ms)", "to (ms)", "steps"],
            [[f"{a:.3f}", f"{b:.3f}", n] for a, b, n in zip(hist["edges_ms"][:-1], hist["edges_ms"][1:],
                                                            hist["counts"], strict=True) if n])
    out += ["### Kernel precision", ""] + md_table(
        ["precision", "kernels", "time", "share %"],
        [[r["precision"], fmt_num(r["kernels"]), fmt_ns(r["time_ns"]), f"{100 * r['time_share']:.1f}"]
         for r in s["precision"] or []])
    out += ["### GPU activity", ""] + md_table(
        ["activity", "count", "time", "share %"],
        [[r["activity"], fmt_num(r["count"]), fmt_ns(r["time_ns"]), f"{100 * r['share']:.1f}"]
         for r in s["activity"] or []])
    out += ["### Memory operations", ""] + md_table(
        ["op", "copy kind", "host memory", "count", "bytes", "time", "GB/s"],
        [[r["op"], r["copy_kind"], r["host_memory"], fmt_num(r["count"]), fmt_num(r["bytes"]), fmt_ns(r["time_ns"]),
          fmt_num(r["bandwidth_gbps"])] for r in s["memory"] or []])
    for h in s.get("annotations") or []:
        out += [f"### Annotation durations: {cell(h['pattern'])}", ""] + md_table(
            ["name", "count", "total", "mean", "p50", "max"],
            [[r["name"], fmt_num(r["count"]), fmt_ns(r["total_ns"]), fmt_ns(r["mean_ns"]), fmt_ns(r.get("p50_ns")),
              fmt_ns(r.get("max_ns"))] for r in h["stats"] or []])
    return out


def _rule(r: dict[str, Any]) -> list[str]:
    out = [f"### {r['rule']}: {_status(r)}", "", cell(r["description"], 1000), ""]
    out += md_table(["parameter", "value"], [[k, v] for k, v in r["params"].items()])
    if r["skipped"]:
        out += [f"Skipped: {cell(r['skipped'], 500)}.", ""]
    for f in r["findings"]:
        out += [f"**{f['severity']}**: {cell(f['message'], 2000)}", "",
                f"_Recommendation_: {cell(f['recommendation'], 2000)}", ""]
        out += md_table(["kind", "when", "node/rank", "device", "stream", "what", "value"],
                        [[e.get("kind", ""), fmt_time_range(e.get("start_ns"), e.get("end_ns")),
                          "/".join(str(e[k]) for k in ("node", "rank") if k in e), e.get("device", ""),
                          e.get("stream", ""), e.get("name", ""), fmt_num(e.get("value"))] for e in f["evidence"][:20]])
    return out


def render_markdown(content: dict[str, Any]) -> str:
    """The report as one Markdown document."""
    out = [f"# {cell(content['title'], 200)}", ""]
    about = identity_line(content.get("trace"))
    if about:
        out += [" · ".join(f"**{cell(k)}** {cell(v, 400)}" for k, v in about), ""]
    for part in (_job, _system, _framework, _rules_summary, _dashboard):
        out += part(content)
    out += ["## Rules", ""]
    for r in content["rules"]["rules"]:
        out += _rule(r)
    return "\n".join(out).rstrip() + "\n"
