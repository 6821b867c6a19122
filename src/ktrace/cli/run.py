"""Record a command: GPU kernels, launches, memory ops, syncs and NVTX ranges (CUPTI), CPU/GPU counters.

Every Python process of the command that imports a CUDA library (torch, cupy, jax, ...) starts the
tracer before CUDA initializes and writes its own partition (rank from RANK/LOCAL_RANK, else its pid).
torchrun agents and DataLoader workers are skipped unless --trace-children. Signals (Ctrl-C, SIGTERM)
are forwarded; ktrace exits with the command's exit code. GPU capture needs an NVIDIA driver and
cupti-python matching it (pip install 'ktrace[cu13]' or 'ktrace[cu12]'); without them the CPU side
(threads, ktrace.annotate/step ranges) and the counters are still recorded.

examples:
  ktrace run -- python train.py --epochs 1
  ktrace run -o ddp.ktrace -- torchrun --nproc-per-node 2 train.py
  ktrace run --steps 10:20 -- python train.py          (steps counted by ktrace.step())
  ktrace run --delay 30 --duration 10 -- python -m mypkg.train
  ktrace run --capture-range=cudaProfilerApi -- python train.py   (torch.cuda.profiler.start/stop)
  ktrace run --kinds kernel,memcpy,nvtx --interval 100 -- ./train.sh
  ktrace run --python-sample 10 -- python train.py   (Python stacks every 10 ms: ktrace summary shows the top
                                                    functions, ktrace report an icicle of the stacks)
  ktrace run --rules rules.toml --on-finding Dataloader=stop -- python train.py
                               (ends the job when the rule fires in the last 60 s: exit code 7)
  ktrace run -o job.ktrace --publish 2 -- python train.py
      (while it runs: ktrace summary job.ktrace, ktrace ctl job.ktrace --stop)

in the program (works without ktrace run too, as NVTX):
  import ktrace
  for batch in loader:
      ktrace.step()
      with ktrace.annotate("forward"):
          loss = model(batch)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktrace.model.errors import ExitCode, KtraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace run`."""
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="the .ktrace folder to write (default: run.ktrace, run-2.ktrace, ... in the cwd)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace PATH if it is a .ktrace store (anything else is never replaced); the old "
        "trace stays until the new one is complete",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="S",
        help="when the command ends, wait up to S seconds for traced processes it left running "
        "(detached children) to write their trace (default: 30)",
    )
    win = parser.add_argument_group("capture window")
    win.add_argument("--delay", type=float, default=0.0, metavar="S", help="start recording S seconds after launch")
    win.add_argument("--duration", type=float, default=None, metavar="S", help="record for S seconds, then stop")
    win.add_argument("--steps", metavar="A:B", help="record steps A..B-1 (steps are counted by ktrace.step())")
    win.add_argument(
        "--capture-range",
        choices=["none", "cudaProfilerApi"],
        default="none",
        help="cudaProfilerApi: record only between torch.cuda.profiler.start()/stop() "
        "(or cudaProfilerStart/Stop, ktrace.start()/stop())",
    )
    what = parser.add_argument_group("what to record")
    what.add_argument(
        "--kinds",
        default="all",
        metavar="LIST",
        help="activity kinds: kernel,runtime,driver,memcpy,memset,sync,nvtx,external,overhead,resources (default: all)",
    )
    what.add_argument("--no-gpu", action="store_true", help="do not start CUPTI: CPU side and counters only")
    what.add_argument(
        "--interval",
        type=int,
        default=500,
        metavar="MS",
        help="counter sampling interval, 100 ms to 60 s (default: 500)",
    )
    what.add_argument("--no-counters", action="store_true", help="do not sample CPU/GPU counters")
    what.add_argument(
        "--trace-children",
        action="store_true",
        help="also trace launcher agents and multiprocessing children (DataLoader workers)",
    )
    what.add_argument("--ranks", metavar="LIST", help="trace only these ranks, e.g. 0 or 0,4-7")
    what.add_argument("--buffer-mb", type=int, default=8, metavar="MB", help="CUPTI buffer size (default: 8)")
    what.add_argument(
        "--python-sample",
        type=int,
        metavar="MS",
        help="sample the Python stack of every thread of the traced processes every MS ms (1 to 1000; a sample "
        "costs ~10 us of CPU, 0.1 %% at 10 ms) while recording: a sampler thread, no tracing hook; off by default",
    )
    parser.add_argument(
        "--publish",
        type=float,
        default=5.0,
        metavar="S",
        help="make what was recorded readable at least every S seconds while the command runs, 0.5 to 3600 "
        "(default: 5): `ktrace info/summary/view PATH` then read the capture so far and say 'live'",
    )
    from ktrace.cli.follow_rules import add_on_finding_arguments

    add_on_finding_arguments(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to record, after --"
    )


