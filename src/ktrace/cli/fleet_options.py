"""--workers / --cluster of `ktrace summary|report|check`, and the rank-by-rank summary they ask for (ktrace.fleet)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
from typing import TYPE_CHECKING

from ktrace.fleet.scheduler_probe import DEFAULT_TIMEOUT_S, SchedulerAddress
from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ktrace.analysis.gpu_peaks import GpuPeaks
    from ktrace.analysis.rank_reduce import FleetResult
    from ktrace.analysis.rules.config import RulesConfig


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--workers N and --cluster ADDR."""
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="analyse a .ktrace store rank by rank in N worker processes: the same summary, for speed and memory "
        "(default for stores of 16 ranks or more: one per core)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDR",
        help="analyse a .ktrace store rank by rank on the Dask cluster whose scheduler is ADDR (tcp://host:8786; "
        "needs ktrace[dask]; the store must be on a filesystem every worker sees)",
    )
    add_cluster_timeout(parser)
    parser.add_argument(
        "--one-process",
        action="store_true",
        help="analyse every rank in this process even for a store of 16 ranks or more, holding all ranks in memory "
        "at once; the same summary (for comparison, or where memory is plenty)",
    )


def add_cluster_timeout(parser: argparse.ArgumentParser) -> None:
    """--cluster-timeout S: how long --cluster may take to reach the scheduler."""
    parser.add_argument(
        "--cluster-timeout",
        type=float,
        metavar="S",
        default=DEFAULT_TIMEOUT_S,
        help=f"give up on --cluster if no Dask scheduler answers there within S seconds (default {DEFAULT_TIMEOUT_S:g})",
    )


def cluster_of(args: argparse.Namespace) -> SchedulerAddress | None:
    """--cluster with --cluster-timeout, or None without --cluster.

    Raises:
        KtraceError: a timeout that is not a positive number of seconds (exit 2)."""
    if not args.cluster:
        return None
    timeout = args.cluster_timeout
    if not timeout > 0 or timeout == float("inf"):  # (also NaN)
        raise KtraceError(f"--cluster-timeout must be a positive number of seconds, not {timeout:g}", ExitCode.USAGE)
    return SchedulerAddress(args.cluster, timeout)


def fleet_result_of(
    args: argparse.Namespace,
    *,
    top: int = 15,
    steps_pattern: str | None = None,
    annotations: tuple[str, ...] | None = (),
    by_shape: bool = False,
    rules_config: RulesConfig | bool = False,
    gpu_peaks: Mapping[str, GpuPeaks] | None = None,
    system_usage: bool = False,
    also_import: tuple[str, ...] = (),
) -> FleetResult | None:
    """The rank-by-rank FleetResult of `args.trace` when that path applies (fleet.early_start.wants_fleet), else
    None (the caller takes the single-process path); the other arguments as fleet.summary_map.fleet_summary's
    (gpu_peaks default: the rules config's). `also_import`: modules the caller needs after the rank-by-rank path,
    imported while its workers start (fleet.early_start)."""
    one_process = getattr(args, "one_process", False)
    if not one_process and args.workers is None and args.cluster is None and not os.path.isdir(args.trace):
        return None  # a trace file is never a store: no import of the fleet path and model.store (~0.15 s)
    from ktrace.fleet.early_start import start_early, wants_fleet
    from ktrace.model.heap import one_arena

    if one_process and (args.workers is not None or args.cluster):
        raise KtraceError("--one-process contradicts --workers/--cluster (rank by rank)", ExitCode.USAGE)
    if one_process or not wants_fleet(args.trace, args.workers, args.cluster):
        return None
    cluster = cluster_of(args)
    skip = ("ops",) if getattr(args, "no_ops", False) else ()
    one_arena()  # before this process's threads start: they free what the others reuse (model.heap)
    # the workers start, and one reads the first rank's steps, while this process imports the analyses
    early = (
        None if cluster is not None else start_early(args.trace, args.workers, steps_pattern=steps_pattern, skip=skip)
    )
    with early or contextlib.nullcontext():
        from ktrace.cli.progress import progress_bar
        from ktrace.fleet.summary_map import fleet_summary

        for module in also_import:  # what the caller needs next, imported while the workers start
            importlib.import_module(module)
        with progress_bar("analysing rank by rank") as bar:
            return fleet_summary(
                args.trace,
                workers=args.workers,
                cluster=cluster,
                top=top,
                steps_pattern=steps_pattern,
                annotations=annotations,
                by_shape=by_shape,
                rules_config=rules_config,
                gpu_peaks=gpu_peaks
                if gpu_peaks is not None or isinstance(rules_config, bool)
                else rules_config.gpu_peaks,
                skip=skip,
                system_usage=system_usage,
                progress=bar,
                early=early,
            )
