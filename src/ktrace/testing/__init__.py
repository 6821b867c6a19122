"""Test support shipped with ktrace: synthetic trace generators (one process; a multi-host job), hypothesis strategies, assert_trace_equal."""

from __future__ import annotations

from ktrace.testing.compare import assert_trace_equal
from ktrace.testing.fleet import FleetConfig, FleetTrace, generate_fleet
from ktrace.testing.synthetic import SyntheticConfig, generate, generate_batches

__all__ = [
    "FleetConfig",
    "FleetTrace",
    "SyntheticConfig",
    "assert_trace_equal",
    "generate",
    "generate_batches",
    "generate_fleet",
]
