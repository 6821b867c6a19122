"""Hand-built traces for the rule tests: each one made to trigger (or not) one rule."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import RuleResult
from ktrace.analysis.rules.config import RulesConfig, apply_overrides
from ktrace.analysis.rules.engine import all_rules, evaluate
from ktrace.model.builder import TraceBuilder
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace, TraceMeta

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
US = 1_000


def launches(
    b: TraceBuilder,
    starts: np.ndarray,
    durs: np.ndarray,
    *,
    api_dur: int = 5 * US,
    latency: int = 5 * US,
    name: str = "gemm_kernel",
    stream: int = 7,
    first_corr: int = 1,
    rank: int = 0,
    device: int = 0,
) -> None:
    """Kernels at `starts` (ns) lasting `durs`, each launched by a cudaLaunchKernel ending `latency` before."""
    n = starts.size
    corr = np.arange(first_corr, first_corr + n, dtype=np.int64)
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": starts + durs,
            "device": np.full(n, device, np.int32),
            "stream": np.full(n, stream),
            "correlation_id": corr,
            "name": [name] * n,
        },
        rank=rank,
    )
    api_end = starts - latency
    b.add(
        "api",
        {
            "start_ns": api_end - api_dur,
            "end_ns": api_end,
            "pid": np.full(n, 1),
            "tid": np.full(n, 1),
            "correlation_id": corr,
            "domain": ["runtime"] * n,
            "name": ["cudaLaunchKernel"] * n,
        },
        rank=rank,
    )


def steady(n: int = 200, period: int = 100 * US, dur: int = 80 * US, **kw: Any) -> Callable[[TraceBuilder], None]:
    """A builder step adding `n` back-to-back kernels."""

    def add(b: TraceBuilder) -> None:
        launches(b, T0 + np.arange(n, dtype=np.int64) * period, np.full(n, dur, np.int64), **kw)

    return add


def counters(b: TraceBuilder, metric: str, values: np.ndarray, *, instance: int = -1, interval: int = 500 * MS) -> None:
    """Node-level counter samples at `interval`."""
    n = values.size
    b.add(
        "counters",
        {
            "ts_ns": T0 + np.arange(n, dtype=np.int64) * interval,
            "metric": [metric] * n,
            "instance": np.full(n, instance, np.int32),
            "value": values.astype(np.float64),
        },
        rank=NODE_RANK,
    )


def build(*parts: Callable[[TraceBuilder], None], meta: TraceMeta | None = None) -> Trace:
    """A trace from builder steps."""
    b = TraceBuilder(node="n0", rank=0, meta=meta or TraceMeta(source="synthetic"))
    for part in parts:
        part(b)
    return b.build()


def run_rule(trace: Trace, name: str, *overrides: str) -> RuleResult:
    """Evaluate one rule on `trace` with `Rule.param=value` overrides."""
    rules = all_rules()
    rule = next(r for r in rules if r.name == name)
    config = apply_overrides(RulesConfig(), [f"{name}.{o}" for o in overrides], rules)
    return evaluate(rule, trace, TraceIndex(trace), config)


@pytest.fixture
def tb() -> SimpleNamespace:
    """The helpers above as one namespace: tb.build, tb.launches, tb.steady, tb.counters, tb.run_rule, tb.T0."""
    return SimpleNamespace(
        build=build, launches=launches, steady=steady, counters=counters, run_rule=run_rule, T0=T0, MS=MS, US=US
    )
