"""Snapshot every user-visible output of every real trace (and a few synthetic ones), to diff a refactor against.

For each trace: `ktrace summary` (text and --json), `ktrace check --json`, `ktrace report` as JSON, Markdown and
HTML, `ktrace export` as Perfetto and Chrome JSON, and the TUI dashboard panels rendered as plain text. Each output
is saved under OUT/<trace>/<name> and its sha256 listed in OUT/hashes.txt, so two snapshots compare with
`diff -r OLD NEW` (or just the two hashes.txt files).

usage:
  python benchmarks/output_snapshot.py OUT [--traces DIR] [--jobs N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent.parent / "shared" / "traces"
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("summary.txt", ("summary", "{trace}")),
    ("summary.json", ("summary", "--json", "{trace}")),
    ("check.json", ("check", "--json", "--fail-on", "never", "{trace}")),
    ("report.json", ("report", "--format", "json", "{trace}")),
    ("report.md", ("report", "--format", "md", "{trace}")),
    ("report.html", ("report", "--format", "html", "-o", "{out}", "{trace}")),
    ("export.pftrace", ("export", "-f", "perfetto", "--no-progress", "-o", "{out}", "{trace}")),
    ("export.chrome.json", ("export", "-f", "chrome", "--no-progress", "-o", "{out}", "{trace}")),
)
TUI_SCRIPT = """
import sys
from rich.console import Console
import ktrace
from ktrace.tui.dashboard_data import compute_dashboard
message = compute_dashboard(ktrace.open(sys.argv[1]))
console = Console(width=120, record=True, file=open("/dev/null", "w"), color_system=None)
for panel in message.panels:
    console.print(f"## {panel.title} available={panel.available} evidence={panel.evidence}")
    console.print(panel.body)
sys.stdout.write(console.export_text())
"""


def real_traces(root: Path) -> list[Path]:
    """Every trace under the shared folder: each .json.gz / .sqlite file, and each folder of several Kineto files."""
    found: list[Path] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(p for p in folder.iterdir() if p.name.endswith((".json.gz", ".sqlite")))
        found.extend(files)
        if len(files) > 1 and all(p.name.endswith(".json.gz") for p in files):
            found.append(folder)
    return found


def synthetic_traces(out: Path) -> list[Path]:
    """A few seeded synthetic traces written as .ktrace folders (one rank, two ranks with slow steps)."""
    from ktrace.model.store import write
    from ktrace.testing import SyntheticConfig, generate

    configs = {
        "synth-1rank": SyntheticConfig(steps=6, kernels_per_step=60),
        "synth-2rank-slow": SyntheticConfig(steps=8, kernels_per_step=40, ranks=2, slow_step_every=3, seed=3),
    }
    paths = []
    for name, config in configs.items():
        path = out / "_inputs" / f"{name}.ktrace"
        if not path.exists():
            write(generate(config), path)
        paths.append(path)
    return paths


def _run(trace: Path, label: str, out: Path) -> list[tuple[str, str]]:
    target = out / label
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
    hashes = []
    jobs = [(name, ["ktrace", *(a.format(trace=trace, out=target / name) for a in args)]) for name, args in COMMANDS]
    jobs.append(("tui_dashboard.txt", [sys.executable, "-c", TUI_SCRIPT, str(trace)]))
    for name, argv in jobs:
        done = subprocess.run(argv, capture_output=True, env=env, check=False)
        path = target / name
        if not path.exists():
            path.write_bytes(done.stdout)
        stderr = done.stderr.decode(errors="replace").replace(str(out), "OUT")
        (target / f"{name}.rc").write_text(f"{done.returncode}\n{stderr[-2000:]}")
        hashes.append((f"{label}/{name}", hashlib.sha256(path.read_bytes()).hexdigest()))
        hashes.append((f"{label}/{name}.rc", hashlib.sha256((target / f"{name}.rc").read_bytes()).hexdigest()))
    return hashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    traces = real_traces(args.traces) + synthetic_traces(args.out)
    labelled = [(t, f"{t.parent.name}__{t.name}") for t in traces if args.only in str(t)]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda tl: _run(tl[0], tl[1], args.out), labelled))
    lines = sorted(f"{digest}  {name}" for result in results for name, digest in result)
    (args.out / "hashes.txt").write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} outputs of {len(labelled)} traces hashed into {args.out / 'hashes.txt'}")


if __name__ == "__main__":
    main()
