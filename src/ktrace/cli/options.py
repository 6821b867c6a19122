"""Options shared by several verbs, defined once."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktrace.model.errors import ProgressFn
    from ktrace.model.trace import Trace


def add_trace_argument(parser: argparse.ArgumentParser, name: str = "trace", *, optional_with: str = "") -> None:
    """The positional TRACE argument every reading verb takes (optional when `optional_with` names the
    option that makes it unneeded)."""
    help_text = "a .ktrace folder, a Kineto .json/.json.gz file or folder of per-rank files, or an nsys .sqlite export"
    if optional_with:
        parser.add_argument(
            name, metavar=name.upper(), nargs="?", help=f"{help_text} (not needed with {optional_with})"
        )
    else:
        parser.add_argument(name, metavar=name.upper(), help=help_text)


def add_json_flag(parser: argparse.ArgumentParser, what: str = "stable JSON instead of tables") -> None:
    """--json: machine-readable output on stdout."""
    parser.add_argument("--json", action="store_true", help=f"print {what}")


NO_OPS_HELP = (
    "ignore framework operators and Python frames: faster on big traces (Kineto skips decoding them, a .ktrace "
    "store skips its ops files), without the operator and module views"
)


def add_no_ops_flag(parser: argparse.ArgumentParser) -> None:
    """--no-ops on a reading verb: the trace's operators and Python frames are not read (see open_trace)."""
    parser.add_argument("--no-ops", action="store_true", help=NO_OPS_HELP)


def open_trace(path: str, *, progress: bool = True, with_ops: bool = True) -> Trace:
    """Open a trace for a CLI verb, with a progress bar while importing foreign formats; `with_ops=False`
    leaves its ops table empty (--no-ops). One big Kineto file is read through a temporary store
    (importers.kineto_spill), in bounded memory."""
    from ktrace.importers import load

    with reading(path, progress=progress) as bar:
        return load(path, progress=bar, **({} if with_ops else {"with_ops": False}))


@contextmanager
def reading(path: str, *, progress: bool = True) -> Iterator[ProgressFn]:
    """The progress bar (on stderr, on a terminal) of a verb reading the trace at `path`, Arrow's allocator chosen
    and numba's first compiles shown."""
    from ktrace.cli.progress import progress_bar, show_kernel_compiles

    use_system_allocator_for_arrow()
    show_kernel_compiles()
    with progress_bar(f"reading {path}", enabled=None if progress else False) as bar:
        yield bar


