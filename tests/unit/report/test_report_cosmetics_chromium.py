"""Slow: the DLRM 8-rank report in headless Chromium at 1280 and 600 px (issue 26 item 7). Fails on the old code:
the heatmaps' rank labels were cut on the left ("ocalhost/0"), the one-step heatmaps had an axis of -0.4 ... 0.4,
and narrow table columns broke short words ("localhos t")."""

from __future__ import annotations

import shutil

import pytest
from chromium_page import page_facts

pytestmark = pytest.mark.slow

MEASURE = """
<script>
setTimeout(function(){
  var out = {broken: [], cut: [], labels: 0, steps: []};
  document.querySelectorAll('td:not(.long)').forEach(function(td){
    var walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (var node = walk.nextNode(); node; node = walk.nextNode()) {
      if (node.parentElement.closest('.long')) { continue; }  // a long name: may break anywhere
      var re = /[^\\s-]+/g, m;  // a line may break after a hyphen (data-loading)
      while ((m = re.exec(node.data)) !== null) {
        var r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        var tops = {}; Array.prototype.forEach.call(r.getClientRects(), function(b){ tops[Math.round(b.top)] = 1; });
        // plain words, numbers and host/rank names; C++ signatures have break points of their own (after ">(")
        if (/^[\\w.%/=,+;:µ-]+$/.test(m[0]) && Object.keys(tops).length > 1) { out.broken.push(m[0]); }
      }
    }
  });
  document.querySelectorAll('.js-plotly-plot').forEach(function(div){
    if (!div.querySelector('.hm, .heatmaplayer image, .heatmaplayer')) { return; }
    var left = div.getBoundingClientRect().left;
    div.querySelectorAll('.ytick text').forEach(function(t){
      out.labels += 1;
      if (t.getBoundingClientRect().left < left - 0.5) { out.cut.push(t.textContent); } });
    var title = div.querySelector('.xtitle');
    if (title && title.textContent === 'step') {
      out.steps.push(Array.prototype.map.call(div.querySelectorAll('.xtick text'), function(t){
        return t.textContent; })); }
  });
  document.body.setAttribute('data-cosmetics', JSON.stringify(out));
}, 1500);
</script>
"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_dlrm_report_labels_axes_and_words_at_1280_and_600_pixels(real_trace_path, tmp_path):  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import render_html

    page = tmp_path / "report.html"
    text = render_html(build_report(ktrace.open(real_trace_path("dlrm"))))
    page.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    for width in (1280, 600):
        facts = page_facts(page, width, "data-cosmetics")
        assert facts["labels"] >= 8, facts  # one heatmap x 8 ranks
        assert facts["cut"] == [], f"heatmap labels cut on the left at {width} px"
        assert facts["steps"] and all(ticks == ["0"] for ticks in facts["steps"]), facts["steps"]  # one step
        assert facts["broken"] == [], f"words broken in table cells at {width} px"