def parse_config(args: argparse.Namespace) -> Any:
    """Build the CaptureConfig from parsed arguments (KtraceError with a usage code when invalid)."""
    from ktrace.tracer.config import (
        CaptureConfig,
        ConfigError,
        check_interval,
        check_publish,
        parse_kinds,
        parse_ranks,
        parse_steps,
    )
    from ktrace.tracer.python_sampler import check_sample_interval

    try:
        if args.delay < 0 or (args.duration is not None and args.duration <= 0):
            raise ConfigError("--delay must be >= 0 and --duration > 0 (seconds)")
        if not 1 <= args.buffer_mb <= 256:
            raise ConfigError("--buffer-mb must be between 1 and 256")
        return CaptureConfig(
            kinds=parse_kinds(args.kinds),
            gpu=not args.no_gpu,
            interval_ms=check_interval(args.interval),
            counters=not args.no_counters,
            delay_s=args.delay,
            duration_s=args.duration,
            steps=parse_steps(args.steps) if args.steps else None,
            capture_range=args.capture_range,
            trace_children=args.trace_children,
            ranks=parse_ranks(args.ranks) if args.ranks else None,
            buffer_mb=args.buffer_mb,
            publish_s=check_publish(args.publish),
            python_sample_ms=None if args.python_sample is None else check_sample_interval(args.python_sample),
        )
    except ConfigError as exc:
        raise KtraceError(str(exc), ExitCode.USAGE) from None


def output_path(args: argparse.Namespace) -> Path:
    """The run folder: -o PATH or the next free run-N.ktrace."""
    from ktrace.tracer.launcher import default_output

    return Path(args.output) if args.output else default_output(Path.cwd())


def run(args: argparse.Namespace) -> int:
    """Record the command, finalize the trace and print where it is; returns the command's exit code."""
    from ktrace.tracer.launcher import python_command, run_command

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise KtraceError("no command given: ktrace run [options] -- COMMAND ...", ExitCode.USAGE)
    from ktrace.model.outputs import STORE, Output

    config = parse_config(args)
    from ktrace.cli.follow_rules import on_finding, stopped_exit

    stop = on_finding(args, config.publish_s)  # checked before anything is written
    if args.wait < 0:
        raise KtraceError("--wait must be >= 0 (seconds)", ExitCode.USAGE)
    quiet = args.quiet
    say = _sayer(quiet)

    # A new PATH is recorded in place; an existing trace (--force) stays until the new one is complete.
    out = Output(output_path(args), STORE, force=args.force, in_place=True)
    watch = stop.watch(out.staging) if stop is not None else None
    try:
        result = run_command(python_command(command), config, out.staging, say, args.wait, watch)
    except KtraceError:
        if any(out.staging.glob("node=*")):  # a failure after recording (finalize): the capture stays readable
            out.keep()
        else:  # nothing was recorded (command not found): no folder left to block the retry
            out.discard()
        raise
    except BaseException:
        out.keep()  # whatever was recorded stays readable
        raise
    return stopped_exit(watch, _finish(out, result, say, quiet))


def _sayer(quiet: bool) -> Callable[[str], None]:
    """The status-line printer of `ktrace run` (silent with --quiet). Notes come from the traced processes too,
    so no control character in them reaches the terminal."""
    from ktrace.model.display_text import printable

    def say(line: str) -> None:
        if not quiet:
            print(f"ktrace: {printable(line)}", file=sys.stderr, flush=True)

    return say


def _finish(out: Any, result: Any, say: Any, quiet: bool) -> int:
    """Publish the finalized trace (or keep the raw capture and say why); the command's exit code."""
    if result.finalize_error:
        out.keep()
        print(f"ktrace run: error: {result.finalize_error} in {out.staging} (ktrace summary reads it)", file=sys.stderr)
        return int(result.exit_code)
    result.root = out.publish()
    for note in result.notes:
        if note not in result.printed:
            say(note)
    if not quiet:
        _print_summary(result)
    return int(result.exit_code)


def _print_summary(result: Any) -> None:
    totals: dict[str, int] = {}
    for proc in result.processes:
        for table, n in proc["rows"].items():
            totals[table] = totals.get(table, 0) + n
    shown = ", ".join(f"{totals.get(t, 0):,} {t}" for t in ("kernels", "memory", "api", "ranges", "threads"))
    shown += f", {totals['samples']:,} Python samples" if totals.get("samples") else ""
    procs = len(result.processes)
    print(
        f"ktrace: trace written to {result.root} ({procs} process{'es' if procs != 1 else ''}: {shown}; "
        f"{result.duration_s:.1f} s; command exit code {result.exit_code})",
        file=sys.stderr,
    )
    if not procs:
        print(
            "ktrace: no Python process ran under the tracer: `ktrace run` traces Python processes (and their "
            "CUDA work); for other programs only the host counters were sampled",
            file=sys.stderr,
        )
    print(f"  next: ktrace summary {result.root}\n        ktrace view {result.root}", file=sys.stderr)
