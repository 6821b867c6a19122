"""model.clock_estimate.estimate_offsets on random jobs: any host offsets, per-rank jitter and a minority of
outlying collectives; the offsets come back within the jitter, and applying them leaves at most the jitter."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ktrace.model.clock_estimate import COLLECTIVE_COLUMNS, RankClockInput, estimate_offsets


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[RankClockInput], dict[str, int], int]:
    hosts = draw(st.integers(2, 5))
    per_host = draw(st.integers(1, 4))
    n = draw(st.integers(3, 40))
    jitter = draw(st.integers(0, 5_000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    offsets = {f"h{h}": 0 if h == 0 else draw(st.integers(-(10**10), 10**10)) for h in range(hosts)}
    true_end = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(50_000, 20_000_000, n))
    # fewer than a quarter of the collectives end late on one host (every rank of it): outliers to reject
    late_host = f"h{draw(st.integers(1, hosts - 1))}"
    late = rng.choice(n, size=draw(st.integers(0, (n - 1) // 4)), replace=False)
    inputs = []
    for h, host in enumerate(offsets):
        for i in range(per_host):
            ends = true_end + offsets[host] + rng.integers(0, jitter + 1, n)
            if host == late_host:
                ends[late] += rng.integers(1_000_000, 50_000_000, late.size)
            frame = pl.DataFrame({"name": ["ncclKernel_AllReduce"] * n, "group": None, "seq": None, "end_ns": ends})
            inputs.append(RankClockInput(host, h * per_host + i, frame.cast(COLLECTIVE_COLUMNS)))
    return inputs, offsets, jitter


@settings(max_examples=60, deadline=None)
@given(jobs())
def test_offsets_come_back_within_the_jitter(job: tuple[list[RankClockInput], dict[str, int], int]) -> None:
    inputs, offsets, jitter = job
    alignment = estimate_offsets(inputs)
    assert alignment.method == "collectives:order" and alignment.reference_host == "h0"
    for h in alignment.hosts:
        assert h.drift_ppm == 0.0  # collectives span well under the second a drift needs
        assert abs(h.offset_ns - offsets[h.host]) <= jitter + 1, h
    assert alignment.residual_p50_ns is not None and alignment.residual_p50_ns <= jitter + 1
