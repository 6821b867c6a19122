"""The report as stable JSON: sorted keys, rounded floats, one document per trace."""

from __future__ import annotations

import json
from typing import Any


def render_json(content: dict[str, Any]) -> str:
    """The report content as indented JSON with sorted keys (a stable contract for scripts and CI)."""
    return json.dumps(content, indent=1, sort_keys=True, allow_nan=False, default=str) + "\n"
