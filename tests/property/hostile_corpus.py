"""A generated corpus of hostile inputs (issue #20 §3-4): small files that once crashed, hung, blew up memory or
drove the user's terminal. Each case writes its input under a folder and names the ktrace command lines to run.

`python tests/property/hostile_corpus.py [--big] OUT` writes the corpus and runs every command in a subprocess,
printing exit code, seconds and peak RSS per run (the figures in the issue's report). `--big` uses the sizes of
the original reports (a 4 GB whitespace bomb, a 300 MB string, 10,000 rank files); the test suite uses small ones.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ALEXNET = REPO / "fixtures" / "traces" / "hta-a100-alexnet-tiny" / "benchmark_result_2869224_1695835535_trace.json.gz"
OWLV2 = (
    REPO
    / "fixtures"
    / "traces"
    / "tracelens-h100-hf-inference"
    / "google_owlv2-large-patch14-ensemble__1016001.json.gz"
)
NSYS = REPO / "fixtures" / "traces" / "nsys-sqlite-power-iteration-t4" / "power_iteration__baseline.sqlite"

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[H\x9b31m\r\b\u202eevil\u2066"
"""Terminal escapes: set the window title, clear the screen, home the cursor, C1 CSI, CR, BS, bidi overrides."""
MARKUP = "[bold red on white]styled[/] [link=https://evil.example]click[/link]"
"""Rich markup: must be shown as text, never applied."""
HOSTILE_NAME = f"k{ESCAPES}{MARKUP}"
FORMULAS = ('=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)", "\tpad", "\rret")
"""Cells a spreadsheet would run as formulas (OWASP CSV injection)."""


SIZES = {
    False: {"whitespace_mib": 256, "string_mib": 48, "rank_files": 1500},
    True: {"whitespace_mib": 4096, "string_mib": 300, "rank_files": 10_000},
}
"""Sizes of the memory cases: small (the default; tests shrink it further) and --big (those of the reports)."""


@dataclass
class Case:
    """One hostile input and the command lines run on it (TRACE in an argv is replaced by the input's path)."""

    name: str
    make: Callable[[Path, bool], Path]
    argvs: list[list[str]]
    ok_codes: frozenset[int] = frozenset({0, 1, 2, 3, 5})
    expect: dict[str, Any] = field(default_factory=dict)
    """Extra checks the CLI test makes: kernels (count in `summary --json`), code (exact exit code)."""


def kernel(name: str, ts: float, dur: float = 5.0, corr: int = 1, tid: Any = 7, pid: Any = 0) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def launch(ts: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 100,
        "tid": 100,
        "ts": ts,
        "dur": 2.0,
        "args": {"correlation": corr},
    }


def kineto_doc(
    names: list[str], *, start: float = 1.7e15, host: str = "node1", annotation: str = "step"
) -> dict[str, Any]:
    events: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": annotation,
            "pid": 100,
            "tid": 100,
            "ts": start,
            "dur": 20.0 * (len(names) + 1),
        }
    ]
    for i, n in enumerate(names):
        events += [launch(start + 20 * i, i + 1), kernel(n, start + 20 * i + 5, corr=i + 1)]
    return {"schemaVersion": 1, "hostname": host, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": events}


def write_json(path: Path, doc: Any, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data, 6) if gz else data)
    return path


