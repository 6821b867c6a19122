"""`ktrace export`: every format, cutting a window and ranks, findings, and one-line errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference.perfetto_validate import validate_perfetto

from ktrace.cli import main
from ktrace.model.trace import Trace
from ktrace.presentation.page import Window


@pytest.fixture(scope="module")
def stored(synthetic_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ktrace.model import store

    path = tmp_path_factory.mktemp("export") / "run.ktrace"
    store.write(synthetic_trace, path)
    return path


def test_perfetto_gz_from_the_extension(stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.pftrace.gz"
    assert main(["export", str(stored), "-o", str(out), "--no-progress"]) == 0
    assert "slices" in capsys.readouterr().out
    report = validate_perfetto(out)
    assert report.ok and report.slices and report.arrows


def test_window_and_ranks_cut_the_export(stored: Path, tmp_path: Path, synthetic_trace: Trace) -> None:
    whole, cut = tmp_path / "whole.pftrace", tmp_path / "cut.pftrace"
    assert main(["export", str(stored), "-o", str(whole), "--no-progress"]) == 0
    assert main(["export", str(stored), "-o", str(cut), "--window", "2.0:2.1", "--ranks", "1", "--no-progress"]) == 0
    whole_report, cut_report = validate_perfetto(whole), validate_perfetto(cut)
    assert cut_report.ok
    assert 0 < len(cut_report.slices) < len(whole_report.slices)
    t0 = synthetic_trace.span_ns()[0]  # type: ignore[index]
    assert all(s.end_ns >= t0 + 2_000_000_000 and s.start_ns <= t0 + 2_100_000_000 for s in cut_report.slices)
    assert not any(name.startswith("rank 0") for name in cut_report.tracks.values())


def test_chrome_json(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["export", str(stored), "-f", "chrome", "-o", str(out), "--no-progress"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert {"X", "s", "f", "C", "M"} <= {e["ph"] for e in events}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_tables(stored: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "tables"
    assert main(["export", str(stored), "-f", fmt, "-o", str(out), "--no-progress"]) == 0
    assert (out / f"kernels.{fmt}").stat().st_size > 0


def test_findings_are_drawn(stored: Path, tmp_path: Path) -> None:
    from ktrace.analysis.rules import run_rules
    from ktrace.exporters.findings import finding_rows
    from ktrace.model import store

    rows = finding_rows(run_rules(store.read(stored)).findings)
    assert rows  # the synthetic job fires rules (GPUGaps, ...)
    out = tmp_path / "f.pftrace"
    assert main(["export", str(stored), "-o", str(out), "--findings", "--no-progress"]) == 0
    assert validate_perfetto(out).instants == len(rows)


def _instants(path: Path) -> list[tuple[str, str, str, int, int]]:
    """(rule, severity, message, start_ns, end_ns) of every instant event of a .pftrace."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
    from reference.perfetto_validate import iter_packets, read_bytes

    out = []
    for raw in iter_packets(read_bytes(path)):
        packet = TracePacket.FromString(raw)
        event = packet.track_event
        if event.type == TrackEvent.TYPE_INSTANT:
            args = {a.name: a.string_value or a.int_value for a in event.debug_annotations}
            out.append((args["rule"], args["severity"], args["message"], packet.timestamp, args["end_ns"]))
    return out


def test_findings_markers_are_the_reports_findings(stored: Path, tmp_path: Path) -> None:
    """Each finding `ktrace report` lists (its report page's rule sections) is marked once per evidence window, at
    its times, with its rule, severity and message; a finding without timed evidence once, at the trace start."""
    from ktrace.model import store
    from ktrace.presentation.findings import page_findings
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.report_page import report_page

    trace = store.read(stored)
    listed = page_findings(report_page(build_report(trace)))
    t0 = trace.span_ns()[0]  # type: ignore[index]
    expected = [
        (f.rule, f.severity, f.message, w.start_ns, w.start_ns if w.end_ns is None else w.end_ns)
        for f in listed
        for w in (f.windows or (Window(t0, None, None, None),))
    ]
    assert len(expected) > len(listed) > 1  # findings with several windows among them
    out = tmp_path / "f.pftrace"
    assert main(["export", str(stored), "-o", str(out), "--findings", "--no-progress"]) == 0
    assert _instants(out) == expected


