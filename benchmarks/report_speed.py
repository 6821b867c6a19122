"""Time `ktrace report` (content + rules + HTML) on a big synthetic trace, against summarize() as the anchor.

Budget (issue 7): a 10 M-kernel trace's report in <= 10 s and an HTML file <= 15 MB.

usage: python benchmarks/report_speed.py [--kernels 10000000]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    """Generate, then time the anchor and the report stages; print seconds, sizes and ratios."""
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.analysis.summary import summarize
    from ktrace.report.content import build_report
    from ktrace.report.html import render_html
    from ktrace.report.markdown import render_markdown
    from ktrace.testing import SyntheticConfig, generate

    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=10_000_000)
    parser.add_argument("--ranks", type=int, default=1)
    args = parser.parse_args()
    per_step = 200
    steps = max(1, args.kernels // per_step // args.ranks)
    t = time.perf_counter()
    trace = generate(SyntheticConfig(steps=steps, kernels_per_step=per_step, ranks=args.ranks, seed=1))
    print(f"generated {trace.kernels.height:,} kernels, {trace.api.height:,} API calls in "
          f"{time.perf_counter() - t:.1f} s")
    summarize(trace.with_meta(trace.meta))  # warm numba caches and imports (not timed)
    t = time.perf_counter()
    summarize(trace)
    anchor = time.perf_counter() - t
    t = time.perf_counter()
    run_rules(trace)
    rules_s = time.perf_counter() - t
    t = time.perf_counter()
    content = build_report(trace)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    html = render_html(content)
    html_s = time.perf_counter() - t
    md = render_markdown(content)
    total = build_s + html_s
    print(f"anchor summarize(): {anchor:.2f} s")
    print(f"run_rules alone:    {rules_s:.2f} s  ({rules_s / anchor:.2f} x anchor)")
    print(f"report content:     {build_s:.2f} s  (summary + rules, {build_s / anchor:.2f} x anchor)")
    print(f"HTML render:        {html_s:.2f} s")
    print(f"report total:       {total:.2f} s  ({total / anchor:.2f} x anchor; budget 10 s)")
    print(f"HTML size:          {len(html.encode()) / 1e6:.2f} MB (budget 15 MB); Markdown {len(md) / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