def gzip_stream(path: Path, pieces: Callable[[], Any]) -> Path:
    """Write a gzip file from an iterable of byte pieces without holding the inflated text."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as f:
        for piece in pieces():
            f.write(comp.compress(piece))
        f.write(comp.flush())
    return path


# --- section 3: hostile names -------------------------------------------------------------------------------


def hostile_names(d: Path, big: bool) -> Path:
    doc = kineto_doc(
        [HOSTILE_NAME, "plain_kernel", *FORMULAS], host=f"host{ESCAPES}{MARKUP}", annotation=f"range{ESCAPES}{MARKUP}"
    )
    return write_json(d / "names.json", doc)


# --- section 4: structure ----------------------------------------------------------------------------------


def deep_args(d: Path, big: bool) -> Path:
    depth = 1000 if not big else 100_000
    text = json.dumps(kineto_doc(["k0", "k1"])).replace(
        '"correlation": 1}', '"correlation": 1, "nested": ' + '{"a": [' * depth + "1" + "]}" * depth + "}", 1
    )
    (d / "deep_args.json").write_text(text)
    return d / "deep_args.json"


def deep_event_list(d: Path, big: bool) -> Path:
    """Nesting where an event should be: [[[[...]]]] inside traceEvents."""
    depth = 1000 if not big else 200_000
    text = '{"schemaVersion": 1, "traceEvents": [' + "[" * depth + "]" * depth + "]}"
    (d / "deep_list.json").write_text(text)
    return d / "deep_list.json"


def decoy(d: Path, big: bool) -> Path:
    doc = kineto_doc([f"real{i}" for i in range(30)])
    decoy_doc = {"traceEvents": [kernel("decoy", 1.0)], "note": ']} , "traceEvents": ['}
    out = {"schemaVersion": 1, "metadata": decoy_doc, "traceEvents_x": [], **doc}
    out["traceEvents"] = doc["traceEvents"]
    # metadata (holding a decoy traceEvents) comes first in the text
    return write_json(d / "decoy.json", {"metadata": decoy_doc, **{k: v for k, v in out.items() if k != "metadata"}})


def folder_with_meta(d: Path, big: bool) -> Path:
    folder = d / "ranks_meta"
    folder.mkdir()
    for r in range(2):
        write_json(folder / f"rank{r}.json", kineto_doc([f"r{r}k{i}" for i in range(5)]))
    (folder / "meta.json").write_text('{"note": "a stray meta.json"}')
    return folder


def years_apart(d: Path, big: bool) -> Path:
    folder = d / "years_apart"
    folder.mkdir()
    write_json(folder / "rank0.json", kineto_doc([f"a{i}" for i in range(5)], start=1.62e15))
    write_json(folder / "rank1.json", kineto_doc([f"b{i}" for i in range(5)], start=1.70e15))
    return folder


def real_years_apart(d: Path, big: bool) -> Path:
    """The issue's own case: the 2023 AlexNet and the 2024 OWLv2 fixtures in one folder (clocks a year apart)."""
    folder = d / "real_pair"
    folder.mkdir()
    for src in (ALEXNET, OWLV2):
        (folder / src.name).symlink_to(src)
    return folder


def nsys_inf(d: Path, big: bool) -> Path:
    path = d / "metrics_inf.sqlite"
    path.write_bytes(NSYS.read_bytes())
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName, metricId, metricName)")
    con.execute("CREATE TABLE IF NOT EXISTS GPU_METRICS (timestamp, typeId, metricId, value)")
    con.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0, 0, 'GPU', 1, 'GR Active [Throughput %]')")
    start = con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    rows = [(start + i * 1000, 0, 1, v) for i, v in enumerate([1.0, 9e999, -9e999, 2.0, 50.0, float("nan")])]
    con.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return path


def huge_tid(d: Path, big: bool) -> Path:
    doc = kineto_doc(["k0", "k1"])
    doc["traceEvents"][1]["tid"] = -1e20
    doc["traceEvents"][2]["tid"] = -1e20
    doc["traceEvents"][2]["pid"] = 1e300
    return write_json(d / "tid.json", doc)


def long_host(d: Path, big: bool) -> Path:
    return write_json(d / "host.json", kineto_doc(["k0"], host="h" * 300 + "/../../x"))


def non_finite(d: Path, big: bool) -> Path:
    text = json.dumps(kineto_doc(["k0", "k1"])).replace('"dur": 5.0', '"dur": 1e999', 1)
    text = text.replace('"ts": 1700000000000025.0', '"ts": -1e999', 1)
    (d / "nonfinite.json").write_text(text)
    return d / "nonfinite.json"


# --- section 4: memory --------------------------------------------------------------------------------------


