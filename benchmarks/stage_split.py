"""Where the time of `ktrace summary FILE --json` goes, stage by stage, against this machine's floor (issue 29).

For each trace of issue 29's table (nccl, resnet50 and owlv2 from shared/traces, tiled --copies times in time by
benchmarks/tile_kineto.py; the table's CUDA-graph A100 trace is not in the collection: add it, or any Kineto file,
with --trace), in one run:

1. the whole command, `ktrace summary FILE --json`, before and after the split (the first run also fills a stale
   numba cache, so the second is the warm figure);
2. one fresh process that runs the command's stages one by one, in the command's order and with its arguments,
   each timed (wall and CPU), nothing overlapping:
   - start: the interpreter's start (from this script's spawn to the child's first line: perf_counter is
     CLOCK_MONOTONIC, one clock for every process); imports: what the command imports (ktrace's CLI, importer,
     analyses and presentation, with numpy, pyarrow, polars and msgspec); numba apart (the analyses load it above
     20,000 rows; each kernel's cache load is charged to the first section that runs it);
   - inflate: importers.kineto_stream.byte_blocks over the file (its gunzip thread), the text kept in memory;
   - decode: kineto_decode.EventSplitter's slices, decoded by msgspec, in one process; columns: each slice's Arrow
     columns (EventSink.add), in one process; then both again in the command's decode workers (kineto_workers,
     wall time) when the file is big enough for them;
   - table build: kineto.build_trace (tables, launch joins, dimension tables), then the secret scrub;
   - store write and read (model.store): what `ktrace import` then `ktrace summary X.ktrace` add, and what a file
     whose columns pass the spill size costs the command (it is read through a temporary store);
   - each analysis section of summarize(), in its order, on one TraceIndex (summarize runs three in threads;
     what the index shares is charged to the first section that asks);
   - render: the page and its JSON text. That JSON is checked against summarize()'s own, run after the split in
     the same process (a section list out of date with summarize() says so).
3. the floor: msgspec's decode rate on this machine (the same text, one process, a 7-field struct per event and
   nothing else) times the JSON bytes over the cores, plus the start and the imports.

Timings on a loaded machine mean little: the load average is printed before and after. The last lines, one per
trace: `stage_split: <trace> <N> events: command <s> s, stages <s> s = start <s> + imports <s> (+ numba <s>) +
inflate <s> + decode and columns <s> + build <s> + analyses <s> (largest ...) + render <s>; floor <s> (...)`.

examples:
  python benchmarks/stage_split.py
  python benchmarks/stage_split.py --only owlv2 --copies 10
  python benchmarks/stage_split.py --copies 1 --trace /data/cuda_graph_a100.json.gz
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

ISSUE_TRACES = {
    "nccl": "hta-a100-nccl-rank0of2",
    "resnet50": "kineto-resnet50-v100-pt1.9",
    "owlv2": "tracelens-h100-hf-inference",
    "cuda-graph A100": "",
}
"""Issue 29's table: short name -> folder in shared/traces ("" where the collection has no such trace)."""

COMMAND_STAGES = ("start", "imports", "inflate", "table build", "scrub", "render")
"""Stages every `summary FILE` run pays, besides decoding and the analyses (see command_seconds); numba's import
only where the analyses load it (above 20,000 rows), the store only where the file spills."""


