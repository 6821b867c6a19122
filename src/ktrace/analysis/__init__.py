"""Analyses: pure functions from a Trace to polars frames or small frozen dataclasses."""

from __future__ import annotations
