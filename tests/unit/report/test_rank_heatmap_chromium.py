"""Slow: the report of a 64-rank job on 8 hosts (testing.fleet) in headless Chromium: its one rank heatmap labels
every rank in full, none cut on the left, and scrolls inside its section. Fails on the old code (four heatmaps, 64
labels each, in figures no taller than 900 px, with no scrolling section)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from chromium_page import page_facts

pytestmark = pytest.mark.slow

MEASURE = """
<script>
setTimeout(function(){
  var out = {plots: 0, labels: [], cut: [], scroll: null};
  document.querySelectorAll('#ranks .js-plotly-plot').forEach(function(div){
    out.plots += 1;
    var left = div.getBoundingClientRect().left;
    div.querySelectorAll('.ytick text').forEach(function(t){
      out.labels.push(t.textContent);
      if (t.getBoundingClientRect().left < left - 0.5) { out.cut.push(t.textContent); } });
  });
  var box = document.querySelector('#ranks .heatmap-scroll');
  if (box) { out.scroll = [box.scrollHeight, box.clientHeight, box.scrollWidth, box.clientWidth]; }
  document.body.setAttribute('data-ranks', JSON.stringify(out));
}, 1500);
</script>
"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_64_ranks_heatmap_labels_every_rank_uncut_and_scrolls(tmp_path: Path) -> None:
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import render_html
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    trace = generate_fleet(FleetConfig(ranks=64, hosts=8, steps=4, kernels_per_step=4)).trace
    page = tmp_path / "report.html"
    page.write_text(render_html(build_report(trace)).replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    labels = [f"{n}/{r}" for n, r in trace.kernels.select("node", "rank").unique().sort("node", "rank").iter_rows()]
    for width in (1280, 600):
        facts = page_facts(page, width, "data-ranks")
        assert facts["plots"] == 1 and facts["labels"] == labels, facts
        assert facts["cut"] == [], f"rank labels cut on the left at {width} px"
        scroll_height, client_height, scroll_width, client_width = facts["scroll"]
        assert scroll_height > client_height and scroll_width <= client_width, facts["scroll"]
