"""Per-host clock offsets from events that must coincide across ranks: the ends of the same NCCL collective.

An NCCL collective kernel ends on every rank of its group at (nearly) the same true time: the last rank to
arrive releases all of them. So for each host, the differences between its ranks' collective ends and the
reference host's are its clock offset plus noise. The estimate is robust: each host's end of a collective is the
median over its ranks, its offset the median over collectives, outliers (beyond 5 scaled MADs, at least 5 µs)
are rejected, and a drift is fitted (Theil-Sen) only where it halves the host's p99 residual and the matched
collectives span at least a second. What remains is reported as the residual (p50/p99 of each rank's distance
from a collective's median end, once aligned).

Collectives are matched by (process group, sequence number) when every rank's table carries them, else by
their order among the collectives of the same kernel name on each rank. Without collectives on 2+ hosts, the
tracer's clock pairs (CUPTI vs CLOCK_REALTIME, start and end of capture) put each host's GPU clock on its own
CLOCK_REALTIME, which aligns hosts as far as NTP/PTP keeps those agreeing. One host is never shifted.

`estimate_offsets` takes small per-rank inputs (`rank_clock_input`), so a streaming import can keep them for
every rank and estimate once all are written. It lives in the model, not in analysis, because the importers (a
sibling room of analysis) run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from ktrace.model.alignment import with_clock
from ktrace.model.clock import ClockAlignment, ClockPair, HostClock
from ktrace.model.clock_matching import order_keys
from ktrace.model.trace import Trace

COLLECTIVE_COLUMNS = {"name": pl.Categorical, "group": pl.Categorical, "seq": pl.Int64, "end_ns": pl.Int64}
"""Columns of a rank's collective table (`RankClockInput.collectives`): kernel name, process group and sequence
number (null where the trace does not carry them) and the kernel's end on that rank's clock. Names are
Categorical: a row costs ~17 bytes, ~5 KB for a rank's 300 collectives."""


@dataclass(frozen=True)
class RankClockInput:
    """What the estimator needs of one rank: small, so a streaming import can keep it for every rank."""

    node: str
    rank: int
    collectives: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COLLECTIVE_COLUMNS))
    """One row per NCCL collective kernel, in the order they ran (COLLECTIVE_COLUMNS)."""
    clock_pairs: tuple[ClockPair, ...] = ()
    """The tracer's clock pairs (start and end of capture), if any."""


MIN_MATCHED = 2
"""Collectives a host must share with the reference host to get an offset (one cannot reject an outlier)."""
OUTLIER_MADS = 5.0
OUTLIER_FLOOR_NS = 5_000
DRIFT_MIN_SPAN_NS = 1_000_000_000
_NCCL_NAME = r"^nccl(Dev)?Kernel_"
_F64 = npt.NDArray[np.float64]


def rank_clock_input(
    node: str, rank: int, kernels: pl.DataFrame | pa.Table, clock_pairs: Sequence[ClockPair] = ()
) -> RankClockInput:
    """The estimator's input for one rank from its kernels (a polars frame or an Arrow table of schema v1's kernel
    columns, at least name and start_ns/end_ns; rows of other ranks, if node and rank are there, are ignored)."""
    k = kernels if isinstance(kernels, pl.DataFrame) else pl.DataFrame(pl.from_arrow(kernels))
    if "node" in k.columns and "rank" in k.columns:
        k = k.filter((pl.col("node").cast(pl.String) == node) & (pl.col("rank") == rank))
    return RankClockInput(node=node, rank=rank, collectives=_collectives(k), clock_pairs=tuple(clock_pairs))


def _collectives(kernels: pl.DataFrame) -> pl.DataFrame:
    name = pl.col("name").cast(pl.String)
    is_comm = name.str.contains(_NCCL_NAME)
    if "collective" in kernels.columns:
        is_comm = is_comm | pl.col("collective").is_not_null()
    return (
        kernels.filter(is_comm)
        .sort("start_ns", maintain_order=True)
        .select(
            name.cast(pl.Categorical).alias("name"),
            pl.lit(None, pl.Categorical).alias("group"),
            pl.lit(None, pl.Int64).alias("seq"),
            pl.col("end_ns").cast(pl.Int64),
        )
    )


