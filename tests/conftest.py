"""Shared fixtures: where the real traces are, and small synthetic traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("KTRACE_READONLY_SHARED", "1")  # memoized analysis arrays: writing one raises
REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"

settings.register_profile("dev", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def shared_traces_dir() -> Path:
    """The real traces: $KTRACE_SHARED_TRACES, else the repo's sibling shared/traces (as on CI)."""
    env = os.environ.get("KTRACE_SHARED_TRACES")
    return Path(env) if env else REPO.parent / "shared" / "traces"


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
"""Short name -> path under shared/traces of every real trace."""


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The folder of real traces; tests that need it are skipped (with the reason) when it is absent."""
    path = shared_traces_dir()
    if not path.is_dir():
        pytest.skip(f"real traces not found at {path} (set KTRACE_SHARED_TRACES)")
    return path


@pytest.fixture(scope="session")
def real_trace_path(shared_traces: Path):  # type: ignore[no-untyped-def]
    """A function: short name (see REAL_TRACES) -> path of that real trace."""

    def get(name: str) -> Path:
        return shared_traces / REAL_TRACES[name]

    return get


@pytest.fixture(scope="session")
def synthetic_trace():  # type: ignore[no-untyped-def]
    """A small 2-rank synthetic training job (seeded)."""
    from ktrace.testing import SyntheticConfig, generate

    return generate(SyntheticConfig(steps=8, kernels_per_step=60, ranks=2, seed=7))