def use_system_allocator_for_arrow() -> None:
    """Let Arrow allocate with malloc rather than its default mimalloc pool, unless ARROW_DEFAULT_MEMORY_POOL chooses.

    The Kineto importer builds many short-lived Arrow columns (a slice of events at a time); mimalloc keeps their
    freed pages, so the peak RSS of `ktrace summary` on the tiled real traces was 40-60 MB higher with it
    (hta-a100-nccl-rank0of2 x10: 378 -> 333 MB, owlv2 x10: 429 -> 366 MB) at the same CPU time. A process-wide
    choice, so the command line makes it, not the importer.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def terminal_console() -> Any:
    """A rich Console for a verb's output; a closed pipe (`ktrace summary | head`) raises BrokenPipeError, which
    the command line turns into a quiet exit 0 (rich's own handler exits 1)."""
    from rich.console import Console

    class _PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _PipeConsole()


ALLOCATOR_SETTINGS = {
    "ARROW_DEFAULT_MEMORY_POOL": ("pyarrow", "system"),
    "_RJEM_MALLOC_CONF": ("polars", "dirty_decay_ms:50,muzzy_decay_ms:0"),
}
"""Environment set by `ktrace summary`, `report`, `check` and `export` (where the user has not set it) before
pyarrow and polars load, each variable with the library that reads it as it loads: allocators that hand freed pages
back to the operating system (`export` passes no trace: 50 ms even for one big rank, whose decay 0 cost the export
~50 % more CPU). open_trace's pa.set_memory_pool reaches only
the buffers Arrow's Python layer hands out; the readers' own scratch (Parquet pages, decompression) came from the
process default pool, mimalloc, which kept its freed pages. polars' jemalloc keeps freed pages 0.5-1 s (its own
default) while the next analysis allocates; here 50 ms. Peak RSS of the owlv2 x10 store's summary (1.32 M events):
450-455 -> ~402 MB; x30: 705-746 -> ~630 MB. Returning pages at once (decay 0) saved ~20 MB more at x10 and ~40 at
x30 but doubled the system CPU of the 256-rank DLRM store's one-process summary (4 -> 9 s: 13-15 s -> 17-21 s
wall, quiet); at 50 ms its wall time is the default's (13.2 s, 654 MB against 715 MB). The variables reach the
rank-by-rank workers too (they inherit the environment)."""


ONE_RANK_JEMALLOC = "dirty_decay_ms:0,muzzy_decay_ms:0"
"""polars' jemalloc for a big trace of one rank (a file, or a store of one partition, of ONE_RANK_BIG_BYTES or
more): freed pages go back at once. Measured on the owlv2 x10 store (1.32 M events, one rank), 4 pairs against
50 ms: peak 263-267 against 281-290 MiB (80-84 against 96-104 bytes an event, issue 29), ~0.05-0.1 s more system
CPU; the 50 ms of ALLOCATOR_SETTINGS stay for many ranks, where 0 doubled the system CPU (the 256-rank
one-process summary), and for small traces, where 0 bought no lower peak (owlv2 x1: 196-198 MB either way) for
0.05-0.06 s more system CPU (T1, issue 29)."""
ONE_RANK_BIG_BYTES = 4 << 20
"""A one-rank trace this big on disk (a gzip file's bytes; an uncompressed file's count an eighth; a store's
Parquet files) takes ONE_RANK_JEMALLOC: owlv2's 2.7 MB .json.gz (132 k events) is small, its x10 copy (27 MB; a
5.7 MB store) big."""


def use_returning_allocators(trace: str | None = None) -> None:
    """Set ALLOCATOR_SETTINGS where unset, for the libraries not loaded yet: a process that loaded them first (a
    notebook, a test calling the command line) keeps its allocators and its environment. `trace`: the verb's
    TRACE; one of one rank gets ONE_RANK_JEMALLOC."""
    for name, (library, value) in ALLOCATOR_SETTINGS.items():
        if library not in sys.modules:
            one_rank = name == "_RJEM_MALLOC_CONF" and trace is not None and _one_rank(Path(trace))
            os.environ.setdefault(name, ONE_RANK_JEMALLOC if one_rank else value)


def _one_rank(trace: Path) -> bool:
    """Whether `trace` is one big rank's (ONE_RANK_BIG_BYTES), told from names and sizes alone (polars is not loaded
    yet): a file, or a store with at most one node=/rank= partition; not a folder of per-rank files."""
    try:
        if trace.is_file():
            size = trace.stat().st_size
            with trace.open("rb") as f:
                gzipped = f.read(2) == b"\x1f\x8b"  # as the importers tell it (kineto_stream.is_gzip), not by name
            return (size if gzipped else size // 8) >= ONE_RANK_BIG_BYTES
        nodes = [e.path for e in os.scandir(trace) if e.name.startswith("node=") and e.is_dir()]
        if not (trace / "meta.json").is_file() or len(nodes) > 1:
            return False
        ranks = [e.path for n in nodes for e in os.scandir(n) if e.name.startswith("rank=") and e.is_dir()]
        return len(ranks) <= 1 and sum(f.stat().st_size for r in ranks for f in os.scandir(r)) >= ONE_RANK_BIG_BYTES
    except OSError:
        return False


SHORT_COMMAND_GC_THRESHOLDS = (700, 10, 1000)
"""The cyclic collector's thresholds in a command that reads, analyses and exits (Python's default: 700, 10, 10):
no full collection while it runs. Objects are freed by reference counting whatever these are; the thresholds only
say how often the collector looks for unreachable cycles, and a full collection walks every object the imports made
(polars, numpy, pyarrow and ktrace's modules: ~15-20 ms each, 1-2 in `ktrace summary` of a small trace, of a
0.6-1.7 s command, issue 29). The young and middle collections run as by default."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while a verb runs (SHORT_COMMAND_GC_THRESHOLDS); enter it before
    the heavy imports, which are most of the collector's work. The thresholds before are set back on the way out (a
    test or a notebook calling the command line keeps its own)."""
    before = gc.get_threshold()
    gc.set_threshold(*SHORT_COMMAND_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
