"""The secret corpus planted in a Kineto trace, an nsys export and a Python-API trace: no planted value appears
in any byte of any output (store, summary, info, reports, every export format), after decoding what is encoded.

Every text form is planted in every field each format has: Kineto kernel, runtime, operator (name, input shapes,
types, call stack), Python frame, GPU copy and set, flow, counter, annotation (CPU and GPU) and instant names, thread
and process names and labels, args, metadata, distributedInfo, traceName, hostname and device name; nsys strings,
NVTX texts, thread and process names, host name, GPU name and uuid, capture metadata, argv and environment; and
`ktrace run`'s command line, environment and annotations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ktrace.cli import main
from ktrace.model import store
from ktrace.model.builder import TraceBuilder
from ktrace.model.layout import PARTITION_META_FILE
from ktrace.testing.secrets_corpus import ARGV_FORMS, ENVIRONMENT, KEPT, TEXT_FORMS, all_secrets
from ktrace.testing.sqlite_export import Table, make_export

TEXTS = [p.text for p in TEXT_FORMS]
ARGV = [a.format(s=secret) for argv, secret in ARGV_FORMS for a in argv]
EPOCH = 1_700_000_000_000_000_000


def _kineto_doc() -> dict[str, Any]:
    pid, tid = 4242, 4243
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": TEXTS[0]}},
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": pid,
            "tid": tid,
            "ts": 1000,
            "dur": 10_000,
            "args": {},
        },
    ]
    for i, text in enumerate(TEXTS + list(KEPT)):
        ts = 1010 + 100 * i
        events += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": text,
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": 50,
                "args": {"note": text},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": pid,
                "tid": tid,
                "ts": ts + 1,
                "dur": 2,
                "args": {"correlation": 100 + i, "cbid": 211},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": text,
                "pid": 0,
                "tid": 7,
                "ts": ts + 5,
                "dur": 4,
                "args": {
                    "correlation": 100 + i,
                    "device": 0,
                    "stream": 7,
                    "grid": [1, 1, 1],
                    "block": [32, 1, 1],
                    "comment": text,
                },
            },
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": text,
                "pid": 0,
                "tid": 7,
                "ts": ts + 5,
                "dur": 4,
                "args": {},
            },
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 5000 + i, "args": {"name": text}},
            {"ph": "i", "cat": "cpu_instant_event", "name": text, "pid": pid, "tid": tid, "ts": ts + 3, "s": "t"},
            *_more_fields(text, pid, tid, ts, i),
        ]
    return {
        "schemaVersion": 1,
        "traceName": TEXTS[1],
        "hostname": TEXTS[3],
        "deviceProperties": [
            {"id": 0, "name": TEXTS[4], "computeMajor": 9, "computeMinor": 0, "numSms": 132, "totalGlobalMem": 8}
        ],
        "distributedInfo": {
            "rank": 0,
            "world_size": 1,
            "backend": TEXTS[5],
            "backend_config": TEXTS[2],
            "nccl_version": TEXTS[6],
            "pg_config": [{"pg_name": t, "pg_desc": t, "ranks": [0]} for t in TEXTS],
        },
        "metadata": {"env": dict(ENVIRONMENT), "notes": TEXTS, "command": ARGV, "nested": {"deep": {"x": TEXTS}}},
        "INFO": TEXTS[:3],
        "traceEvents": events,
    }


def _more_fields(text: str, pid: int, tid: int, ts: int, i: int) -> list[dict[str, Any]]:
    """`text` in every other field a Kineto file has: a process's name and labels, an operator's name, shapes,
    inputs and call stack, a Python frame, a copy and a set on the GPU, a flow, a counter and its series."""
    op_args = {"External id": 9000 + i, "Input Dims": [[8, 3], [text]], "Input type": [text], "Call stack": text}
    return [
        {"ph": "M", "name": "process_name", "pid": 10_000 + i, "tid": 0, "args": {"name": text}},
        {"ph": "M", "name": "process_labels", "pid": 10_000 + i, "tid": 0, "args": {"labels": text}},
        {"ph": "X", "cat": "cpu_op", "name": text, "pid": pid, "tid": tid, "ts": ts, "dur": 3, "args": op_args},
        {"ph": "X", "cat": "python_function", "name": text, "pid": pid, "tid": tid, "ts": ts, "dur": 4, "args": {}},
        {"ph": "X", "cat": "gpu_memcpy", "name": text, "pid": 0, "tid": 8, "ts": ts + 1, "dur": 1, "args": {}},
        {"ph": "X", "cat": "gpu_memset", "name": text, "pid": 0, "tid": 8, "ts": ts + 3, "dur": 1, "args": {}},
        {"ph": "s", "cat": "ac2g", "name": text, "id": 100 + i, "pid": pid, "tid": tid, "ts": ts + 1},
        {"ph": "C", "name": text, "pid": pid, "ts": ts, "args": {text[:40]: 1}},
    ]


def _nsys_export(path: Path) -> Path:
    gtid, gpid = (1 << 48) | (100 << 24) | 101, (1 << 48) | (100 << 24)
    strings = [(1, "cudaLaunchKernel_v7000")] + [(10 + i, t) for i, t in enumerate(TEXTS + list(KEPT))]
    n = len(TEXTS) + len(KEPT)
    capture = [("PROCESS_0:COMMAND", "python")]
    capture += [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(ARGV)]
    capture += [("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"') for k, v in ENVIRONMENT.items()]
    capture += [("PROCESS_0:WORKING_DIR", TEXTS[3]), ("RUN_DURATION_MS", "1000")]
    tables: dict[str, Table] = {
        "StringIds": (("id", "value"), strings),
        "META_DATA_EXPORT": (("name", "value"), [("EXPORT_SCHEMA_VERSION", "3.16.1")]),
        "TARGET_INFO_SESSION_START_TIME": (
            ("utcEpochNs", "utcTime", "localTime"),
            [(EPOCH, "2023-11-14T22:13:20", "2023-11-14T22:13:20")],
        ),
        "TARGET_INFO_SYSTEM_ENV": (
            ("globalVid", "devStateName", "name", "nameEnum", "value"),
            [
                (1 << 48, "Local", "Hostname", 619, TEXTS[7]),
                (1 << 48, "Local", "DeviceEnvironment", 0, ";".join(f"{k}={v}" for k, v in ENVIRONMENT.items())),
            ],
        ),
        "META_DATA_CAPTURE": (("name", "value"), capture),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            ("start", "end", "eventClass", "globalTid", "correlationId", "nameId"),
            [(1000 + 100 * i, 1010 + 100 * i, 0, gtid, i + 1, 1) for i in range(n)],
        ),
        "CUPTI_ACTIVITY_KIND_KERNEL": (
            (
                "start",
                "end",
                "deviceId",
                "contextId",
                "streamId",
                "correlationId",
                "globalPid",
                "demangledName",
                "shortName",
                "gridX",
                "gridY",
                "gridZ",
                "blockX",
                "blockY",
                "blockZ",
                "registersPerThread",
            ),
            [
                (1020 + 100 * i, 1050 + 100 * i, 0, 1, 7, i + 1, gpid, 10 + i, 10 + i, 1, 1, 1, 32, 1, 1, 16)
                for i in range(n)
            ],
        ),
        "NVTX_EVENTS": (
            ("start", "end", "eventType", "text", "globalTid", "textId", "domainId"),
            [(1000 + 100 * i, 1090 + 100 * i, 59, t, gtid, None, 0) for i, t in enumerate(TEXTS)]
            + [(1001 + 100 * i, 1080 + 100 * i, 59, None, gtid, 10 + i, 0) for i in range(n)],
        ),
        "TARGET_INFO_GPU": (
            ("id", "name", "uuid", "smCount", "totalMemory", "computeMajor", "computeMinor"),
            [(0, TEXTS[4], TEXTS[5], 80, 1 << 34, 9, 0)],
        ),
        "ThreadNames": (("nameId", "priority", "globalTid"), [(10 + i, 10, gtid + 1 + i) for i in range(n)]),
        "PROCESSES": (
            ("globalPid", "pid", "name"),
            [(gpid, 100, TEXTS[6])] + [((1 << 48) | ((200 + i) << 24), 200 + i, t) for i, t in enumerate(TEXTS)],
        ),
    }
    return make_export(path, tables)


def _decoded(path: Path) -> list[bytes]:
    """The bytes a reader of `path` gets: gunzipped, and every value and schema text of a Parquet file."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        texts = [
            json.dumps(
                table.column(c).cast(pa.string()).to_pylist()
                if pa.types.is_dictionary(table.schema.field(c).type)
                else table.column(c).to_pylist(),
                default=str,
            )
            for c in table.column_names
        ]
        metadata = table.schema.metadata or {}
        return [path.read_bytes(), *(t.encode() for t in texts), *metadata.values()]
    data = path.read_bytes()
    return [gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data]


