"""Load a report page in headless Chromium (benchmarks/render_report.py's flags) and read back the JSON its injected
script left in a body attribute."""

from __future__ import annotations

import html as html_lib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def page_facts(page: Path, width: int, attribute: str) -> dict[str, Any]:
    """The JSON object the page wrote in `<body attribute=...>`, loaded `width` pixels wide (3,000 high)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from render_report import FLAGS, chromium
    finally:
        sys.path.remove(str(BENCHMARKS))
    with tempfile.TemporaryDirectory() as profile:
        dump = subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},3000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    found = re.search(attribute + r'="([^"]*)"', dump.stdout)
    assert found, f"the page recorded nothing: {dump.stderr[-500:]}"
    facts: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return facts
