"""The reading verbs on a big Kineto file (importers.kineto_spill): past the spill threshold (set to 1 byte here, so
that a fixture spills at its first slice) the file is read through a temporary store, and `info`, `summary` and
`check` print what they print when the file is built in memory; the temporary store is gone afterwards, also after
an error or Ctrl-C, and a full or unwritable temporary folder is one line. `info` of a store answers from its
footers (model.store_footers) what reading it would."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ktrace.cli import main
from ktrace.cli.info import describe
from ktrace.importers import kineto_decode
from ktrace.importers.kineto_spill import SPILL_ENV, TEMP_PREFIX, kineto_opened
from ktrace.model import store
from ktrace.model.clock_estimate import align_hosts
from ktrace.model.store_footers import store_facts
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of this test alone (tempfile caches it once read from $TMPDIR)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", ["alexnet", "nccl", "event_sync_multi_stream"])
def test_info_summary_and_check_of_a_spilled_file_print_what_the_in_memory_path_prints(
    name: str, real_trace_path, temp_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    path = str(real_trace_path(name))
    verbs = (["info", path, "--json"], ["info", path], ["summary", path, "--json"], ["check", path, "--json"])
    in_memory = [_out(capsys, *argv) for argv in verbs]
    monkeypatch.setenv(SPILL_ENV, "1")
    with kineto_opened(Path(path)) as opened:  # (it does spill)
        assert isinstance(opened, Path) and opened.parent == temp_folder and (opened / "meta.json").is_file()
    spilled = [_out(capsys, *argv) for argv in verbs]
    assert spilled == in_memory
    assert json.loads(spilled[0][1])["rows"]["kernels"] > 0
    assert list(temp_folder.iterdir()) == []


def test_under_the_threshold_the_file_is_built_in_memory_and_nothing_is_written(
    real_trace_path, temp_folder: Path
) -> None:  # type: ignore[no-untyped-def]
    with kineto_opened(real_trace_path("nccl")) as opened:
        assert isinstance(opened, Trace) and opened.kernels.height == 2700
    assert list(temp_folder.iterdir()) == []


def test_ctrl_c_while_spilling_leaves_no_temporary_store(
    real_trace_path, temp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(SPILL_ENV, "1")
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", 64 << 10)  # many slices: the first flushes before the end
    seen: list[int] = []

    def interrupt_late(done: int, total: int) -> None:
        seen.append(done)
        if any(temp_folder.iterdir()):  # the temporary store exists: the import is writing it
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), kineto_opened(real_trace_path("nccl"), progress=interrupt_late):
        pass
    assert seen and list(temp_folder.iterdir()) == []


def test_an_unwritable_temporary_folder_is_one_line_with_exit_1(
    real_trace_path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))
    monkeypatch.setenv(SPILL_ENV, "1")
    assert main(["summary", str(real_trace_path("alexnet"))]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "temporary store in" in err[0] and "$TMPDIR" in err[0], err


def test_a_bad_threshold_is_a_usage_error(real_trace_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(SPILL_ENV, "lots")
    assert main(["info", str(real_trace_path("alexnet"))]) == 2


def test_a_store_left_by_a_killed_process_is_removed_by_the_next_spill(
    real_trace_path, temp_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = temp_folder / f"{TEMP_PREFIX}{int(ended.stdout)}-0badc0de"
    (abandoned / "node=x").mkdir(parents=True)
    other = temp_folder / "ktrace-open-notes.txt"  # not one of ours: kept
    other.write_text("")
    monkeypatch.setenv(SPILL_ENV, "1")
    with kineto_opened(real_trace_path("alexnet")) as opened:
        assert isinstance(opened, Path)
    assert sorted(temp_folder.iterdir()) == [other]


@pytest.mark.parametrize("name", ["dlrm", "resnet50", "power_iteration"])
def test_info_of_a_store_from_its_footers_equals_info_of_the_store_read(
    name: str, real_trace_path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import ktrace

    root = store.write(ktrace.open(real_trace_path(name)), tmp_path / "t.ktrace")
    facts = store_facts(root)
    assert facts is not None
    assert describe(facts) == describe(store.read(root))


@pytest.mark.parametrize("clock", ["aligned", "raw"])
def test_info_of_a_two_host_store_from_its_footers_is_in_the_clock_read_gives(
    clock: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=2))
    root = store.write(align_hosts(fleet.trace), tmp_path / "two.ktrace")
    monkeypatch.setenv("KTRACE_CLOCK", clock)
    facts = store_facts(root)
    if clock == "aligned":
        assert facts is not None
    if facts is not None:  # (raw times of a store aligned when written: read whole, as partition_spans says)
        assert describe(facts) == describe(store.read(root))
