"""--workers / --cluster of `ktrace summary|report|check`, and the fleet summary they ask for (ktrace.fleet)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktrace.analysis.rank_reduce import FleetSummary


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--workers N and --cluster ADDR."""
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="analyse a .ktrace store rank by rank in N worker processes (default for stores of 16 ranks or more: "
        "one per core)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDR",
        help="analyse a .ktrace store rank by rank on the Dask cluster whose scheduler is ADDR (tcp://host:8786; "
        "needs ktrace[dask]; the store must be on a filesystem every worker sees)",
    )
    parser.add_argument(
        "--one-process",
        action="store_true",
        help="analyse every rank in this process even for a store of 16 ranks or more: every section (critical "
        "path, operators, memory timeline, every rule), at the cost of holding all ranks in memory at once",
    )


def fleet_summary_of(
    args: argparse.Namespace, *, top: int = 15, steps_pattern: str | None = None
) -> FleetSummary | None:
    """The FleetSummary of `args.trace` when the map-reduce path applies (fleet.summary_map.wants_fleet), else None
    (the caller takes the single-process path)."""
    one_process = getattr(args, "one_process", False)
    if not one_process and args.workers is None and args.cluster is None and not os.path.isdir(args.trace):
        return None  # a trace file is never a store: no import of the fleet path and model.store (~0.15 s)
    from ktrace.fleet.summary_map import fleet_summary, wants_fleet

    if one_process and (args.workers is not None or args.cluster):
        from ktrace.model.errors import ExitCode, KtraceError

        raise KtraceError("--one-process contradicts --workers/--cluster (rank by rank)", ExitCode.USAGE)
    if one_process or not wants_fleet(args.trace, args.workers, args.cluster):
        return None
    from ktrace.cli.progress import progress_bar

    with progress_bar("analysing rank by rank") as bar:
        return fleet_summary(
            args.trace, workers=args.workers, cluster=args.cluster, top=top, steps_pattern=steps_pattern, progress=bar
        )
