"""Where the memory of `ktrace summary STORE --json` goes, stage by stage, and what stays fixed (issue 29).

issue 29 counts bytes/event as the summary's peak RSS above a baseline process that only imports what the summary
imports (benchmarks/big_trace.py's SUMMARY_IMPORTS). This script runs the summary's stages one by one in one fresh
process, with the command's allocator settings (cli.options.use_returning_allocators), and samples its resident
memory every 5 ms (/proc/self/status: anonymous pages apart from file-backed ones, the libraries' code pages that
running them faults in; tracemalloc sees neither Arrow's, polars' nor numba's):

1. imports: the baseline's imports but numba's (the summary imports numba only where a kernel compiles, past
   analysis._kernels.NUMPY_MAX_ROWS rows: then in the stage that needs it), then the store read
   (cli.options.open_trace, as the command);
2. each section of summarize(), in its order (stage_split_sections.sections_timed: one at a time, where the command
   runs three in threads, so the command's peak is higher than any stage's here), then the JSON render;
3. what stays once the summary, the index and the trace are dropped (malloc_trim after each): the fixed part,
   with the code pages of the libraries it grew (/proc/self/smaps: llvmlite, polars, Arrow) and numba's kernels
   loaded from its cache.

Each stage row: RSS before, held (after - before), peak above before, and the held anonymous and file pages. The
last line reads `memory_split: <store> <N> rows: baseline <MB>, peak <MB> (one stage at a time), held after the
summary: trace <MB>, index and summary <MB>, fixed <MB> = file pages <MB> (...) + anonymous <MB>; numba imported or not, kernels loaded: <k>`.

examples:
  python benchmarks/memory_split.py /tmp/ktrace-big/owlv2_x10.ktrace
  KTRACE_PYTHON_KERNEL_ROWS=1000000000 python benchmarks/memory_split.py small.ktrace   # numba never loaded
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CODE_FILES = ("libllvmlite", "_polars_runtime", "libarrow", "libparquet")
"""Shared libraries whose resident code pages are reported by name (file names starting so)."""


def status_mb() -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of this process, in MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def code_pages_mb() -> dict[str, float]:
    """Resident pages of the CODE_FILES mappings (all of each library's mappings), in MiB."""
    out = dict.fromkeys(CODE_FILES, 0.0)
    current = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                name = Path(head[5]).name if len(head) > 5 else ""
                current = next((c for c in CODE_FILES if name.startswith(c)), None)
            elif current is not None and line.startswith("Rss:"):
                out[current] += int(head[1]) / 1024
    return out


@dataclass
class Stages:
    """RSS rows of stages run one after the other, with a sampler thread keeping each stage's peak."""

    rows: list[tuple[str, float, float, float, float, float]] = field(default_factory=list)
    _peak: float = 0.0

    def start_sampler(self) -> None:
        """Sample VmRSS every 5 ms for the rest of the process."""

        def sample() -> None:
            while True:
                self._peak = max(self._peak, status_mb()["VmRSS"])
                time.sleep(0.005)

        threading.Thread(target=sample, daemon=True).start()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        before = status_mb()
        self._peak = before["VmRSS"]
        yield
        after = status_mb()
        peak = max(self._peak, after["VmRSS"])
        self.rows.append(
            (
                name,
                before["VmRSS"],
                after["VmRSS"] - before["VmRSS"],
                peak - before["VmRSS"],
                after["RssAnon"] - before["RssAnon"],
                after["RssFile"] - before["RssFile"],
            )
        )


def child(store: str) -> dict[str, object]:
    """The split of one store's summary, in this (fresh) process."""
    from ktrace.cli.options import use_returning_allocators

    use_returning_allocators()  # before pyarrow and polars load, as the command
    stages = Stages()
    stages.start_sampler()
    with stages("imports (the baseline's but numba)"):
        import msgspec  # noqa: F401
        import numpy  # noqa: F401
        import polars  # noqa: F401
        import pyarrow  # noqa: F401

        import ktrace.analysis.summary
        import ktrace.cli.summary
        import ktrace.model.store
        import ktrace.presentation.summary_page  # noqa: F401
    baseline, code_before = status_mb(), code_pages_mb()
    from stage_split_sections import sections_timed

    from ktrace.analysis import _kernels
    from ktrace.analysis.index import TraceIndex
    from ktrace.analysis.summary import summarize
    from ktrace.cli.options import open_trace
    from ktrace.model.heap import release_free_memory
    from ktrace.presentation.summary_page import summary_page

    with stages("store read (open_trace)"):
        trace = open_trace(store, with_ops=True, progress=False)
    index = TraceIndex(trace)
    with sections_timed(stages), stages("summarize, all sections"):
        summary = summarize(trace, index=index)
    with stages("render (JSON)"):
        json.dumps(dict(summary_page(summary, by_shape=False).document), indent=1, sort_keys=True)
    peak = max(r[1] + r[3] for r in stages.rows)

    def dropped() -> float:
        gc.collect()
        release_free_memory()
        time.sleep(0.05)
        return status_mb()["VmRSS"]

    rows = sum(trace.table(name).height for name in ("kernels", "memory", "api", "ranges", "ops", "allocations"))
    held = dropped()
    del summary, index
    without_results = dropped()
    del trace
    fixed = dropped()
    code = {k: v - code_before[k] for k, v in code_pages_mb().items()}
    end = status_mb()
    kernels = sum(
        1
        for module in list(sys.modules)
        if module.startswith("ktrace.analysis._kernels.")
        for value in vars(sys.modules[module]).values()
        if isinstance(value, _kernels.Kernel) and value._compiled is not None
    )
    return {
        "rows": rows,
        "stages": stages.rows,
        "baseline": baseline["VmRSS"],
        "peak": peak,
        "held": held,
        "results": held - without_results,
        "trace": without_results - fixed,
        "fixed": fixed - baseline["VmRSS"],
        "fixed_anon": end["RssAnon"] - baseline["RssAnon"],
        "fixed_file": end["RssFile"] - baseline["RssFile"],
        "code": code,
        "kernels": kernels,
        "numba": "numba" in sys.modules,
    }


def report(store: str, d: dict[str, object]) -> str:
    """Print the table of one run and return its last line."""
    print("| stage | RSS before MB | held MB | peak above before MB | held anon MB | held file MB |")
    print("|---|---|---|---|---|---|")
    for name, before, held, peak, anon, file in d["stages"]:  # type: ignore[attr-defined]
        if abs(held) >= 0.5 or peak >= 0.5:
            print(f"| {name} | {before:.0f} | {held:+.0f} | {peak:+.0f} | {anon:+.0f} | {file:+.0f} |")
    code = ", ".join(f"{k} {v:.0f}" for k, v in d["code"].items())  # type: ignore[attr-defined]
    return (
        f"memory_split: {Path(store).name} {d['rows']:,} rows: baseline {d['baseline']:.0f} MB, peak {d['peak']:.0f} MB "
        f"(one stage at a time), held after the summary {d['held']:.0f} MB: trace {d['trace']:.0f} MB, index and "
        f"summary {d['results']:.0f} MB, fixed {d['fixed']:.0f} MB = file pages {d['fixed_file']:.0f} MB ({code}) + "
        f"anonymous {d['fixed_anon']:.0f} MB; numba {'imported' if d['numba'] else 'not imported'}, kernels loaded: "
        f"{d['kernels']}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: one fresh process per store."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stores", nargs="+", help=".ktrace stores (or trace files) to summarize")
    args = parser.parse_args(argv)
    lines = []
    for store in args.stores:
        code = f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import memory_split as m; print('SPLIT ' + json.dumps(m.child(sys.argv[1])))"
        proc = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("SPLIT ")), None)
        if proc.returncode != 0 or line is None:
            print(f"{store}: the split failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            return 1
        print(f"\n{store}:")
        lines.append(report(store, json.loads(line[6:])))
    print()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
