"""Hypothesis strategies for traces: small, valid, multi-rank traces built through TraceBuilder."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ktrace.model.builder import TraceBuilder
from ktrace.model.schema import COPY_KINDS, MEMORY_KINDS, SYNC_TYPES
from ktrace.model.secrets import scrub_text
from ktrace.model.trace import Trace, TraceMeta

_T0 = 1_700_000_000_000_000_000
_NAMES = (
    "ampere_sgemm_128x64_nn",
    "triton_poi_fused_add_0",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    "void at::native::vectorized_elementwise_kernel<4>",
    "名前 with ünïcode",
    "",
)
_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12).filter(lambda s: scrub_text(s)[1] == 0)
"""Any text the secrets rules leave alone ("A://:0@" reads as URL credentials and is redacted on write, so a round
trip would differ by design; the rules have their own corpus, ktrace.testing.secrets_corpus)."""


@st.composite
def spans(draw: Any, n: int) -> tuple[list[int], list[int]]:
    """`n` (start, end) pairs in ns, end >= start."""
    starts = draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n))
    durs = draw(st.lists(st.integers(0, 10**9), min_size=n, max_size=n))
    return [_T0 + s for s in starts], [_T0 + s + d for s, d in zip(starts, durs, strict=True)]


@st.composite
def kernels(draw: Any, max_rows: int = 20) -> dict[str, list[Any]]:
    """Columns for the kernels table."""
    n = draw(st.integers(0, max_rows))
    s, e = draw(spans(n))
    opt_int = st.one_of(st.none(), st.integers(0, 2**31 - 1))
    return {
        "start_ns": s,
        "end_ns": e,
        "device": draw(st.lists(st.integers(0, 7), min_size=n, max_size=n)),
        "stream": draw(st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=n, max_size=n)),
        "correlation_id": draw(st.lists(st.one_of(st.none(), st.integers(0, 2**62)), min_size=n, max_size=n)),
        "name": draw(st.lists(st.one_of(st.sampled_from(_NAMES), _text), min_size=n, max_size=n)),
        "grid_x": draw(st.lists(opt_int, min_size=n, max_size=n)),
        "registers_per_thread": draw(st.lists(opt_int, min_size=n, max_size=n)),
        "graph_id": draw(st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=n, max_size=n)),
    }


@st.composite
def traces(draw: Any, max_ranks: int = 3, max_rows: int = 20) -> Trace:
    """A valid multi-rank Trace with kernels, memory, syncs, api, ranges and counters."""
    b = TraceBuilder(meta=TraceMeta(source="synthetic"))
    n_ranks = draw(st.integers(1, max_ranks))
    for rank in range(n_ranks):
        node = draw(st.sampled_from(["node0", "node1", "gpu-host.example"]))
        b.add("kernels", draw(kernels(max_rows)), node=node, rank=rank)
        n = draw(st.integers(0, max_rows // 2))
        s, e = draw(spans(n))
        b.add(
            "memory",
            {
                "op": draw(st.lists(st.sampled_from(["memcpy", "memset"]), min_size=n, max_size=n)),
                "start_ns": s,
                "end_ns": e,
                "device": [0] * n,
                "bytes": draw(st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=n, max_size=n)),
                "copy_kind": draw(st.lists(st.sampled_from(COPY_KINDS), min_size=n, max_size=n)),
                "src_kind": draw(st.lists(st.sampled_from(MEMORY_KINDS), min_size=n, max_size=n)),
                "dst_kind": draw(st.lists(st.sampled_from(MEMORY_KINDS), min_size=n, max_size=n)),
            },
            node=node,
            rank=rank,
        )
        n = draw(st.integers(0, 4))
        s, e = draw(spans(n))
        b.add(
            "syncs",
            {
                "start_ns": s,
                "end_ns": e,
                "sync_type": draw(st.lists(st.sampled_from(SYNC_TYPES), min_size=n, max_size=n)),
            },
            node=node,
            rank=rank,
        )
        n = draw(st.integers(0, max_rows))
        s, e = draw(spans(n))
        b.add(
            "api",
            {
                "start_ns": s,
                "end_ns": e,
                "pid": [rank + 100] * n,
                "tid": [rank + 100] * n,
                "correlation_id": list(range(1, n + 1)),
                "domain": draw(st.lists(st.sampled_from(["runtime", "driver"]), min_size=n, max_size=n)),
                "name": draw(st.lists(st.sampled_from(["cudaLaunchKernel", "cuLaunchKernel"]), min_size=n, max_size=n)),
            },
            node=node,
            rank=rank,
        )
        n = draw(st.integers(0, 5))
        s, e = draw(spans(n))
        b.add(
            "ranges",
            {
                "start_ns": s,
                "end_ns": e,
                "pid": [1] * n,
                "tid": [1] * n,
                "name": draw(st.lists(_text, min_size=n, max_size=n)),
                "domain": ["nvtx"] * n,
                "depth": [0] * n,
                "on_gpu": draw(st.lists(st.booleans(), min_size=n, max_size=n)),
            },
            node=node,
            rank=rank,
        )
        n = draw(st.integers(0, 5))
        b.add(
            "counters",
            {
                "ts_ns": [_T0 + i for i in range(n)],
                "metric": ["gpu.util"] * n,
                "instance": [0] * n,
                "value": draw(st.lists(st.floats(allow_nan=False, width=64), min_size=n, max_size=n)),
            },
            node=node,
            rank=-1,
        )
    return b.build()
