"""Run inside the HTA venv (not ktrace's): `python hta_breakdowns.py OUT.json DIR...` writes one JSON object: per trace
folder, HTA's temporal, idle-time and GPU kernel breakdowns as lists of rows (sorted, NaN as null), which the test
compares in ktrace's interpreter. Set HTA_DISABLE_NS_ROUNDING=1 for HTA's exact mode."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import pandas as pd  # noqa: E402  (HTA's own dependency: imported after its warnings are silenced)
from hta.trace_analysis import TraceAnalysis  # noqa: E402

ALL_KERNELS = 1_000_000
"""num_kernels of get_gpu_kernel_breakdown: every kernel by name, none folded into "others"."""


def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows in a fixed order, each a {column: value} with NaN as None."""
    ordered = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    plain = ordered.astype(object).where(ordered.notna(), None)
    return [{str(k): v for k, v in row.items()} for row in plain.to_dict("records")]


def breakdowns(folder: str) -> dict[str, list[dict[str, Any]]]:
    """HTA's breakdowns of the rank files in `folder`."""
    analysis = TraceAnalysis(trace_dir=folder)
    kernel_types, kernels = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=ALL_KERNELS, include_memory_kernels=True
    )
    return {
        "temporal": rows(analysis.get_temporal_breakdown(visualize=False)),
        "idle": rows(analysis.get_idle_time_breakdown(visualize=False)[0]),
        "kernel_types": rows(kernel_types),
        "kernels": rows(kernels),
    }


if __name__ == "__main__":
    results = {folder: breakdowns(folder) for folder in sys.argv[2:]}
    with open(sys.argv[1], "w") as out:
        json.dump(results, out, default=str)