def rank_clock_inputs(trace: Trace) -> list[RankClockInput]:
    """`rank_clock_input` for every rank of `trace` that ran a kernel or has clock pairs (meta.capture)."""
    comm = trace.kernels.filter(
        pl.col("name").cast(pl.String).str.contains(_NCCL_NAME) | pl.col("collective").is_not_null()
    )
    pairs = clock_pairs_of(trace.meta.capture)
    ranks = {(str(n), int(r)) for n, r in trace.kernels.select("node", "rank").unique().iter_rows()} | set(pairs)
    parts = {
        (str(n), int(r)): p for (n, r), p in comm.with_columns(pl.col("node").cast(pl.String)).group_by("node", "rank")
    }
    empty = comm.clear()
    return [
        RankClockInput(n, r, _collectives(parts.get((n, r), empty)), pairs.get((n, r), ())) for n, r in sorted(ranks)
    ]


def clock_pairs_of(capture: Mapping[str, Any]) -> dict[tuple[str, int], tuple[ClockPair, ...]]:
    """(node, rank) -> the tracer's clock pairs, from meta.capture["clock_pairs"] ({"node/rank": [pair, ...]});
    malformed entries are skipped."""
    out: dict[tuple[str, int], tuple[ClockPair, ...]] = {}
    raw = capture.get("clock_pairs")
    if not isinstance(raw, Mapping):
        return out
    for where, pairs in raw.items():
        node, _, rank = str(where).rpartition("/")
        try:
            out[(node, int(rank))] = tuple(ClockPair.from_dict(p) for p in pairs)
        except (ValueError, TypeError, AttributeError):
            continue
    return out


def align_trace(trace: Trace) -> ClockAlignment:
    """The clock alignment of `trace` from its collectives (`estimate_offsets` over `rank_clock_inputs`)."""
    return estimate_offsets(rank_clock_inputs(trace))


def estimate_offsets(per_rank_inputs: Iterable[RankClockInput]) -> ClockAlignment:
    """Per-host clock offsets (and drift where it helps) from per-rank collective ends or clock pairs.

    Never raises on odd input: an alignment that is impossible comes back as method "none" with a note saying
    why, and one host as method "single_host" (offsets 0, never shifted) with the residual among its ranks.

    A streaming import builds one input per rank as it decodes it (`rank_clock_input(node, rank, kernels)`), writes
    the partitions as recorded, and stores the result as `TraceMeta.clock_alignment` (applied False: `store.read`
    then aligns). For a whole Trace in memory, `align_hosts` estimates and applies in one call.
    """
    inputs = list(per_rank_inputs)
    hosts = sorted({i.node for i in inputs})
    if not inputs:
        return ClockAlignment(method="none", note="no ranks: nothing to align")
    reference = min(inputs, key=lambda i: (i.rank, i.node)).node
    ends, method, caveat = _matched_ends(inputs)
    if len(hosts) == 1:
        residual = _residuals(ends, {})
        p50, p99 = residual.get("", (None, None))
        return ClockAlignment(
            method="single_host",
            reference_host=reference,
            hosts=(_with_residual(HostClock(reference, matched=ends["key"].n_unique()), residual),),
            collectives=ends["key"].n_unique(),
            residual_p50_ns=p50,
            residual_p99_ns=p99,
            note="; ".join(filter(None, ["one host: timestamps as recorded (never shifted)", caveat])),
        )
    base = int(ends["end_ns"].min() or 0)  # type: ignore[arg-type]  # medians are float64: 256 ns steps at epoch ns
    host_ends = ends.group_by("node", "key").agg(
        ((pl.col("end_ns") - base).median().round().cast(pl.Int64) + base).alias("end")
    )
    clocks: dict[str, HostClock] = {reference: HostClock(reference, matched=_count(host_ends, reference))}
    missing = []
    for host in hosts:
        if host != reference:
            fitted = _fit_host(host_ends, host, reference)
            if fitted is None:
                missing.append(host)
            else:
                clocks[host] = fitted
    if missing:
        pairs = _from_clock_pairs(inputs, hosts, reference)
        if pairs is not None:
            return pairs
        why = "no NCCL collectives" if ends.is_empty() else f"fewer than {MIN_MATCHED} collectives matched"
        return ClockAlignment(
            method="none",
            reference_host=reference,
            collectives=ends["key"].n_unique(),
            note=f"clock alignment impossible ({why} for {', '.join(missing[:5])}"
            + (" ..." if len(missing) > 5 else "")
            + "): timestamps left as each host recorded them",
        )
    residual = _residuals(ends, clocks)
    p50, p99 = residual.get("", (None, None))
    return ClockAlignment(
        method=method,
        reference_host=reference,
        hosts=tuple(_with_residual(clocks[h], residual) for h in hosts),
        collectives=host_ends.filter(pl.col("key").is_in(_shared_keys(host_ends).implode())).n_unique("key"),
        residual_p50_ns=p50,
        residual_p99_ns=p99,
        note=caveat,
    )


