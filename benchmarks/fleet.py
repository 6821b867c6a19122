"""Fleet benchmark (#13): import an N-rank job (default 256) built from the real DLRM folder, rank by rank.

Builds the job in a temporary folder (`ktrace.testing.fleet_job`: 8 ranks a host, planted clock offsets, one
straggler), then imports it four ways, each in a fresh process:

- anchor: today's one-process folder import (`import_kineto(DIR)` then `store.write`), every rank in memory;
- `ktrace import DIR --workers 1` (in-process engine) and `--workers 2` (two worker processes);
- the Dask engine on a LocalCluster of 2 worker processes (`import_folder(..., cluster=client)`).

Wall time (and the CPU time of the process tree), peak RSS of each worker (VmHWM, sampled from /proc while the
import runs; the Dask workers report their own), and the peak of one rank imported alone as the yardstick. Every
store is read back and compared with the anchor's (tables, health, notes). The load average is printed beside the
figures: on the shared 2-core machine wall times are only comparable within one run.

    python benchmarks/fleet.py [--ranks 256] [--steps 2] [--dir /tmp] [--pairs 3]

The last line is `fleet: <N> ranks, 1 worker <s> s, 2 workers <s> s, dask <s> s, peak RSS per worker <MB>,
results identical: yes|no`; `SUMMARY_HOOKS` below adds the map-reduce summary's part (fleet-reduce's).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DLRM = REPO / "fixtures" / "traces" / "param-dlrm-v100-8rank"

SUMMARY_HOOKS: list[Callable[[Path, Path], str]] = []
"""Functions (job folder, the 2-worker store) -> a fragment appended to the last line (", summary ...")."""


def _fleet_summary(folder: Path, store_path: Path) -> str:
    """fleet-reduce's part: the 2-worker store summarized in one process, on 2 processes and on a Dask LocalCluster
    (benchmarks/fleet_summary.py), the numbers compared."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fleet_summary import summary_fragment  # a sibling script, not a package

    return str(summary_fragment(store_path))


SUMMARY_HOOKS.append(_fleet_summary)


