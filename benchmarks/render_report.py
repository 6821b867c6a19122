"""Render the HTML report of a real trace in headless Chromium and take a screenshot.

Checks that the plots are drawn (the page's own counter of plotly figures) and that the console shows no
script error. Chromium runs with --headless --no-sandbox --disable-gpu and no network access to anything but
the local file (the report is self-contained). Needs Debian's `chromium` (apt-get install -y chromium).

usage: python benchmarks/render_report.py [TRACE] [-o OUTDIR]
exit code: 0 when every plot was drawn without console errors, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_TRACE = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "traces"
    / "kineto-resnet50-v100-pt1.9"
    / "worker0.1623143089861.pt.trace.json.gz"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--virtual-time-budget=8000",
]


def chromium() -> str:
    """Path of the Chromium binary, or exit with how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("chromium not found: apt-get update && apt-get install -y chromium")


def render(html: Path, outdir: Path) -> tuple[int, int, list[str]]:
    """(figures in the page, figures drawn, console errors) after loading `html` in headless Chromium."""
    exe = chromium()
    url = html.resolve().as_uri()
    shot = outdir / "report.png"
    subprocess.run(
        [exe, *FLAGS, "--window-size=1400,4000", f"--screenshot={shot}", url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    dump = subprocess.run(
        [exe, *FLAGS, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    drawn = re.search(r'data-plots-drawn="(\d+)"', dump.stdout)
    expected = html.read_text(encoding="utf-8").count('class="plot"')
    errors = [line for line in dump.stderr.splitlines() if "CONSOLE" in line and ("Error" in line or "error" in line)]
    return expected, int(drawn.group(1)) if drawn else 0, errors


def main() -> int:
    """Make the report, render it, print what was seen."""
    import ktrace
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import render_html

    parser = argparse.ArgumentParser()
    parser.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    parser.add_argument("-o", "--outdir", default=str(Path(tempfile.gettempdir()) / "ktrace-render"))
    args = parser.parse_args()
    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    trace = ktrace.open(args.trace)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    html = outdir / "report.html"
    html.write_text(render_html(build_report(trace)), encoding="utf-8")
    report_s = time.perf_counter() - t
    expected, drawn, errors = render(html, outdir)
    print(f"trace {args.trace}: read {read_s:.2f} s, report {report_s:.2f} s, {html.stat().st_size / 1e6:.2f} MB HTML")
    print(
        f"chromium: {drawn} of {expected} plots drawn, {len(errors)} console errors; screenshot {outdir / 'report.png'}"
    )
    for line in errors[:10]:
        print("  ", line)
    return 0 if drawn == expected and expected > 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