def _matched_ends(inputs: list[RankClockInput]) -> tuple[pl.DataFrame, str, str]:
    """(node, rank, key, end_ns) of every collective, keyed by group/sequence when all carry it, else order; the
    method; a caveat when matching by order met ranks with different numbers of a collective (clock_matching)."""
    present = [i for i in inputs if i.collectives.height]
    if not present:
        empty = pl.DataFrame(schema={"node": pl.String, "rank": pl.Int64, "key": pl.String, "end_ns": pl.Int64})
        return empty, "none", ""
    # one concatenation, cast and pair of columns for all ranks (three frame operations a rank took 0.07 s at 256)
    columns = list(COLLECTIVE_COLUMNS)
    frames = [i.collectives if i.collectives.columns == columns else i.collectives.select(columns) for i in present]
    allc = pl.concat(frames, how="vertical_relaxed").cast(COLLECTIVE_COLUMNS)  # type: ignore[arg-type]
    of_row = np.repeat(np.arange(len(present)), [i.collectives.height for i in present])  # each row's input
    allc = allc.with_columns(
        node=pl.Series([i.node for i in present], dtype=pl.String).gather(of_row),
        rank=pl.Series([i.rank for i in present], dtype=pl.Int64).gather(of_row),
    )
    if allc["seq"].null_count() == 0:
        key = pl.format("{}#{}", pl.col("group").cast(pl.String).fill_null(""), pl.col("seq"))
        return allc.select("node", "rank", key.alias("key"), "end_ns"), "collectives:sequence", ""
    ends, caveat = order_keys(allc)
    return ends, "collectives:order", caveat


def _count(host_ends: pl.DataFrame, host: str) -> int:
    return host_ends.filter(pl.col("node") == host).height


def _shared_keys(host_ends: pl.DataFrame) -> pl.Series:
    counts = host_ends.group_by("key").len()
    return counts.filter(pl.col("len") >= 2)["key"]


def _fit_host(host_ends: pl.DataFrame, host: str, reference: str) -> HostClock | None:
    """Offset (and drift) of `host` against `reference` from their matched collective ends; None if too few."""
    pairs = (
        host_ends.filter(pl.col("node") == host)
        .join(host_ends.filter(pl.col("node") == reference), on="key", suffix="_ref")
        .sort("end")
    )
    if pairs.height < MIN_MATCHED:
        return None
    ends = pairs["end"].to_numpy()
    anchor = int(np.median(ends))
    t = (ends - anchor).astype(np.float64)  # relative: float64 holds epoch ns only to 256 ns
    d = (pairs["end"] - pairs["end_ref"]).to_numpy().astype(np.float64)
    keep = _inliers(d - np.median(d))
    offset, drift = float(np.median(d[keep])), 0.0
    if t[keep].size >= 3 and np.ptp(t[keep]) >= DRIFT_MIN_SPAN_NS:
        slope = _theil_sen(t[keep], d[keep])
        with_drift = d - slope * t
        keep_d = _inliers(with_drift - np.median(with_drift))
        flat_p99 = np.percentile(np.abs(d[keep] - offset), 99)
        line_p99 = np.percentile(np.abs(with_drift[keep_d] - np.median(with_drift[keep_d])), 99)
        if line_p99 <= 0.5 * flat_p99:
            keep, drift, offset = keep_d, slope * 1e6, float(np.median(with_drift[keep_d]))
    return HostClock(
        host=host,
        offset_ns=int(round(offset)),
        drift_ppm=drift,
        anchor_ns=anchor if drift else 0,
        matched=int(pairs.height),
        rejected=int((~keep).sum()),
    )


def _inliers(dev: _F64) -> npt.NDArray[np.bool_]:
    mad = float(np.median(np.abs(dev)))
    return np.asarray(np.abs(dev) <= max(OUTLIER_MADS * 1.4826 * mad, OUTLIER_FLOOR_NS))


