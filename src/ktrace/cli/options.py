"""Options shared by several verbs, defined once."""

from __future__ import annotations

import argparse
import os
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


WARM_UP_BYTES = 4 << 20
"""A trace file (or folder) this big is read while numba loads in the background (for verbs that analyse it):
its analyses will need numba, and reading it takes longer than loading numba."""


def open_trace(path: str, *, progress: bool = True, with_ops: bool = True, analyse: bool = False) -> Trace:
    """Open a trace for a CLI verb, with a progress bar while importing foreign formats; `with_ops=False`
    leaves its ops table empty (--no-ops); `analyse` says the verb runs analyses next (numba then loads while a
    big trace is read)."""
    from ktrace.cli.progress import progress_bar, show_kernel_compiles
    from ktrace.importers import load

    use_system_allocator_for_arrow()
    show_kernel_compiles()
    warm = analyse and _bytes_on_disk(Path(path)) >= WARM_UP_BYTES
    with progress_bar(f"reading {path}", enabled=None if progress else False) as bar:
        report = _warming_up_on_first_call(bar) if warm else bar
        return load(path, progress=report, **({} if with_ops else {"with_ops": False}))


def _warming_up_on_first_call(bar: ProgressFn) -> ProgressFn:
    """`bar`, which also starts numba's warm-up the first time the reader reports progress: by then the Kineto
    importer has forked its decode workers (a thread importing numba during a fork could leave a lock held in
    the worker), and it is waiting on them with cores to spare."""
    started = False

    def report(done: int, total: int) -> None:
        nonlocal started
        if not started:
            from ktrace.analysis.kernel_compiles import warm_up_in_background

            started = True
            warm_up_in_background()
        bar(done, total)

    return report


def _bytes_on_disk(path: Path) -> int:
    """A file's size, or the files' directly in a folder (a store's partitions are not counted: stores read fast)."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else 0
    except OSError:
        return 0  # the importer says what is wrong with it


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
