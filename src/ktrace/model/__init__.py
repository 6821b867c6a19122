"""The one trace model (schema v1): schemas, the immutable Trace, TraceBuilder and the .ktrace store.

Names are exported lazily (PEP 562) so that `ktrace.model.capture`, which traced processes load, does not
pay for polars through this package's import.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SCHEMA_VERSION": "ktrace.model.schema",
    "SCHEMAS": "ktrace.model.schema",
    "TABLES": "ktrace.model.schema",
    "ExitCode": "ktrace.model.errors",
    "KtraceError": "ktrace.model.errors",
    "TraceFormatError": "ktrace.model.errors",
    "Problem": "ktrace.model.trace",
    "Trace": "ktrace.model.trace",
    "TraceMeta": "ktrace.model.trace",
    "TraceBuilder": "ktrace.model.builder",
    "merge_traces": "ktrace.model.builder",
    "store": "ktrace.model.store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ktrace.model' has no attribute {name!r}")
    if name == "store":
        return importlib.import_module(module)
    return getattr(importlib.import_module(module), name)
