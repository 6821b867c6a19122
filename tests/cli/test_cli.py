"""The command line: verbs, help, exit codes and `ktrace info`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ktrace.cli import VERBS, main, top_parser
from ktrace.model import ExitCode, store
from ktrace.testing import SyntheticConfig, generate


def _ktrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ktrace", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_verb(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in VERBS:
        assert verb in out


def test_unknown_verb_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == ExitCode.USAGE


def test_verb_prefixes_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5)), tmp_path / "p.ktrace")
    assert main(["inf", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "synthetic"


def test_every_verb_module_has_arguments_and_run() -> None:
    import importlib

    for verb, (module, _) in VERBS.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:  # pragma: no cover - a verb whose room has not landed
            pytest.fail(f"verb {verb}: module {module} missing")
        assert callable(mod.add_arguments) and callable(mod.run), verb
        assert mod.__doc__, f"verb {verb} has no help text"
    assert top_parser().prog == "ktrace"


def test_info_json_on_a_written_synthetic_trace(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=30, ranks=2))
    root = store.write(trace, tmp_path / "s.ktrace")
    res = _ktrace("info", str(root), "--json", "--validate")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["rows"]["kernels"] == trace.kernels.height
    assert [r["rank"] for r in info["ranks"]] == [0, 1]  # the node-wide counters' partition (-1) is no rank
    assert info["node_counters"] == sorted({n for n, r in trace.ranks if r < 0})
    assert info["problems"] == []
    assert len(info["devices"]) == 2


def test_info_json_on_a_capture_says_rank_0_and_unknown_never_a_pid_or_minus_1(tmp_path: Path) -> None:
    """A single process without RANK is rank 0 (it was filed under its pid); a second un-ranked process (0 taken)
    keeps its pid as the partition but its rank is said to be unknown; the launcher's node counters are no rank.
    Fails on the old code: ranks were [-1, <pid>] and [-1, <pid>, <pid>]."""
    (tmp_path / "one.py").write_text("import ktrace\nwith ktrace.annotate('work'):\n    sum(range(1000))\n")
    (tmp_path / "two.py").write_text(
        "import subprocess, sys, ktrace\n"
        "with ktrace.annotate('parent'):\n"
        f"    subprocess.run([sys.executable, {str(tmp_path / 'one.py')!r}], check=True)\n"
    )
    infos = {}
    for name in ("one", "two"):
        run = _ktrace("run", "-o", str(tmp_path / f"{name}.ktrace"), "--", sys.executable, str(tmp_path / f"{name}.py"))
        assert run.returncode == 0, run.stderr
        res = _ktrace("info", str(tmp_path / f"{name}.ktrace"), "--json")
        assert res.returncode == 0, res.stderr
        infos[name] = json.loads(res.stdout)
    one = infos["one"]["ranks"]
    assert [r["rank"] for r in one] == [0] and isinstance(one[0]["pid"], int)
    assert infos["one"]["node_counters"] == [one[0]["node"]]
    two = sorted(infos["two"]["ranks"], key=lambda r: r["rank"] is None)
    assert [r["rank"] for r in two] == [0, None]
    assert two[1]["partition"] == two[1]["pid"] != two[0]["pid"]
    text = _ktrace("info", str(tmp_path / "two.ktrace")).stdout
    assert f"/? (rank unknown, pid {two[1]['pid']})" in text and "/-1" not in text


def test_info_on_an_nsys_export_whose_job_lists_processes_by_pid(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    """nsys_meta writes job.processes as {pid: name}; info read it as a capture's list of processes and crashed."""
    res = _ktrace("info", str(real_trace_path("power_iteration")), "--json")
    assert res.returncode == 0, res.stderr
    assert [r["rank"] for r in json.loads(res.stdout)["ranks"]] == [0]


def test_info_text_names_devices_and_tables(tmp_path: Path) -> None:
    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5)), tmp_path / "t.ktrace")
    res = _ktrace("info", str(root))
    assert res.returncode == 0
    assert "H100" in res.stdout and "kernels" in res.stdout


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p / "missing.ktrace", ExitCode.NOT_FOUND),
        (lambda p: (p / "junk.bin").write_bytes(b"\x00\x01garbage") and p / "junk.bin", ExitCode.BAD_INPUT),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(tmp_path: Path, make, code: ExitCode) -> None:  # type: ignore[no-untyped-def]
    res = _ktrace("info", str(make(tmp_path)))
    assert res.returncode == code
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_verb_help_prose_fits_an_80_column_terminal(
    verb: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Descriptions were printed as written (lines of up to ~115 characters), so an 80-column terminal cut them
    mid-word; prose is re-filled now, examples (indented) stay as written."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if len(line) > 80 and not line.startswith(" ")] == []
    assert "\n  ktrace " + verb in out  # the examples keep their indent and their lines