def _theil_sen(x: _F64, y: _F64, max_points: int = 400) -> float:
    """Median of pairwise slopes (on at most max_points evenly spaced points)."""
    if x.size > max_points:
        pick = np.linspace(0, x.size - 1, max_points).astype(np.int64)
        x, y = x[pick], y[pick]
    i, j = np.triu_indices(x.size, 1)
    dx = x[j] - x[i]
    ok = dx != 0
    return float(np.median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else 0.0


def _residuals(ends: pl.DataFrame, clocks: dict[str, HostClock]) -> dict[str, tuple[int, int]]:
    """p50/p99 of |aligned end - median over ranks| per host, and over all ("") for collectives on 2+ ranks."""
    if ends.is_empty():
        return {}
    correction: pl.Expr = pl.lit(0.0)
    for c in clocks.values():
        term = c.offset_ns + (pl.col("end_ns") - c.anchor_ns).cast(pl.Float64) * (c.drift_ppm * 1e-6)
        correction = pl.when(pl.col("node") == c.host).then(term).otherwise(correction)
    base = int(ends["end_ns"].min())  # type: ignore[arg-type]
    aligned = ends.with_columns(t=(pl.col("end_ns") - base).cast(pl.Float64) - correction)
    dev = aligned.filter(pl.len().over("key") >= 2).with_columns(
        dev=(pl.col("t") - pl.col("t").median().over("key")).abs()
    )
    if dev.is_empty():
        return {}

    def quantiles(frame: pl.DataFrame) -> tuple[int, int]:
        v = frame["dev"].to_numpy()
        return int(round(np.percentile(v, 50))), int(round(np.percentile(v, 99)))

    out = {"": quantiles(dev)}
    for (host,), part in dev.group_by("node"):
        out[str(host)] = quantiles(part)
    return out


def _with_residual(clock: HostClock, residual: dict[str, tuple[int, int]]) -> HostClock:
    if clock.host not in residual:
        return clock
    p50, p99 = residual[clock.host]
    return dataclasses.replace(clock, residual_p50_ns=p50, residual_p99_ns=p99)


def _from_clock_pairs(inputs: list[RankClockInput], hosts: list[str], reference: str) -> ClockAlignment | None:
    """Each host's GPU clock against its CLOCK_REALTIME, from its ranks' clock pairs; None unless every host has
    pairs. Offset: median of (gpu - realtime) at capture start; drift from start to end where both exist."""
    per_host: dict[str, list[tuple[ClockPair, ...]]] = {h: [] for h in hosts}
    for i in inputs:
        if i.clock_pairs:
            per_host[i.node].append(i.clock_pairs)
    if any(not v for v in per_host.values()):
        return None
    fitted: dict[str, tuple[float, float, float, int]] = {}
    for host, rank_pairs in per_host.items():
        first = [p[0] for p in rank_pairs]
        offsets = np.array([p.gpu_ns - p.realtime_ns for p in first], np.float64)
        slopes = [
            ((p[-1].gpu_ns - p[-1].realtime_ns) - (p[0].gpu_ns - p[0].realtime_ns)) / (p[-1].gpu_ns - p[0].gpu_ns)
            for p in rank_pairs
            if len(p) >= 2 and p[-1].gpu_ns != p[0].gpu_ns
        ]
        anchor = float(np.median([p.gpu_ns for p in first]))
        fitted[host] = (float(np.median(offsets)), float(np.median(slopes)) if slopes else 0.0, anchor, len(first))
    ref_offset, ref_slope, _, _ = fitted[reference]
    clocks = tuple(
        HostClock(
            host=h,
            offset_ns=int(round(off - ref_offset)),
            drift_ppm=(slope - ref_slope) * 1e6,
            anchor_ns=int(round(anchor)) if slope != ref_slope else 0,
            matched=n,
        )
        for h, (off, slope, anchor, n) in fitted.items()
    )
    return ClockAlignment(
        method="clock_pairs",
        reference_host=reference,
        hosts=clocks,
        note="from ktrace run's clock pairs: hosts agree as far as their CLOCK_REALTIME (NTP/PTP) does",
    )


def align_hosts(trace: Trace) -> Trace:
    """A trace from 2+ hosts with its estimated clock alignment in meta and applied to its timestamps (when the
    alignment was possible; its note says why not otherwise). One host: returned as it is."""
    hosts = {n for n, _ in trace.ranks} | set(trace.meta.hosts)
    if len(hosts) < 2:
        return trace
    alignment = align_trace(trace)
    meta = dataclasses.replace(trace.meta, clock_alignment=dataclasses.replace(alignment, applied=False))
    return with_clock(trace.with_meta(meta), "aligned")