def _vmhwm(pid: int | str = "self") -> int:
    """Peak RSS (VmHWM) of process `pid` in bytes; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            kids = [
                int(c) for t in Path(f"/proc/{parent}/task").iterdir() for c in (t / "children").read_text().split()
            ]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far; 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(command: list[str]) -> tuple[float, float, int, dict[int, int]]:
    """Run `command`; (wall s, CPU s of the process tree as last sampled, its own peak RSS, {descendant pid: peak
    RSS}). Sampled every 50 ms from /proc: worker processes are reaped by the forkserver, not by us."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, int] = {}
    cpu: dict[int, float] = {}
    own = [0]

    def sample() -> None:
        while proc.poll() is None:
            own[0] = max(own[0], _vmhwm(proc.pid))
            cpu[proc.pid] = max(cpu.get(proc.pid, 0.0), _cpu_s(proc.pid))
            for pid in _descendants(proc.pid):
                peaks[pid] = max(peaks.get(pid, 0), _vmhwm(pid))
                cpu[pid] = max(cpu.get(pid, 0.0), _cpu_s(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {err.strip()[-2000:]}")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if last.startswith("peak "):  # a child that measured itself
        own[0] = int(last.split()[1])
    return wall, sum(cpu.values()), own[0], peaks


def _child(kind: str, folder: Path, out: Path) -> None:
    """Run in a fresh process: the anchor import, one rank alone, or the Dask import; print `peak <bytes>`."""
    if kind == "anchor":
        from ktrace.importers.kineto import import_kineto
        from ktrace.model import store

        store.write(import_kineto(folder), out)
    elif kind == "one-rank":
        from ktrace.fleet.rank_import import RankTask, import_rank

        out.mkdir(parents=True, exist_ok=True)
        import_rank(RankTask(str(sorted(folder.glob("*.json.gz"))[0]), str(out / "file=one"), True))
    elif kind == "dask":
        from distributed import Client, LocalCluster

        from ktrace.fleet.folder_import import import_folder
        from ktrace.model.outputs import STORE, Output

        with (
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            t0 = time.perf_counter()
            import_folder(folder, Output(out, STORE), cluster=client)
            wall = time.perf_counter() - t0
            peaks = client.run(_vmhwm)
        print(f"dask-wall {wall:.3f} workers {' '.join(str(p) for p in peaks.values())}")
    print(f"peak {_vmhwm()}")


def _same(store_path: Path, anchor: Path) -> bool:
    from ktrace.model import store
    from ktrace.testing.compare import assert_trace_equal

    got, want = store.read(store_path), store.read(anchor)
    try:
        assert_trace_equal(got, want)
    except AssertionError as exc:
        print(f"  {store_path.name} differs from the anchor: {str(exc)[:300]}")
        return False
    # meta as read (not meta.json's text): a multi-host store written rank by rank keeps each host's clock on disk
    # and its alignment unapplied, the anchor's timestamps were shifted before writing; both read back aligned
    metas = [dataclasses.replace(t.meta, created="") for t in (got, want)]
    if metas[0] != metas[1]:
        print(f"  {store_path.name}: its meta differs from the anchor's")
    return metas[0] == metas[1]


def _pairs(
    ktrace: list[str], work: Path, pairs: int
) -> tuple[float, float, int, dict[int, int], float, float, int, dict[int, int]]:
    """`--workers 1` and `--workers 2` run `pairs` times, alternated, into fresh stores (w1.ktrace and w2.ktrace are
    the last ones); the run of median wall of each (its wall, CPU, peak RSS, workers' peaks)."""
    runs: dict[str, list[tuple[float, float, int, dict[int, int]]]] = {"1": [], "2": []}
    for n in range(pairs):
        for workers, found in runs.items():
            out = work / f"w{workers}.ktrace"
            shutil.rmtree(out, ignore_errors=True)
            found.append(_timed([*ktrace, str(out), "--workers", workers]))
        if pairs > 1:
            (a, ca, _, _), (b, cb, _, _) = runs["1"][-1], runs["2"][-1]
            print(
                f"pair {n + 1}: 1 worker {a:.2f} s ({ca:.2f} s CPU), 2 workers {b:.2f} s ({cb:.2f} s CPU): "
                f"{a / b:.2f}x, load {os.getloadavg()[0]:.1f}"
            )
    one, two = (sorted(found, key=lambda run: run[0])[(len(found) - 1) // 2] for found in runs.values())
    return (*one, *two)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--source", type=Path, default=DLRM)
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask LocalCluster run")
    ap.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="run --workers 1 and --workers 2 this many times, alternated, each pair's ratio printed; the runs of "
        "median wall are reported (on a shared machine one pair says little)",
    )
    ap.add_argument("--child", choices=["anchor", "one-rank", "dask"], help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.paths[0], args.paths[1])
        return 0

    from ktrace.testing.fleet_job import generate_fleet_job

    work = Path(tempfile.mkdtemp(prefix="ktrace-fleet-", dir=args.dir))
    try:
        return _run(args, work, generate_fleet_job)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path, generate: Callable[..., object]) -> int:
    print(f"machine: {os.cpu_count()} cores, load before {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    folder = work / "job"
    t0 = time.process_time()
    generate(args.source, folder, ranks=args.ranks, steps=args.steps)
    size = sum(p.stat().st_size for p in folder.glob("*.json.gz"))
    print(
        f"job: {args.ranks} ranks x {args.steps} steps, {size / 2**20:.1f} MB gzip, built in "
        f"{time.process_time() - t0:.1f} s CPU"
    )
    me = [sys.executable, __file__]
    ktrace = [sys.executable, "-m", "ktrace", "import", str(folder), "--no-progress", "-q", "-o"]
    _, _, one_rank, _ = _timed([*me, "--child", "one-rank", str(folder), str(work / "one")])
    anchor_wall, anchor_cpu, anchor_rss, _ = _timed(
        [*me, "--child", "anchor", str(folder), str(work / "anchor.ktrace")]
    )
    w1, c1, rss1, _, w2, c2, client2, peaks2 = _pairs(ktrace, work, args.pairs)
    workers2 = sorted([client2, *peaks2.values()])[-2:]  # the client imports too, beside one worker process
    mb = 2**20
    print(f"one rank imported alone: peak RSS {one_rank / mb:.0f} MB (the yardstick)")
    print(
        f"anchor (one process, every rank in memory): {anchor_wall:.2f} s wall, {anchor_cpu:.2f} s CPU, "
        f"peak RSS {anchor_rss / mb:.0f} MB"
    )
    print(
        f"--workers 1 (in-process): {w1:.2f} s wall, {c1:.2f} s CPU, peak RSS {rss1 / mb:.0f} MB "
        f"({rss1 / one_rank:.2f}x one rank)"
    )
    print(
        f"--workers 2: {w2:.2f} s wall, {c2:.2f} s CPU, speed-up {w1 / w2:.2f}x over 1 worker; client peak "
        f"{client2 / mb:.0f} MB, workers {', '.join(f'{p / mb:.0f}' for p in workers2)} MB "
        f"({max(workers2) / one_rank:.2f}x one rank)"
    )
    dask_wall = float("nan")
    same = [_same(work / "w1.ktrace", work / "anchor.ktrace"), _same(work / "w2.ktrace", work / "anchor.ktrace")]
    if not args.no_dask:
        dask_total, _, _, _ = _timed([*me, "--child", "dask", str(folder), str(work / "dask.ktrace")])
        line = (
            subprocess.run(
                [*me, "--child", "dask", str(folder), str(work / "dask2.ktrace")],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.split("\n")[0]
            .split()
        )
        dask_wall = float(line[1])
        dask_workers = [int(p) for p in line[3:]]
        print(
            f"dask LocalCluster (2 worker processes): import {dask_wall:.2f} s wall ({dask_total:.2f} s with the "
            f"cluster's start), workers {', '.join(f'{p / mb:.0f}' for p in dask_workers)} MB"
        )
        same.append(_same(work / "dask2.ktrace", work / "anchor.ktrace"))
    print(f"load after {os.getloadavg()[0]:.1f}")
    extra = "".join(hook(folder, work / "w2.ktrace") for hook in SUMMARY_HOOKS)
    print(
        f"fleet: {args.ranks} ranks, 1 worker {w1:.2f} s, 2 workers {w2:.2f} s, dask {dask_wall:.2f} s, "
        f"peak RSS per worker {max(workers2) / mb:.0f} MB, results identical: {'yes' if all(same) else 'no'}{extra}"
    )
    return 0 if all(same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
