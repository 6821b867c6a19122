"""Test support shipped with ktrace: a synthetic trace generator, hypothesis strategies, assert_trace_equal."""

from __future__ import annotations

from ktrace.testing.compare import assert_trace_equal
from ktrace.testing.synthetic import SyntheticConfig, generate, generate_batches

__all__ = ["SyntheticConfig", "assert_trace_equal", "generate", "generate_batches"]
