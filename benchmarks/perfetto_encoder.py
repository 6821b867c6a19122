"""Perfetto writer speed and size: the columnar numpy encoder against the naive one-TracePacket-per-event writer.

Both write the same bytes (interned names, small track uuids, absolute epoch ns; checked by sha256), so the ratio
is pure writer cost. Workload as perfetto.md §2: N slices on 16 tracks, 200 distinct names of 40-120 characters,
sorted by start; optionally 8 integer args per slice (kernel-like). Also times the whole `export_perfetto` on a
synthetic trace (track layout, nesting lanes, flows, interning, encoding).

    python benchmarks/perfetto_encoder.py                 # 1,000,000 slices
    python benchmarks/perfetto_encoder.py --slices 200000 --naive-slices 50000
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np
from google.protobuf.internal import api_implementation
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

from ktrace.exporters import perfetto_encoder as enc

SEQ = 1


def workload(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Columns of N slices: start/end epoch ns, track uuid 1-16, name iid 1-200, 8 int args."""
    rng = np.random.default_rng(seed)
    start = 1_700_000_000_000_000_000 + np.sort(rng.integers(0, 100 * 10**9, n))
    return {
        "start": start,
        "end": start + rng.integers(1_000, 1_000_000, n),
        "track": rng.integers(1, 17, n),
        "name": rng.integers(1, 201, n),
        "args": rng.integers(0, 70_000, (8, n)),
    }


def columnar(w: dict[str, np.ndarray], with_args: bool) -> bytes:
    """The encoder under test."""
    n = w["start"].shape[0]
    ann = [enc.int_annotation(k + 1, w["args"][k]) for k in range(8)] if with_args else []
    return enc.encode(enc.slice_rows(SEQ, w["start"], w["end"], w["track"], w["name"], ann), n)


def naive(w: dict[str, np.ndarray], with_args: bool, n: int) -> bytes:
    """The anchor: a fresh pb2 TracePacket per BEGIN and END event, serialized and framed one by one."""
    start, end, track, name = (w[k][:n].tolist() for k in ("start", "end", "track", "name"))
    args = w["args"][:, :n].T.tolist()
    out = []
    for i in range(n):
        p = TracePacket(timestamp=start[i], trusted_packet_sequence_id=SEQ, sequence_flags=2)
        te = p.track_event
        if with_args:
            for k, v in enumerate(args[i]):
                te.debug_annotations.add(name_iid=k + 1, int_value=v)
        te.type, te.name_iid, te.track_uuid = 1, name[i], track[i]
        body = p.SerializeToString()
        out.append(b"\x0a" + enc.varint_bytes(len(body)) + body)
        q = TracePacket(timestamp=end[i], trusted_packet_sequence_id=SEQ, sequence_flags=2)
        q.track_event.type, q.track_event.track_uuid = 2, track[i]
        body = q.SerializeToString()
        out.append(b"\x0a" + enc.varint_bytes(len(body)) + body)
    return b"".join(out)


def _best(fn, repeat: int) -> tuple[float, bytes]:  # type: ignore[no-untyped-def]
    best, out = float("inf"), b""
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def compare(w: dict[str, np.ndarray], n_naive: int, with_args: bool) -> None:
    """Print speed, size and the ratio of the two writers on one workload."""
    n = w["start"].shape[0]
    t_col, data = _best(lambda: columnar(w, with_args), 3)
    t_naive, ref = _best(lambda: naive(w, with_args, n_naive), 1)
    sub = {k: (v[:, :n_naive] if k == "args" else v[:n_naive]) for k, v in w.items()}
    same = hashlib.sha256(columnar(sub, with_args)).digest() == hashlib.sha256(ref).digest()
    col_rate, naive_rate = n / t_col, n_naive / t_naive
    gz = len(gzip.compress(data, 6))
    label = "8 int args" if with_args else "no args"
    print(
        f"{label:>10}: columnar {n:,} slices {t_col:.2f} s = {col_rate / 1e6:.2f} M slices/s, "
        f"{len(data) / n:.1f} B/slice ({gz / n:.1f} gzip-6) | naive {n_naive:,} slices {t_naive:.2f} s = "
        f"{naive_rate / 1e3:.0f} k slices/s | ratio {col_rate / naive_rate:.1f}x | identical bytes: {same}"
    )


def whole_export(steps: int, kernels_per_step: int) -> None:
    """End-to-end export_perfetto of a synthetic 2-rank trace."""
    from ktrace.exporters.perfetto import export_perfetto
    from ktrace.testing import SyntheticConfig, generate

    trace = generate(SyntheticConfig(steps=steps, kernels_per_step=kernels_per_step, ranks=2, seed=1))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        stats = export_perfetto(trace, Path(tmp) / "t.pftrace")
        dt = time.perf_counter() - t
    print(
        f"export_perfetto: {stats.slices:,} slices + {stats.counters:,} counter values + {stats.flows:,} flows "
        f"in {dt:.2f} s = {stats.slices / dt / 1e3:.0f} k slices/s, {stats.bytes / stats.slices:.1f} B/slice "
        f"(with args and flows)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slices", type=int, default=1_000_000)
    parser.add_argument("--naive-slices", type=int, default=200_000, help="slices for the (slow) naive writer")
    parser.add_argument("--export-steps", type=int, default=100, help="steps of the synthetic trace exported whole")
    args = parser.parse_args()
    print(f"protobuf backend: {api_implementation.Type()}")
    w = workload(args.slices)
    columnar(workload(1000), True)  # warm-up
    for with_args in (False, True):
        compare(w, min(args.naive_slices, args.slices), with_args)
    whole_export(args.export_steps, 2_000)


if __name__ == "__main__":
    main()
