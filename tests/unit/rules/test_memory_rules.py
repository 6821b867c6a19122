"""MemoryGrowth and GPUMemoryIncrease fed from the allocator's memory timeline (no GPU memory counters)."""

from __future__ import annotations

from ktrace.model import Trace, TraceBuilder

T0 = 1_700_000_000_000_000_000
STEP_NS = 10_000_000
MIB = 1 << 20
GPU_BYTES = 1 << 30


def stepped_trace(kept_per_step_mib: float, steps: int = 6, warmup_mib: float = 0.0) -> Trace:
    """`steps` ProfilerSteps; in each, a 256 MiB activation allocated and freed, plus `kept_per_step_mib` that is
        never freed (a leak); step 1 also allocates `warmup_mib` once (optimizer state, created by the first optimizer
    step). Device 0 has 1 GiB."""
    b = TraceBuilder("n0", 0)
    starts = [T0 + k * STEP_NS for k in range(steps)]
    b.add(
        "ranges",
        {
            "start_ns": starts,
            "end_ns": [s + STEP_NS for s in starts],
            "pid": [1] * steps,
            "tid": [1] * steps,
            "name": [f"ProfilerStep#{k}" for k in range(steps)],
            "domain": ["profiler_step"] * steps,
            "depth": [0] * steps,
            "on_gpu": [False] * steps,
        },
    )
    ts, nbytes, addr = [], [], []
    for k, s in enumerate(starts):
        if k == 1 and warmup_mib:
            ts.append(s + 1), nbytes.append(int(warmup_mib * MIB)), addr.append(10**6)
        ts += [s + 10, s + 20, s + 30]
        nbytes += [256 * MIB, int(kept_per_step_mib * MIB), -256 * MIB]
        addr += [1, 100 + k, 1]
    keep = [(t, n, a) for t, n, a in zip(ts, nbytes, addr, strict=True) if n != 0]
    b.add(
        "allocations",
        {
            "ts_ns": [t for t, _, _ in keep],
            "device": [0] * len(keep),
            "pid": [1] * len(keep),
            "tid": [1] * len(keep),
            "address": [a for _, _, a in keep],
            "bytes": [n for _, n, _ in keep],
        },
    )
    b.add("devices", {"device": [0], "name": ["GPU-X"], "memory_bytes": [GPU_BYTES]})
    return b.build()


def test_memory_growth_fires_on_a_leak_and_not_on_steady_use(tb) -> None:  # type: ignore[no-untyped-def]
    leak = tb.run_rule(stepped_trace(kept_per_step_mib=40), "MemoryGrowth")
    assert leak.fired
    series = leak.details["series"][0]
    assert series["growth_bytes"] == 4 * 40 * MIB and series["rising_steps"] == 4  # steps 1..5 (step 0 skipped)
    evidence = leak.findings[0].evidence
    assert len(evidence) == 4 and evidence[0].value == 40.0 and evidence[0].device == 0
    assert not tb.run_rule(stepped_trace(kept_per_step_mib=0), "MemoryGrowth").fired


def test_memory_growth_skips_warm_up_allocations(tb) -> None:  # type: ignore[no-untyped-def]
    """A one-off 500 MiB in step 1 (optimizer state) is growth only if step 0's end is evaluated too."""
    once = stepped_trace(kept_per_step_mib=0, warmup_mib=500)
    assert not tb.run_rule(once, "MemoryGrowth").fired
    assert not tb.run_rule(once, "MemoryGrowth", "skip_steps=0").fired  # one rise in five steps: below rising_share
    assert tb.run_rule(once, "MemoryGrowth", "skip_steps=0", "rising_share=0.2").fired


def test_memory_growth_thresholds_and_skips(tb) -> None:  # type: ignore[no-untyped-def]
    assert not tb.run_rule(stepped_trace(kept_per_step_mib=10), "MemoryGrowth").fired  # 40 MiB < 64 MiB
    assert tb.run_rule(stepped_trace(kept_per_step_mib=10), "MemoryGrowth", "growth_mib=32").fired
    assert tb.run_rule(stepped_trace(kept_per_step_mib=40, steps=3), "MemoryGrowth").skipped  # 2 steps after the first
    assert tb.run_rule(TraceBuilder().build(), "MemoryGrowth").skipped


def test_gpu_memory_increase_reads_the_allocator_without_counters(tb) -> None:  # type: ignore[no-untyped-def]
    leak = tb.run_rule(stepped_trace(kept_per_step_mib=40, steps=12), "GPUMemoryIncrease")
    assert leak.fired and leak.details["series"][0]["label"] == "n0/rank0/GPU0"
    steady = tb.run_rule(stepped_trace(kept_per_step_mib=0, steps=12), "GPUMemoryIncrease")
    assert not steady.fired and not steady.skipped


def test_gpu_memory_increase_ignores_activations_rising_within_a_step(tb, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    """resnet50 (PyTorch 1.9: no totals) allocates up to 2.8 GB of activations and frees them in every step. Read
    as allocated bytes from the trace start, that sawtooth rose 7.4 points (> 5) and fired; the allocator's
    high-water mark after the first step is flat."""
    import ktrace

    result = tb.run_rule(ktrace.open(real_trace_path("resnet50")), "GPUMemoryIncrease")
    assert not result.skipped and not result.fired
    assert result.details["series"][0]["rise_points"] == 0.0
