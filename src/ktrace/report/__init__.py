"""Reports: terminal summary, HTML/Markdown/JSON profiling report, built from analysis results."""

from __future__ import annotations
