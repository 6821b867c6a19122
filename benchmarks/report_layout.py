"""Measure the HTML report's layout in headless Chromium at a given window width (DOM checks, not pixels).

Injects a script that runs after the plots are drawn and records, in a body attribute that --dump-dom returns:
the rules table's header texts and pixel widths, whether the page overflows the window sideways, the tick
labels of every bar chart, and every pair of texts inside one plot whose boxes overlap its title.

usage: python benchmarks/report_layout.py REPORT.html [--width 900] [--screenshot OUT.png]
"""

from __future__ import annotations

import argparse
import html as html_lib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from render_report import FLAGS, chromium

MEASURE = """
<script>
setTimeout(function(){
  function box(e){ var r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  function hit(a, b){ return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]; }
  var out = {window: window.innerWidth, page: document.documentElement.scrollWidth, rules: [], bars: [],
             overlaps: []};
  document.querySelectorAll('#rules th').forEach(function(th){
    out.rules.push([th.textContent, Math.round(th.getBoundingClientRect().width)]); });
  document.querySelectorAll('#rules tbody tr:first-child td').forEach(function(td, i){
    if (out.rules[i]) { out.rules[i].push(Math.round(td.getBoundingClientRect().width)); } });
  document.querySelectorAll('.js-plotly-plot').forEach(function(div){
    var title = div.querySelector('.gtitle');
    var ticks = Array.prototype.map.call(div.querySelectorAll('.ytick text'), function(t){ return t.textContent; });
    if (div.querySelector('.barlayer') && div.querySelector('.barlayer .point') && ticks.length &&
        isNaN(Number(ticks[0].replace(/[,−]/g, '')))) { out.bars.push(ticks); }
    if (!title) { return; }
    var tb = box(title);
    div.querySelectorAll('.slicetext, .legendtext, .xtick text, .ytick text').forEach(function(t){
      if (t.getBoundingClientRect().width > 0 && hit(tb, box(t))) {
        out.overlaps.push([title.textContent, t.textContent]); } });
    var bar = div.querySelector('.modebar');
    if (bar && bar.getBoundingClientRect().width > 0 && hit(tb, box(bar))) {
      out.overlaps.push([title.textContent, 'plotly tool bar']); }
  });
  document.body.setAttribute('data-layout', JSON.stringify(out));
}, 1500);
</script>
"""


def measure(report: Path, width: int, screenshot: Path | None = None) -> dict[str, Any]:
    """The layout facts of `report` in a `width`-pixel window (and a full-page screenshot if asked)."""
    exe = chromium()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "measured.html"
        page.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
        if screenshot is not None:
            subprocess.run(
                [exe, *FLAGS, f"--window-size={width},5000", f"--screenshot={screenshot}", report.resolve().as_uri()],
                capture_output=True,
                timeout=180,
                check=False,
            )
        dump = subprocess.run(
            [exe, *FLAGS, f"--window-size={width},3000", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    found = re.search(r'data-layout="([^"]*)"', dump.stdout)
    if not found:
        raise RuntimeError(f"the page recorded no layout: {dump.stderr[-500:]}")
    facts: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return facts


def main() -> int:
    """Print the layout facts of one report at one width."""
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    facts = measure(Path(args.report), args.width, Path(args.screenshot) if args.screenshot else None)
    print(json.dumps(facts, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
