"""Where the real traces are: fixtures/traces in the repository (a copy of ../shared/traces), or $KTRACE_SHARED_TRACES."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
FIXTURE_TRACES = REPO / "fixtures" / "traces"
SHARED_TRACES = REPO.parent / "shared" / "traces"
"""The project's shared collection beside the repository (as on CI), which fixtures/traces copies."""

REAL_TRACES = {
    "alexnet": "hta-a100-alexnet-tiny/benchmark_result_2869224_1695835535_trace.json.gz",
    "nccl": "hta-a100-nccl-rank0of2/nccl_data.json.gz",
    "resnet50": "kineto-resnet50-v100-pt1.9/worker0.1623143089861.pt.trace.json.gz",
    "tracelens": "tracelens-h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "dlrm": "param-dlrm-v100-8rank",
    "cloverleaf": "nsys-sqlite-cloverleaf-a100/perlmutter-cloverleaf-cuda.sqlite",
    "power_iteration": "nsys-sqlite-power-iteration-t4/power_iteration__baseline.sqlite",
    "simple_add": "hta-critical-path/simple_add_trace.json.gz",
    "event_sync": "hta-critical-path/event_sync_trace.json.gz",
    "event_sync_multi_stream": "hta-critical-path/event_sync_multi_stream_trace.json.gz",
}
"""Short name -> path of every real trace, relative to the traces folder."""


def real_traces_dir() -> Path:
    """$KTRACE_SHARED_TRACES (another collection laid out the same way) if set, else the repository's fixtures."""
    env = os.environ.get("KTRACE_SHARED_TRACES")
    return Path(env) if env else FIXTURE_TRACES


def fixture_path(name: str) -> Path:
    """The repository's own copy of real trace `name` (see REAL_TRACES), whatever $KTRACE_SHARED_TRACES says."""
    return FIXTURE_TRACES / REAL_TRACES[name]


def benchmark_script(name: str) -> ModuleType:
    """A script of benchmarks/ (an independent reading of the raw JSON, e.g. check_busbw) loaded as a module."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses of the script look their module up
    spec.loader.exec_module(module)
    return module
