"""The one trace model (schema v1): schemas, the immutable Trace, TraceBuilder and the .ktrace store."""

from __future__ import annotations

from ktrace.model.builder import TraceBuilder, merge_traces
from ktrace.model.errors import ExitCode, KtraceError, TraceFormatError
from ktrace.model.schema import SCHEMA_VERSION, SCHEMAS, TABLES
from ktrace.model.trace import Problem, Trace, TraceMeta

__all__ = [
    "SCHEMA_VERSION", "SCHEMAS", "TABLES", "ExitCode", "KtraceError", "Problem", "Trace", "TraceBuilder",
    "TraceFormatError", "TraceMeta", "merge_traces",
]
