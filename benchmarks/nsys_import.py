"""nsys import benchmark: ktrace's importer against a naive sqlite3 reader measured in the same run.

For each real export in ../shared/traces (and a replicated copy of the T4 one, --copies times its
kernel/API/NVTX/memcpy rows, to see the per-row cost), prints the best of --repeat wall times of
`import_nsys` and of the anchor: stdlib sqlite3 `fetchall()` of the same tables with names resolved by
SQL joins on StringIds (what a hand-written script does, with no Arrow/polars tables built), and the ratio.

    python benchmarks/nsys_import.py [--copies 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
ANCHOR_QUERIES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, s.value, k.gridX, "
    "k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL k "
    "LEFT JOIN StringIds s ON s.id = k.demangledName",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "SELECT r.start, r.end, r.globalTid, r.correlationId, s.value FROM "
    "CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "SELECT start, end, deviceId, streamId, correlationId, bytes, copyKind, srcKind, "
    "dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "SELECT start, end, deviceId, streamId, correlationId, syncType "
    "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS": "SELECT n.start, n.end, n.eventType, n.globalTid, coalesce(n.text, s.value), n.domainId "
    "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId",
}


def anchor(path: Path) -> int:
    """The naive reader: one fetchall per table, names joined in SQL; returns rows read."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = sum(len(con.execute(q).fetchall()) for t, q in ANCHOR_QUERIES.items() if t in tables)
    con.close()
    return n


def ktrace_import(path: Path) -> int:
    from ktrace.importers.nsys import import_nsys

    counts = import_nsys(path).counts()
    return counts["kernels"] + counts["api"] + counts["memory"] + counts["syncs"] + counts["ranges"]


def best(fn: Callable[[Path], int], path: Path, repeat: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = fn(path)
        times.append(time.perf_counter() - t0)
    return min(times), rows


def replicate(src: Path, dst: Path, copies: int) -> Path:
    """A copy of `src` whose event rows are repeated `copies` times (times shifted so they do not overlap)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode = OFF")
    for table in ANCHOR_QUERIES:
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
        ((span, n),) = con.execute(f'SELECT max(end) - min(start) + 1, max(rowid) FROM "{table}"').fetchall()
        for k in range(1, copies):
            shifted = ", ".join(f'"{c}" + {k * span}' if c in ("start", "end") else f'"{c}"' for c in cols)
            con.execute(f'INSERT INTO "{table}" SELECT {shifted} FROM "{table}" WHERE rowid <= {n}')
    con.commit()
    con.close()
    return dst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    paths = sorted(TRACES.glob("nsys-*/*.sqlite"))
    tmp = Path(tempfile.mkdtemp())
    t4 = next(p for p in paths if "power_iteration" in p.name)
    paths.append(replicate(t4, tmp / f"power_iteration_x{args.copies}.sqlite", args.copies))
    ktrace_import(paths[0])  # warm imports (polars, pyarrow) outside the timings
    print(f"{'trace':44} {'MB':>6} {'rows':>9} {'ktrace s':>9} {'anchor s':>9} {'ratio':>6} {'k rows/s':>9}")
    for path in paths:
        t_k, rows = best(ktrace_import, path, args.repeat)
        t_a, _ = best(anchor, path, args.repeat)
        print(
            f"{path.name[:44]:44} {path.stat().st_size / 1e6:6.1f} {rows:9,} {t_k:9.3f} {t_a:9.3f} "
            f"{t_k / t_a:6.2f} {rows / t_k / 1e3:9.0f}"
        )
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