def test_a_failing_rule_costs_the_findings_not_the_export(
    stored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(trace: Trace) -> None:
        raise ValueError("broken rule")

    monkeypatch.setattr("ktrace.analysis.rules.run_rules", failing)
    out = tmp_path / "f.pftrace"
    assert main(["export", str(stored), "-o", str(out), "--findings", "--no-progress"]) == 0
    assert "the rules failed (ValueError: broken rule); exporting without findings" in capsys.readouterr().err
    assert validate_perfetto(out).ok and validate_perfetto(out).instants == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--window", "3"], 2, "expected START:END"),
        (["--window", "2:1"], 2, "END must be after START"),
        (["--ranks", "7"], 2, "not in the trace"),
        (["-o", "/proc/version/x.pftrace"], 1, "Not a directory"),
    ],
)
def test_bad_options_are_one_line_errors(
    stored: Path, args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(stored), "--no-progress", *args]) == code
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_trace_exits_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "nope.ktrace"), "-o", str(tmp_path / "x.pftrace")]) == 4
    assert "no such file" in capsys.readouterr().err


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "--window" in out and "ui.perfetto.dev" in out


def test_kineto_folder_of_ranks_imports_back(stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ktrace import open as open_trace

    out = tmp_path / "kineto"
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "2 rank files" in captured.out
    note = [line for line in captured.err.splitlines() if "Kineto has no slot for" in line]
    assert len(note) == 1 and "counter values" in note[0]  # the synthetic run has counters: said in one line
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json"]
    assert len(open_trace(str(out)).ranks) == 2
    # --force replaces a folder of rank files ktrace wrote, and nothing else
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--no-progress"]) == 2
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--no-progress", "--force"]) == 0
    (out / "notes.txt").write_text("mine")
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--no-progress", "--force"]) == 2
    assert (out / "notes.txt").read_text() == "mine"


def test_kineto_one_rank_to_a_gz_file(stored: Path, tmp_path: Path) -> None:
    import gzip

    out = tmp_path / "rank1.json.gz"
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--ranks", "1", "--no-progress"]) == 0
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    assert doc["distributedInfo"]["rank"] == 1 and doc["baseTimeNanoseconds"] > 0
    assert {"kernel", "cuda_runtime", "ac2g"} <= {e.get("cat") for e in doc["traceEvents"]}


def test_kineto_file_of_several_ranks_is_refused(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all.json"
    assert main(["export", str(stored), "-f", "kineto", "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds one rank and the trace has 2" in err and "--ranks 0" in err
    assert not out.exists()


def test_kineto_file_force_replaces_only_a_kineto_export(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "rank0.json"
    args = ["export", str(stored), "-f", "kineto", "-o", str(out), "--ranks", "0", "--no-progress"]
    assert main(args) == 0
    assert main([*args, "--force"]) == 0
    out.write_text('{"traceEvents": []}')  # someone else's trace
    assert main([*args, "--force"]) == 2
    assert out.read_text() == '{"traceEvents": []}'


@pytest.mark.parametrize("fmt", ["perfetto", "chrome"])
def test_temporary_files_go_beside_the_output_not_in_tmpdir(
    stored: Path, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layout's temporary files (exporters/spill) are made in the output's folder, unnamed: a missing (or full,
    or small tmpfs) $TMPDIR does not fail the export, and nothing is left beside the output."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmpdir"))  # what $TMPDIR gave, cached
    monkeypatch.setenv("KTRACE_EXPORT_MEMORY_BYTES", "0")  # the spills in files (a small export's fit in memory)
    made_in: list[str | None] = []
    temporary_file = tempfile.TemporaryFile

    def noting(*args: object, **kwargs: object) -> object:
        made_in.append(kwargs.get("dir"))  # type: ignore[arg-type]
        return temporary_file(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(tempfile, "TemporaryFile", noting)
    out = tmp_path / "out" / ("run.pftrace" if fmt == "perfetto" else "run.json")
    assert main(["export", str(stored), "-f", fmt, "-o", str(out), "--no-progress"]) == 0
    assert made_in and {Path(str(d)) for d in made_in} == {out.parent}
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def test_times_before_zero_are_a_one_line_error_for_perfetto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tangled_traces import tangled_trace

    from ktrace.model import store

    trace = tangled_trace(
        seed=4, ranges=3000, range_names=50, ties=slice(100, 160), calls=4000, shared=300, kernel_ns=550,
        two_gpus=True, two_streams=True,
    )  # fmt: skip
    span = trace.span_ns()
    assert span is not None and span[0] < 0
    path = tmp_path / "early.ktrace"
    store.write(trace, path)
    out = tmp_path / "early.pftrace"
    assert main(["export", str(path), "-f", "perfetto", "-o", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "before 0" in err and "-f chrome" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    chrome = tmp_path / "early.json"
    assert main(["export", str(path), "-f", "chrome", "-o", str(chrome), "--no-progress"]) == 0
    assert json.loads(chrome.read_text())["traceEvents"]