@dataclass
class Split:
    """One trace's stages: (name, wall s, CPU s) in order, the analysis sections apart, and what was checked."""

    stages: list[tuple[str, float, float]] = field(default_factory=list)
    sections: list[tuple[str, float, float]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def wall(self, name: str, *, cpu: bool = False) -> float:
        """The wall seconds of stage `name` (its CPU seconds with `cpu`; 0.0 if it did not run)."""
        return next((c if cpu else w for n, w, c in self.stages if n == name), 0.0)


def issue_traces(folder: Path) -> tuple[list[tuple[str, Path, int]], list[str]]:
    """(short name, file, events) of issue 29's traces found in `folder` (a shared/traces), and the names missing."""
    found, missing = [], []
    for short, name in ISSUE_TRACES.items():
        stats_path = folder / name / "STATS.json" if name else None
        if stats_path is None or not stats_path.is_file():
            missing.append(short)
            continue
        stats = json.loads(stats_path.read_text())
        files = sorted(n for n, e in stats.items() if n.endswith((".json", ".json.gz")) and "n_kernels" in e)
        found += [(short, stats_path.parent / files[0], int(stats[files[0]]["n_events"]))] if files else []
    return found, missing


def decode_seconds(split: Split, *, cpu: bool = False) -> float:
    """Decode and columns as the command runs them: in its workers when it has them, else in one process."""
    workers = split.wall("decode + columns in workers", cpu=cpu)
    one = split.wall("decode (msgspec)", cpu=cpu) + split.wall("columns (EventSink.add)", cpu=cpu)
    return workers if "workers" in split.facts else one


def command_seconds(split: Split, *, cpu: bool = False) -> float:
    """The sum of the stages `ktrace summary FILE --json` runs (no store), each alone: the command overlaps some.
    Wall seconds, or CPU seconds with `cpu`."""
    spilled = ("store write", "store read") if split.facts.get("spills") else ()
    numba = ("import numba",) if split.facts.get("numba_used", True) else ()
    fixed = sum(split.wall(n, cpu=cpu) for n in (*COMMAND_STAGES, *numba, *spilled))
    return fixed + decode_seconds(split, cpu=cpu) + sum(c if cpu else w for _, w, c in split.sections)


def floor_seconds(start_s: float, imports_s: float, json_bytes: int, bytes_per_cpu_s: float, cores: int) -> float:
    """Issue 29's physical floor: the start and the imports, plus msgspec decoding the text spread over the cores."""
    return start_s + imports_s + json_bytes / (bytes_per_cpu_s * max(cores, 1))


def largest(sections: list[tuple[str, float, float]], n: int = 3) -> str:
    """The `n` longest analysis sections, as 'name s, ...'."""
    return ", ".join(f"{name} {w:.2f}" for name, w, _ in sorted(sections, key=lambda s: -s[1])[:n])


def summary_line(label: str, events: int, command_s: float, split: Split) -> str:
    """The one line of a trace at the end of the run."""
    floor = float(split.facts["floor_s"])
    analyses = sum(w for _, w, _ in split.sections)
    used = split.facts.get("numba_used", True)
    numba = f" + numba {split.wall('import numba'):.2f}" if used else " (numba not loaded)"
    return (
        f"stage_split: {label} {events:,} events: command {command_s:.2f} s, stages {command_seconds(split):.2f} s "
        f"({command_seconds(split, cpu=True):.1f} CPU s) = "
        f"start {split.wall('start'):.2f} + imports {split.wall('imports'):.2f}{numba} + inflate "
        f"{split.wall('inflate'):.2f} + decode and columns "
        f"{decode_seconds(split):.2f} + build {split.wall('table build') + split.wall('scrub'):.2f} + analyses "
        f"{analyses:.2f} ({largest(split.sections)}) + render {split.wall('render'):.2f}"
        f"{' + store write/read (spills)' if split.facts.get('spills') else ''}; floor {floor:.2f} s "
        f"(msgspec {split.facts['msgspec_mb_per_cpu_s']:.0f} MB/CPU s x {split.facts['cores']} cores): command "
        f"{command_s / floor:.1f}x floor"
    )


class Timer:
    """Times stages in this process: wall and CPU (this process's and its reaped children's, the decode workers)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), _cpu_s()
        yield
        self.rows.append((name, time.perf_counter() - wall, _cpu_s() - cpu))


def _cpu_s() -> float:
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def child(started: float, spawned: float, start_cpu: float, path: Path, workdir: Path) -> Split:
    """The split of one trace, run in a fresh process (started at `started`, spawned by the parent at `spawned`)."""
    split = Split(stages=[("start", started - spawned, start_cpu)])
    timed = Timer()
    with timed("imports"):
        import ktrace.cli.options
        import ktrace.cli.progress
        import ktrace.cli.summary
        import ktrace.importers.kineto
        import ktrace.presentation.summary_page  # noqa: F401 (the command's imports, timed)
        from ktrace.analysis.summary import summarize
    with timed("import numba"):
        import numba  # noqa: F401
    ktrace.cli.options.use_system_allocator_for_arrow()  # (as the command does)
    _import_stages(path, timed, split)
    trace = split.facts.pop("trace")
    _store_stages(trace, workdir, timed)
    from stage_split_sections import sections_timed, totals

    from ktrace.presentation.summary_page import summary_page

    sections = Timer()
    with timed("analyses"), sections_timed(sections):
        summary = summarize(trace)
    with timed("render"):
        json.dumps(dict(summary_page(summary, by_shape=False).document), indent=1, sort_keys=True)
    split.stages = [*split.stages, *(r for r in timed.rows if r[0] != "analyses")]
    wall, cpu = next((w, c) for n, w, c in timed.rows if n == "analyses")
    split.sections = totals(sections.rows)
    split.facts["numba_used"] = bool(getattr(sys.modules["ktrace.analysis._kernels"], "_numba_loaded", True))
    outside = (
        "summarize, outside its sections",
        wall - sum(r[1] for r in split.sections),
        cpu - sum(r[2] for r in split.sections),
    )
    split.sections.append(outside)
    return split


def _import_stages(path: Path, timed: Timer, split: Split) -> None:
    """Inflate, decode and columns (one process, then the workers), table build and scrub of `path`."""
    from ktrace.importers.kineto import FileRead, build_trace
    from ktrace.importers.kineto_combine import release_memory
    from ktrace.importers.kineto_decode import EventSplitter
    from ktrace.importers.kineto_decode_report import DecodeReport
    from ktrace.importers.kineto_events import EventSink
    from ktrace.importers.kineto_stream import StreamStatus, byte_blocks, is_gzip
    from ktrace.importers.kineto_workers import read_in_workers, start_workers, worker_count
    from ktrace.model.errors import no_progress
    from ktrace.model.scrub import scrub_trace

    status = StreamStatus()
    with timed("inflate"):
        blocks = list(byte_blocks(path, status, no_progress))
    split.facts["json_bytes"] = sum(map(len, blocks))
    report, sink = DecodeReport(), EventSink(with_ops=True)
    decode = Timer()
    slices = EventSplitter(report, with_ops=True).run(iter(blocks))
    while True:
        with decode("decode (msgspec)"):
            piece = next(slices, None)
        if piece is None:
            break
        with decode("columns (EventSink.add)"):
            sink.add(piece)  # type: ignore[arg-type]  # (a splitter that does not defer yields slices only)
    for name in ("decode (msgspec)", "columns (EventSink.add)"):
        rows = [r for r in decode.rows if r[0] == name]
        timed.rows.append((name, sum(r[1] for r in rows), sum(r[2] for r in rows)))
    split.facts["events"], split.facts["columns_mb"] = report.events, sink.table_bytes / 1e6
    workers = start_workers(count, True) if (count := worker_count(status.total_bytes, is_gzip(path))) else None
    if workers is not None:
        del sink
        release_memory()
        report, sink = DecodeReport(), EventSink(with_ops=True)
        splitter = EventSplitter(report, with_ops=True, defer=True)
        with timed("decode + columns in workers"):
            read_in_workers(splitter, splitter.run(iter(blocks)), sink, workers)
        split.facts["workers"] = count
    split.facts["msgspec_mb_per_cpu_s"] = _msgspec_rate(blocks) / 1e6
    del blocks
    with timed("table build"):
        trace, _ = build_trace(FileRead(path, report.header, sink, report, status, False))
        del sink
        release_memory()
    with timed("scrub"):
        split.facts["trace"] = scrub_trace(trace)
    split.facts["spills"] = _spills(split.facts["columns_mb"] * 1e6)


def _msgspec_rate(blocks: list[bytes]) -> float:
    """Bytes of this text msgspec decodes per CPU second into a 7-field struct per event (the decode floor)."""
    import msgspec

    fields = [("ph", str, ""), ("cat", str, ""), ("name", str, ""), ("pid", int | str, 0), ("tid", int | str, 0)]
    event = msgspec.defstruct("Event", [*fields, ("ts", float, 0.0), ("dur", float, 0.0)], gc=False)
    document = msgspec.defstruct("Document", [("traceEvents", list[event], msgspec.field(default_factory=list))])  # type: ignore[valid-type]
    text = b"".join(blocks)
    cpu = time.process_time()
    msgspec.json.decode(text, type=document)
    return len(text) / max(time.process_time() - cpu, 1e-9)


def _spills(columns_bytes: float) -> bool:
    """Whether the command reads this file through a temporary store (importers.kineto_spill, where it exists)."""
    try:
        from ktrace.importers.kineto_spill import spill_bytes  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    return bool(columns_bytes > spill_bytes())


def _store_stages(trace: Any, workdir: Path, timed: Timer) -> None:
    """model.store's write and read of `trace` (the store's own import charged to the write)."""
    from ktrace.importers.kineto_combine import release_memory

    with tempfile.TemporaryDirectory(prefix="stage-split-", dir=workdir) as tmp:
        with timed("store write"):
            from ktrace.model import store

            store.write(trace, Path(tmp) / "split.ktrace")
        with timed("store read"):
            read = store.read(Path(tmp) / "split.ktrace")
        del read
        release_memory()


def run_child(path: Path, workdir: Path) -> Split:
    """Run `child` on `path` in a fresh interpreter and return its split (start measured from the spawn)."""
    code = (
        "import time; t = time.perf_counter(); c = time.process_time(); import sys; "
        f"sys.path.insert(0, {str(HERE)!r}); import stage_split; stage_split.child_main(t, c)"
    )
    spawned = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(spawned), str(path), str(workdir)], capture_output=True, text=True
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SPLIT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"the split of {path.name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    data = json.loads(line[6:])
    return Split([tuple(s) for s in data["stages"]], [tuple(s) for s in data["sections"]], data["facts"])  # type: ignore[misc]


def child_main(started: float, start_cpu: float) -> None:
    """The child's entry: argv is (spawned, trace, workdir); prints one `SPLIT {json}` line."""
    spawned, path, workdir = float(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    split = child(started, spawned, start_cpu, path, workdir)
    cores = len(os.sched_getaffinity(0))
    start_s, imports_s = split.wall("start"), split.wall("imports")
    rate = float(split.facts["msgspec_mb_per_cpu_s"]) * 1e6
    split.facts.update(cores=cores, floor_s=floor_seconds(start_s, imports_s, split.facts["json_bytes"], rate, cores))
    print("SPLIT " + json.dumps({"stages": split.stages, "sections": split.sections, "facts": split.facts}))


def print_split(label: str, events: int, commands: list[float], split: Split) -> None:
    """The table of one trace's stages."""
    f = split.facts
    print(
        f"\n{label}: {events:,} events ({f['events']:,} decoded), {f['json_bytes'] / 1e6:.0f} MB of JSON, "
        f"{f['columns_mb']:.0f} MB of columns{' (the command spills them to a temporary store)' if f['spills'] else ''}"
        f"; decode workers: {f.get('workers', 'none')}; numba {'loaded' if f['numba_used'] else 'not loaded'} by the "
        "analyses"
    )
    print("| stage | wall s | CPU s |\n|---|---|---|")
    for name, wall, cpu in split.stages:
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |")
    for name, wall, cpu in split.sections:
        print(f"| analysis: {name} | {wall:.3f} | {cpu:.3f} |")
    analyses = sum(w for _, w, _ in split.sections)
    print(f"| analyses, all sections | {analyses:.3f} | {sum(c for _, _, c in split.sections):.3f} |")
    print(f"| the command's stages, summed | {command_seconds(split):.3f} | {command_seconds(split, cpu=True):.3f} |")
    print(f"| the command, whole (runs: {', '.join(f'{c:.2f}' for c in commands)}) | {min(commands):.3f} | |")
    print(f"| floor (msgspec {f['msgspec_mb_per_cpu_s']:.0f} MB/CPU s, {f['cores']} cores) | {f['floor_s']:.3f} | |")


def main(argv: list[str] | None = None) -> int:
    """Command line: tile the traces, time the command and its stages, print the tables and one line per trace."""
    from import_vs_hta import SHARED
    from speed_everywhere import ktrace_cmd, run_command
    from tile_kineto import tiled_copy

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=SHARED, help="folder of real traces (shared/traces)")
    parser.add_argument("--trace", type=Path, action="append", default=[], help="another Kineto file (repeatable)")
    parser.add_argument("--only", default="", help="only the traces whose short name contains this")
    parser.add_argument("--copies", type=int, default=10, help="how many times each trace is tiled in time")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ktrace-bench")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    found, missing = issue_traces(args.traces)
    found += [(p.name.split(".json")[0], p, 0) for p in args.trace]
    found = [t for t in found if args.only in t[0]]
    print(f"machine: {os.cpu_count()} cores, load {' '.join(f'{x:.1f}' for x in os.getloadavg())} before")
    if missing:
        print(f"not in {args.traces}: {', '.join(missing)} (add with --trace FILE)")
    lines = []
    for short, src, events in found:
        path = tiled_copy(src, args.copies, args.workdir)
        command = ktrace_cmd("summary", str(path), "--json")
        commands = [run_command(command).wall_s]
        split = run_child(path, args.workdir)
        commands.append(run_command(command).wall_s)
        n = events * args.copies or int(split.facts["events"])
        label = f"{short} x{args.copies}"
        print_split(label, n, commands, split)
        lines.append(summary_line(label, n, min(commands), split))
    print(f"\nmachine load after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
