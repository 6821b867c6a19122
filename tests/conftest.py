"""Shared fixtures: the real traces (fixtures/traces, see real_traces.py), and small synthetic traces."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from real_traces import REAL_TRACES, real_traces_dir

os.environ.setdefault("KTRACE_READONLY_SHARED", "1")  # the TraceIndex's shared arrays: writing one raises

settings.register_profile(
    "dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The folder of real traces (fixtures/traces, or $KTRACE_SHARED_TRACES); a missing one fails, never skips."""
    path = real_traces_dir()
    if not path.is_dir():
        pytest.fail(
            f"real traces not found at {path} (fixtures/traces is part of the repository; "
            "KTRACE_SHARED_TRACES, when set, must name a folder laid out like it)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def real_trace_path(shared_traces: Path) -> Callable[[str], Path]:
    """A function: short name (see REAL_TRACES) -> path of that real trace; fails the test if it is missing."""

    def get(name: str) -> Path:
        path = shared_traces / REAL_TRACES[name]
        if not path.exists():
            pytest.fail(f"real trace {name!r} not found at {path}", pytrace=False)
        return path

    return get


@pytest.fixture(scope="session")
def synthetic_trace():  # type: ignore[no-untyped-def]
    """A small 2-rank synthetic training job (seeded)."""
    from ktrace.testing import SyntheticConfig, generate

    return generate(SyntheticConfig(steps=8, kernels_per_step=60, ranks=2, seed=7))