def _leaks(folder: Path, captured: str) -> list[str]:
    secrets = all_secrets()
    leaks = [f"stdout/stderr: {s}" for s in secrets if s in captured]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        for blob in _decoded(path):
            text = blob.decode("utf-8", "replace")  # the secrets are ASCII with nothing JSON or HTML escapes
            leaks += [f"{path.relative_to(folder)}: {s[:24]}" for s in secrets if s in text]
    return leaks


def _every_output(source: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Import `source` and run every reading verb on the store and on the source; return what they printed."""
    stored = out / "t.ktrace"
    runs = [
        ["import", str(source), "-o", str(stored), "--no-progress"],
        ["summary", str(stored), "--json"],
        ["summary", str(source), "--json"],
        ["summary", str(stored)],
        ["info", str(stored), "--json"],
        ["info", str(source)],
        ["report", str(stored), "-o", str(out / "r.html")],
        ["report", str(stored), "-o", str(out / "r.md"), "-f", "md"],
        ["report", str(source), "-o", str(out / "r.json"), "-f", "json"],
        ["export", str(stored), "-o", str(out / "t.pftrace.gz"), "--no-progress"],
        ["export", str(source), "-f", "perfetto", "-o", str(out / "src.pftrace"), "--no-progress"],
        ["export", str(stored), "-f", "chrome", "-o", str(out / "t.json"), "--no-progress"],
        ["export", str(stored), "-f", "csv", "-o", str(out / "csv"), "--no-progress"],
        ["export", str(stored), "-f", "parquet", "-o", str(out / "parquet"), "--no-progress"],
    ]
    printed = []
    for args in runs:
        code = main(args)
        captured = capsys.readouterr()
        assert code in (0, 5), (args, captured.err)
        printed += [captured.out, captured.err]
    return "\n".join(printed)


def test_a_kineto_trace_with_the_corpus_planted_leaks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in" / "planted.pt.trace.json.gz"
    source.parent.mkdir()
    source.write_bytes(gzip.compress(json.dumps(_kineto_doc()).encode()))
    out = tmp_path / "out"
    out.mkdir()
    printed = _every_output(source, out, capsys)
    assert _leaks(out, printed) == []
    trace = store.read(out / "t.ktrace")
    names = set(trace.kernels["name"].cast(str).to_list())
    assert set(KEPT) <= names  # innocent names came through unchanged
    for table in ("ops", "ranges", "threads"):  # the fields planted were imported, not dropped
        assert set(KEPT) <= set(trace.table(table)["name"].cast(str).to_list()), table
    assert trace.meta.health["secrets_scrubbed"] >= len(TEXT_FORMS)


def test_an_nsys_export_with_the_corpus_planted_leaks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _nsys_export(tmp_path / "planted.sqlite")
    out = tmp_path / "out"
    out.mkdir()
    printed = _every_output(source, out, capsys)
    assert _leaks(out, printed) == []
    trace = store.read(out / "t.ktrace")
    assert set(KEPT) <= set(trace.kernels["name"].cast(str).to_list())


def test_a_python_api_trace_written_to_a_store_leaks_nothing(tmp_path: Path) -> None:
    from ktrace.model.trace import TraceMeta

    n = len(TEXTS)
    builder = TraceBuilder(node="node-a", rank=0)
    builder.add(
        "kernels",
        {
            "start_ns": [EPOCH + 10 * i for i in range(n)],
            "end_ns": [EPOCH + 10 * i + 5 for i in range(n)],
            "device": [0] * n,
            "name": TEXTS,
        },
    )
    builder.add("threads", {"pid": [1] * n, "tid": list(range(n)), "name": TEXTS})
    builder.set_meta(TraceMeta(source="synthetic", job={"command": ARGV, "env": dict(ENVIRONMENT)}, notes=tuple(TEXTS)))
    store.write(builder.build(), tmp_path / "api.ktrace")
    assert _leaks(tmp_path, "") == []


def test_an_older_store_holding_secrets_is_scrubbed_when_read(tmp_path: Path) -> None:
    """A store written before the scrubber (planted here by writing its files directly) leaks into no output."""
    root = tmp_path / "old.ktrace"
    folder = root / "node=n" / "rank=0"
    folder.mkdir(parents=True)
    n = len(TEXTS)
    pq.write_table(
        pa.table(
            {
                "start_ns": [EPOCH + 10 * i for i in range(n)],
                "end_ns": [EPOCH + 10 * i + 5 for i in range(n)],
                "device": pa.array([0] * n, pa.int32()),
                "name": pa.array(TEXTS).dictionary_encode(),
            }
        ),
        folder / "kernels.parquet",
    )
    (root / "meta.json").write_text(
        json.dumps({"schema_version": 1, "source": "ktrace", "job": {"command": ARGV, "env": dict(ENVIRONMENT)}})
    )
    (folder / PARTITION_META_FILE).write_text(json.dumps({"health": {}, "notes": TEXTS}))  # an unfinished capture
    trace = store.read(root)
    text = json.dumps([trace.kernels["name"].cast(str).to_list(), trace.meta.to_json()])
    assert not [s for s in all_secrets() if s in text]


def test_ktrace_run_keeps_no_secret_of_the_command_line_environment_or_annotations(tmp_path: Path) -> None:
    """The tracer without a GPU: argv (a secret flag's value as the next element), the environment and NVTX-style
    annotation names go through the scrubber before meta.json and the Parquet tables are written."""
    import os
    import subprocess
    import sys

    body = (
        "import ktrace, sys\nfor name in sys.argv[2:2 + int(sys.argv[1])]:\n"
        "    with ktrace.annotate(name):\n        pass\n"
    )
    script = tmp_path / "job.py"
    script.write_text(body)
    planted = [t for t in TEXTS if "\n" not in t][:20]
    args = [sys.executable, str(script), str(len(planted)), *planted, *ARGV]
    env = {**os.environ, **ENVIRONMENT, "NCCL_DEBUG": TEXTS[0], "PYTORCH_CUDA_ALLOC_CONF": TEXTS[1]}
    res = subprocess.run(
        [sys.executable, "-m", "ktrace", "run", "-o", "run.ktrace", "--", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    trace = store.read(tmp_path / "run.ktrace")
    assert trace.ranges.height >= len(planted)  # the annotations were recorded, under redacted names
    script.unlink()
    assert _leaks(tmp_path, res.stdout + res.stderr) == []


def test_a_small_gz_with_a_1_mb_hex_blob_and_metadata_nested_500_deep_imports_quickly(tmp_path: Path) -> None:
    """The issue's two hostile files: a 2 KB .json.gz holding 1 MB of hex ran for over 10 minutes in the old URL
    pattern; `metadata` nested 500 deep raised RecursionError in the scrubber."""
    import time

    from ktrace.importers.kineto import import_kineto

    doc = _kineto_doc()
    nested: dict[str, Any] = {"password": "Pwnested1q"}
    for _ in range(500):
        nested = {"metadata": nested}
    doc["metadata"] = {
        "blob": "0x" + "deadbeef" * 125_000,
        "nested": nested,
        "cmd": "a://" * 50_000 + " --password Pwtail2q",
    }
    source = tmp_path / "hostile.pt.trace.json.gz"
    source.write_bytes(gzip.compress(json.dumps(doc).encode()))
    start = time.process_time()
    trace = import_kineto(source)
    assert time.process_time() - start < 30
    text = trace.meta.to_json()  # raised RecursionError (dataclasses.asdict) before metadata was cut at MAX_DEPTH
    assert "Pwnested1q" not in text and "Pwtail2q" not in text and "deadbeefdeadbeef" in text
