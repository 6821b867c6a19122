"""Capture: the CUPTI tracer, NVTX, counter sampling and the `ktrace run` launcher."""

from __future__ import annotations
