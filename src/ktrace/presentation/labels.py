"""Labels every view puts on the analysis' numbers: one wording per kind of row or count, shared by all views."""

from __future__ import annotations


def step_source_note(source: str) -> str:
    """What every view appends to a step count: " (inferred from a periodic kernel)" for inferred steps, else ""."""
    return " (inferred from a periodic kernel)" if source == "periodic" else ""


def memory_op_label(op: object, copy_kind: object, host_memory: object) -> str:
    """The one name of a memory-operation row in every view: op, copy kind and host memory, e.g.
    "memcpy HtoD pageable", "memset - -" (memory_distribution writes "-" for what does not apply)."""
    return f"{op} {copy_kind} {host_memory}"
