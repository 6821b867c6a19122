"""ktrace: GPU kernel-trace timeline analyzer. `ktrace.open(path)` returns a Trace from any supported source."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ktrace.model.trace import Trace

__all__ = ["__version__", "open", "annotate", "step", "start", "stop"]


def open(path: str | os.PathLike[str], **options: Any) -> Trace:  # noqa: A001 - the public verb
    """Open a trace: a .ktrace folder, a Kineto .json/.json.gz (or a folder of them), or an nsys .sqlite."""
    from ktrace.importers import load  # deferred: importers pull in pyarrow/polars (~0.8 s)

    return load(path, **options)


def __getattr__(name: str) -> Any:
    # PEP 562: the capture API lives in the tracer; importing it eagerly would cost every `import ktrace`.
    if name in ("annotate", "step", "start", "stop"):
        import importlib

        return getattr(importlib.import_module("ktrace.tracer.api"), name)
    raise AttributeError(f"module 'ktrace' has no attribute {name!r}")