def whitespace_bomb(d: Path, big: bool) -> Path:
    doc = json.dumps(kineto_doc(["k0", "k1", "k2"])).encode()
    head, _, tail = doc.partition(b'"traceEvents": [')
    first, _, rest = tail.partition(b"}, {")
    mib = SIZES[big]["whitespace_mib"]
    block = b" " * (1 << 20)

    def pieces() -> Any:
        yield head + b'"traceEvents": [' + first + b"}"
        for _ in range(mib // 2):
            yield block
        yield b", "
        for _ in range(mib // 2):
            yield b"\n" * (1 << 20)
        yield b"{" + rest

    return gzip_stream(d / "whitespace.json.gz", pieces)


def huge_string(d: Path, big: bool) -> Path:
    doc = json.dumps(kineto_doc(["SENTINEL", "k1", "k2"])).encode()
    before, _, after = doc.partition(b"SENTINEL")
    mib = SIZES[big]["string_mib"]

    def pieces() -> Any:
        yield before
        for _ in range(mib):
            yield b"A" * (1 << 20)
        yield after

    return gzip_stream(d / "huge_string.json.gz", pieces)


def huge_header(d: Path, big: bool) -> Path:
    """A huge string in the metadata before traceEvents."""
    doc = json.dumps(kineto_doc(["k0"])).encode()
    mib = SIZES[big]["string_mib"]

    def pieces() -> Any:
        yield b'{"metadata": {"blob": "'
        for _ in range(mib):
            yield b"B" * (1 << 20)
        yield b'"}, ' + doc[1:]

    return gzip_stream(d / "huge_header.json.gz", pieces)


def many_ranks(d: Path, big: bool) -> Path:
    folder = d / "many_ranks"
    folder.mkdir()
    data = json.dumps(kineto_doc(["k0"])).encode()
    for r in range(SIZES[big]["rank_files"]):
        (folder / f"rank{r}.json").write_bytes(data)
    return folder


CASES: list[Case] = [
    Case(
        "hostile_names",
        hostile_names,
        [
            ["summary", "TRACE"],
            ["info", "TRACE"],
            ["check", "TRACE"],
            ["report", "TRACE", "-f", "md"],
            ["diff", "TRACE", "TRACE"],
        ],
    ),
    Case("deep_args", deep_args, [["summary", "--json", "TRACE"]], expect={"code": 0, "kernels": 2}),
    Case("deep_event_list", deep_event_list, [["summary", "--json", "TRACE"]]),
    Case("decoy", decoy, [["summary", "--json", "TRACE"]], expect={"code": 0, "kernels": 30}),
    Case("folder_with_meta", folder_with_meta, [["summary", "--json", "TRACE"]], expect={"code": 0, "kernels": 10}),
    Case("years_apart", years_apart, [["check", "TRACE"], ["report", "TRACE", "-f", "md"]]),
    Case("real_years_apart", real_years_apart, [["check", "TRACE"], ["summary", "TRACE"]]),
    Case(
        "nsys_inf",
        nsys_inf,
        [
            ["report", "TRACE", "-f", "md"],
            ["report", "TRACE", "-f", "json"],
            ["export", "TRACE", "-f", "chrome", "-o", "OUT/inf.json"],
        ],
    ),
    Case(
        "window_inf",
        hostile_names,
        [
            ["export", "TRACE", "--window", "inf:", "-o", "OUT/w.json"],
            ["export", "TRACE", "--window", "nan:1", "-o", "OUT/w2.json"],
            ["export", "TRACE", "--window", "1e300:", "-o", "OUT/w3.json"],
        ],
        expect={"code": 2},
    ),
    Case(
        "ranks_huge",
        hostile_names,
        [["export", "TRACE", "--ranks", "0-2000000000", "-o", "OUT/r.json"]],
        expect={"code": 2},
    ),
    Case("huge_tid", huge_tid, [["summary", "--json", "TRACE"], ["info", "TRACE"]]),
    Case("long_host", long_host, [["summary", "--json", "TRACE"], ["import", "TRACE", "-o", "OUT/h.ktrace"]]),
    Case(
        "non_finite",
        non_finite,
        [["summary", "--json", "TRACE"], ["export", "TRACE", "-f", "chrome", "-o", "OUT/nf.json"]],
    ),
    Case("whitespace_bomb", whitespace_bomb, [["summary", "--json", "TRACE"]]),
    Case("huge_string", huge_string, [["summary", "--json", "TRACE"]]),
    Case("huge_header", huge_header, [["summary", "--json", "TRACE"]]),
    Case("many_ranks", many_ranks, [["summary", "--json", "TRACE"]]),
]


def build(case: Case, root: Path, big: bool = False) -> Path:
    folder = root / case.name
    folder.mkdir(parents=True, exist_ok=True)
    return case.make(folder, big)


def argv_for(argv: list[str], trace: Path, out: Path) -> list[str]:
    return [str(trace) if a == "TRACE" else a.replace("OUT", str(out)) for a in argv]


_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "print('\\nMAXRSS_KB=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(r.returncode)"
)
"""Runs the command line in its argv and reports its peak RSS (the child's alone) on stderr."""


def _main() -> None:
    import argparse
    import os
    import subprocess
    import sys
    import time

    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--big", action="store_true")
    p.add_argument("-k", default="")
    a = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "100"}
    for case in CASES:
        if a.k not in case.name:
            continue
        t0 = time.perf_counter()
        trace = build(case, a.out, a.big)
        made = time.perf_counter() - t0
        for argv in case.argvs:
            cmd = [
                sys.executable,
                "-c",
                _MEASURE,
                sys.executable,
                "-m",
                "ktrace",
                *argv_for(argv, trace, a.out / case.name),
            ]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, env=env, timeout=600, check=False)
            secs = time.perf_counter() - t0
            err, _, rss_line = r.stderr.decode(errors="replace").rpartition("\nMAXRSS_KB=")
            rss = int(rss_line.split()[0]) if rss_line.strip() else 0
            tb = "Traceback" in err
            last = (err.strip().splitlines() or [""])[-1][:150]
            print(
                f"{case.name:18} {' '.join(argv[:1] + argv[2:]):40} rc={r.returncode:<3} {secs:6.1f}s "
                f"rss={rss / 1024:5.0f} MB tb={tb} made={made:.1f}s | {last}",
                flush=True,
            )


if __name__ == "__main__":
    _main()
