"""Extract the unique GPU kernel names of the real traces in shared/traces, with provenance, as CSV.

Used once to build the precision-classifier corpus (tests/unit/analysis/data/kernel_names.csv): the
expected precision class of every name is then filled in by a person reading the name, never by the
classifier under test.

Kineto JSON (.json / .json.gz): events with cat "kernel" (json module). nsys SQLite: the demangled
names of CUPTI_ACTIVITY_KIND_KERNEL through StringIds.

usage:
  python benchmarks/extract_kernel_names.py [SHARED_TRACES_DIR] > names.csv
"""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path


def kineto_names(path: Path) -> Counter[str]:
    """Kernel name -> count in one Kineto trace file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return Counter(e["name"] for e in events if isinstance(e, dict) and e.get("cat") in ("kernel", "Kernel"))


def nsys_names(path: Path) -> Counter[str]:
    """Kernel (demangled) name -> count in one nsys SQLite export."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
        ).fetchall()
    finally:
        con.close()
    return Counter({str(name): int(n) for name, n in rows})


def main(argv: list[str]) -> int:
    """Write trace_dir,file,count,name rows for every unique kernel name (first occurrence wins)."""
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "traces"
    seen: set[str] = set()
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["trace", "file", "count", "name"])
    for path in sorted(root.rglob("*")):
        if path.name.endswith((".json", ".json.gz")) and path.name != "STATS.json":
            names = kineto_names(path)
        elif path.suffix == ".sqlite":
            names = nsys_names(path)
        else:
            continue
        for name, count in sorted(names.items()):
            if name not in seen:
                seen.add(name)
                out.writerow([path.parent.name, path.name, count, name])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
