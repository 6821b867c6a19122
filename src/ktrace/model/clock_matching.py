"""Which collective on one rank is the same collective on another, when the trace carries no sequence numbers.

By order: the i-th collective of a kernel name on every rank is the same collective. When ranks ran different
numbers of one (a capture window that starts or ends inside a step on some ranks, say), counting from each rank's
first would pair every collective of such a rank with a neighbour, shifting its host's offset by one collective
spacing, which no outlier test can see. So for a kernel name whose counts differ, each rank's order is shifted
against the rank that ran it most often by the lag (within the count difference + 2, at most 16) whose end-time
differences spread least (median absolute deviation): the right lag leaves only the ranks' µs of jitter plus a
constant offset; a wrong one adds the ms-scale variation of the intervals between collectives.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

MAX_LAG = 16
MIN_OVERLAP = 3


def order_keys(collectives: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """(node, rank, key, end_ns), row for row in the order of `collectives`, with key "name#i" (i: the collective's place in the order, lag-corrected), and a
    caveat naming the kernels some ranks ran more often than others ("" when every rank ran each equally often).

    `collectives`: node, rank, name (Categorical or String), end_ns, each rank's rows in the order they ran.
    """
    frame = collectives.with_columns(
        pl.col("name").cast(pl.String), i=pl.int_range(pl.len()).over("node", "rank", "name")
    )
    ranks = frame.select("node", "rank").n_unique()
    counts = frame.group_by("node", "rank", "name").len()
    spread = (
        counts.group_by("name")
        .agg(lo=pl.when(pl.len() < ranks).then(0).otherwise(pl.col("len").min()), hi=pl.col("len").max())
        .filter(pl.col("lo") != pl.col("hi"))
        .sort("name")
    )
    caveat, lags = "", []
    for name, lo, hi in spread.iter_rows():
        lags.append(_lags(frame.filter(pl.col("name") == name), name))
        if not caveat:
            more = f" and {spread.height - 1} more" if spread.height > 1 else ""
            caveat = f"ranks ran different numbers of {str(name)[:60]} ({lo}-{hi}){more}"
    if lags:
        shifts = pl.concat(lags)
        worst = int(shifts["lag"].abs().max() or 0)  # type: ignore[arg-type]
        frame = frame.join(shifts, on=["node", "rank", "name"], how="left", maintain_order="left").with_columns(
            i=pl.col("i") - pl.col("lag").fill_null(0)
        )
        caveat += (
            f": matched by the shift of each rank's order that fits best (up to {worst}); "
            "a large residual means mismatched collectives"
        )
    key = pl.format("{}#{}", pl.col("name"), pl.col("i"))
    return frame.select("node", "rank", key.alias("key"), "end_ns"), caveat


def _lags(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """(node, rank, name, lag) for every rank running kernel `name`: rank's i-th pairs with the reference's (i - lag)."""
    per_rank = {
        (str(n), int(r)): part.sort("i")["end_ns"].to_numpy() for (n, r), part in frame.group_by("node", "rank")
    }
    reference = max(per_rank, key=lambda k: (per_rank[k].size, -k[1]))
    ref = per_rank[reference]
    rows = []
    for (node, rank), ends in per_rank.items():
        lag = 0 if (node, rank) == reference else _best_lag(ends, ref)
        rows.append((node, rank, name, lag))
    return pl.DataFrame(
        rows, schema={"node": pl.String, "rank": pl.Int64, "name": pl.String, "lag": pl.Int64}, orient="row"
    ).with_columns(pl.col("rank").cast(frame.schema["rank"]), pl.col("node").cast(frame.schema["node"]))


def _best_lag(ends: npt.NDArray[np.int64], ref: npt.NDArray[np.int64]) -> int:
    reach = min(MAX_LAG, abs(ref.size - ends.size) + 2)
    best, best_mad = 0, np.inf
    for lag in sorted(range(-reach, reach + 1), key=abs):
        # rank index j pairs with reference index j - lag
        j0, j1 = max(0, lag), min(ends.size, ref.size + lag)
        if j1 - j0 < min(MIN_OVERLAP, ends.size, ref.size):
            continue
        d = (ends[j0:j1] - ref[j0 - lag : j1 - lag]).astype(np.float64)
        d -= d[0]  # relative to one difference: epoch-scale offsets would cost float64 precision
        mad = float(np.median(np.abs(d - np.median(d))))
        if mad < best_mad:
            best, best_mad = lag, mad
    return best
