"""Outputs: never delete what ktrace did not write, never leave a half-written output that opens as valid.

Every writing verb (import, export in each format, report, run) is checked against the same rules: an
existing output needs --force; --force replaces only what ktrace wrote (never the input, a project folder, a
link, /proc/version); a killed writer leaves the old output or a complete new one; two writers of one output
never mix; a full disk is one line with the old output intact.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.cli import main
from ktrace.model import TraceFormatError, store
from ktrace.testing import SyntheticConfig, generate

PY = sys.executable
ALEXNET = fixture_path("alexnet")
OWLV2 = fixture_path("tracelens")

WRITERS = {
    "import": (["import", "{src}", "-o", "{out}", "-q", "--no-progress"], "out.ktrace"),
    "perfetto": (["export", "{src}", "-o", "{out}", "--no-progress"], "out.pftrace"),
    "chrome": (["export", "{src}", "-f", "chrome", "-o", "{out}", "--no-progress"], "out.json.gz"),
    "parquet": (["export", "{src}", "-f", "parquet", "-o", "{out}", "--no-progress"], "tables"),
    "csv": (["export", "{src}", "-f", "csv", "-o", "{out}", "--no-progress"], "tables"),
    "report": (["report", "{src}", "-o", "{out}"], "report.html"),
}


def argv(verb: str, src: Path, out: Path, *extra: str) -> list[str]:
    return [a.format(src=src, out=out) for a in WRITERS[verb][0]] + list(extra)


def ktrace(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "ktrace", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def fingerprint(path: Path) -> dict[str, str]:
    """Every file under `path` (or `path` itself) -> sha256: what must not change."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("src")
    shutil.copy(ALEXNET, folder / "alexnet.json.gz")
    return folder / "alexnet.json.gz"


def project_folder(path: Path) -> Path:
    """A user's folder that looked like a store to older ktrace: a meta.json and a node=* entry."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "train.py").write_text("print('train')\n")
    (path / "model.bin").write_bytes(os.urandom(64))
    (path / "meta.json").write_text('{"schema_version": 1, "source": "mine"}')
    (path / "node=a").mkdir()
    return path


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_existing_output_needs_force_and_force_replaces_own_output(
    verb: str, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / WRITERS[verb][1]
    assert main(argv(verb, source, out)) == 0
    before = fingerprint(out)
    assert main(argv(verb, source, out)) == 2
    assert "exists (add --force" in capsys.readouterr().err and fingerprint(out) == before
    assert main(argv(verb, source, out, "--force")) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp or lock left


FOREIGN = ["project", "other_file", "symlink", "proc_version", "input"]


def foreign_target(kind: str, tmp_path: Path, source: Path, name: str) -> Path:
    if kind == "project":
        return project_folder(tmp_path / name)
    if kind == "other_file":
        (tmp_path / name).write_text("precious notes\n")
        return tmp_path / name
    if kind == "symlink":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / name).symlink_to(tmp_path / "elsewhere")
        return tmp_path / name
    if kind == "proc_version":
        return Path("/proc/version")
    return source


@pytest.mark.parametrize("kind", FOREIGN)
@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_force_never_replaces_what_ktrace_did_not_write(
    verb: str, kind: str, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = foreign_target(kind, tmp_path, source, WRITERS[verb][1])
    before = fingerprint(target.resolve()) if kind != "proc_version" else {}
    code = main(argv(verb, source, target, "--force"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    if kind != "proc_version":
        assert fingerprint(target.resolve()) == before
    assert target.is_symlink() == (kind == "symlink")


def test_run_force_never_replaces_the_script_nor_a_project(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text("print('ran')\n")
    res = ktrace("run", "--force", "-o", "train.py", "--no-counters", "--", PY, "train.py", cwd=tmp_path)
    assert res.returncode == 2 and "ran" not in res.stdout and train.read_text() == "print('ran')\n"
    project = project_folder(tmp_path / "proj")
    before = fingerprint(project)
    res = ktrace("run", "--force", "-o", "proj", "--no-counters", "--", "true", cwd=tmp_path)
    assert res.returncode == 2 and "is not part of a .ktrace store" in res.stderr, res.stderr
    assert fingerprint(project) == before


def test_run_command_not_found_leaves_nothing_to_block_the_retry(tmp_path: Path) -> None:
    res = ktrace("run", "-o", "r.ktrace", "--no-counters", "--", "nosuchcmd-ktrace", cwd=tmp_path)
    assert res.returncode == 4 and "command not found" in res.stderr
    assert not any(tmp_path.iterdir())
    assert ktrace("run", "-o", "r.ktrace", "--no-counters", "--", "true", cwd=tmp_path).returncode == 0


def test_run_force_keeps_the_old_trace_until_the_new_one_is_complete(tmp_path: Path) -> None:
    assert ktrace("run", "-o", "r.ktrace", "--no-counters", "--", "true", cwd=tmp_path).returncode == 0
    before = fingerprint(tmp_path / "r.ktrace")
    proc = subprocess.Popen(
        [PY, "-m", "ktrace", "run", "-o", "r.ktrace", "--force", "--no-counters", "--", "sleep", "30"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)
    assert fingerprint(tmp_path / "r.ktrace") == before  # still the old one while recording
    assert store.read(tmp_path / "r.ktrace").meta.source == "ktrace"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert fingerprint(tmp_path / "r.ktrace") != before  # the new one, complete
    assert store.read(tmp_path / "r.ktrace").meta.job["exit_code"] == 128 + signal.SIGTERM


# ----- killed writers: the old output intact or the new one complete -----


def _outcome(out: Path, before: dict[str, str]) -> str:
    if fingerprint(out) == before:
        return "old"
    if out.suffix == ".ktrace":
        assert store.read(out).meta.notes is not None  # opens: complete (meta.json is written last)
        assert not list(out.rglob("*.arrows")) and not (out / ".capture").exists()
    elif out.suffix == ".pftrace":
        from reference.perfetto_validate import validate_perfetto

        assert validate_perfetto(out).ok
    else:
        import polars as pl

        from ktrace.model.schema import TABLES

        assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
        assert all(pl.read_parquet(p) is not None for p in out.iterdir())
    return "new"


KILLED = {
    "import": lambda src, out: argv("import", src, out, "--force"),
    "perfetto": lambda src, out: argv("perfetto", src, out, "--force"),
    "parquet": lambda src, out: argv("parquet", src, out, "--force"),
    "run": lambda src, out: [
        "run",
        "-o",
        str(out),
        "--force",
        "--no-counters",
        "-q",
        "--",
        PY,
        "-c",
        "import ktrace, time\nfor i in range(3000):\n    with ktrace.annotate('r'):\n        time.sleep(0.001)\n",
    ],
}


@pytest.mark.parametrize("verb", sorted(KILLED))
def test_writer_killed_at_random_points_leaves_old_or_complete_output(verb: str, source: Path, tmp_path: Path) -> None:
    out = tmp_path / {"import": "out.ktrace", "perfetto": "out.pftrace", "parquet": "tables", "run": "run.ktrace"}[verb]
    input_path = OWLV2  # seconds to import
    if verb in ("perfetto", "parquet"):
        input_path = tmp_path / "in.ktrace"
        assert main(["import", str(source), "-o", str(input_path), "-q", "--no-progress"]) == 0
    first = subprocess.run(
        [PY, "-m", "ktrace", *KILLED[verb](input_path, out)], capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    rng = random.Random(20)
    for _ in range(4):
        before = fingerprint(out)
        proc = subprocess.Popen(
            [PY, "-m", "ktrace", *KILLED[verb](input_path, out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.3, 3.0))
        os.killpg(proc.pid, rng.choice([signal.SIGKILL, signal.SIGINT, signal.SIGTERM]))
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:  # not this test's subject: what is left must still be old or whole
            warnings.warn(f"ktrace {verb} did not end within 90 s of a signal; killed", stacklevel=1)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        time.sleep(0.3)  # a traced child of `run` may still be closing
        _outcome(out, before)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".ktrace-tmp-")]
    done = subprocess.run(
        [PY, "-m", "ktrace", *KILLED[verb](input_path, out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.stderr, leftovers)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ktrace-")] == []  # the next one cleaned up


def test_store_being_recorded_opens_as_live_and_one_being_imported_does_not(tmp_path: Path) -> None:
    from ktrace.model.outputs import CAPTURE_MARKER, OutputLock

    root = tmp_path / "live.ktrace"
    w = store.CaptureWriter(root, "h", 0)
    w.close()
    lock = OutputLock(root)
    lock.acquire()
    try:  # `ktrace run` records it: read as published so far, and said to be live (issue 31)
        assert any(n.startswith("live, 0 s recorded") for n in store.read(root).meta.notes)
        (root / CAPTURE_MARKER).unlink()  # no capture marker: a store an import is writing
        with pytest.raises(TraceFormatError, match="being written by ktrace"):
            store.read(root)
    finally:
        lock.release()
    (root / CAPTURE_MARKER).touch()
    assert "meta.json missing: the capture did not finish" in store.read(root).meta.notes  # writer gone: recovered


# ----- two writers of one output -----


def test_second_writer_of_one_output_is_refused(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.ktrace"
    holder = subprocess.Popen(
        [
            PY,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from ktrace.model.outputs import OutputLock; OutputLock(Path(sys.argv[1])).acquire(); "
            "print('held', flush=True); time.sleep(30)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert main(argv("import", source, out)) == 1
        assert f"another ktrace is writing it (pid {holder.pid})" in capsys.readouterr().err
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(argv("import", source, out)) == 0  # the dead holder's lock is free


def test_two_imports_at_once_never_mix(tmp_path: Path) -> None:
    other = OWLV2
    out = tmp_path / "x.ktrace"
    procs = [
        subprocess.Popen(
            [PY, "-m", "ktrace", "import", str(src), "-o", str(out), "--force", "-q", "--no-progress"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for src in (ALEXNET, other)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert any(code == 0 for code, _ in results), results
    for code, err in results:
        assert code == 0 or "another ktrace is writing it" in err, err
    kernels = store.read(out).kernels.height
    assert kernels in (main_count(ALEXNET), main_count(other))


def main_count(src: Path) -> int:
    import ktrace

    return int(ktrace.open(src).kernels.height)


# ----- a full disk -----


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(
            f"DISK-FULL TESTS NOT RUN: cannot mount a small tmpfs here ({res.stderr.strip()}); "
            "run them as root on Linux"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_disk_full_is_one_line_and_keeps_the_old_output(
    verb: str, tiny_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = OWLV2
    src = tmp_path / "big.ktrace"
    assert main(["import", str(big), "-o", str(src), "-q", "--no-progress"]) == 0
    small = store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2)), tmp_path / "small.ktrace")
    out = tiny_disk / WRITERS[verb][1]
    assert main(argv(verb, small if verb != "import" else ALEXNET, out)) == 0
    before = fingerprint(out)
    free = os.statvfs(tiny_disk)
    (tiny_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - (16 << 10)))  # 16 kB left
    capsys.readouterr()
    code = main(argv(verb, src if verb != "import" else big, out, "--force"))
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "disk full" in err and "old output is kept" in err, err
    assert fingerprint(out) == before
    assert sorted(p.name for p in tiny_disk.iterdir()) == sorted([out.name, "filler"])


def test_summary_to_a_full_device_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "s.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(root), "-q", "--no-progress"]) == 0
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [PY, "-m", "ktrace", "summary", str(root)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120
        )
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "No space left" in res.stderr, res.stderr


# ----- ktrace run: processes left running, a full disk at finalize -----

DETACHED = """
import subprocess, sys
child = '''
import time, ktrace
for i in range(600):
    with ktrace.annotate("r"):
        pass
    time.sleep(0.003)
'''
subprocess.Popen([sys.executable, "-c", child], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_run_waits_for_a_detached_child_still_writing(tmp_path: Path) -> None:
    (tmp_path / "spawn.py").write_text(DETACHED)
    res = ktrace("run", "-o", "d.ktrace", "--no-counters", "--", PY, "spawn.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    trace = store.read(tmp_path / "d.ktrace")
    assert trace.ranges["name"].cast(str).to_list().count("r") == 600
    assert "processes_still_running" not in trace.meta.health and "recovered_tables" not in trace.meta.health
    assert not list((tmp_path / "d.ktrace").rglob("*.arrows"))  # all of it finalized, none written after


def test_run_reports_a_child_that_outlives_the_wait(tmp_path: Path) -> None:
    # The command returns once its child is traced (its tracer claims a partition before the child's first line
    # runs): under load a child's start can outlast the launcher's 2 s grace for tracers to start.
    spawn = DETACHED.replace("0.003", "0.05").replace(
        "import time, ktrace\n", "import time, ktrace\nopen('started', 'w').close()\n"
    )
    spawn += "import os, time\nwhile not os.path.exists('started'):\n    time.sleep(0.01)\n"
    (tmp_path / "spawn.py").write_text(spawn)
    res = ktrace("run", "-o", "d.ktrace", "--no-counters", "--wait", "0.5", "--", PY, "spawn.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "still running when the trace was finalized" in res.stderr
    time.sleep(1)  # the child goes on, and must not write into the finalized trace
    trace = store.read(tmp_path / "d.ktrace")
    assert trace.meta.health["processes_still_running"] == 1
    assert not list((tmp_path / "d.ktrace").rglob("partition.json"))


@pytest.mark.parametrize("counters", [["--no-counters"], ["--interval", "100"]], ids=["no-counters", "counters"])
def test_run_on_a_full_disk_keeps_the_exit_code_and_the_capture(tiny_disk: Path, counters: list[str]) -> None:
    """With counters, the sampler's last write raised out of the launcher: exit 1, "cannot write standard output"
    (and its thread printed a traceback when a write failed while the command ran)."""
    free = os.statvfs(tiny_disk)
    (tiny_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - (12 << 10)))
    script = tiny_disk.parent / "big.py"
    script.write_text(
        "import ktrace, sys, time\nfor i in range(30000):\n    with ktrace.annotate(f'range {i}'):\n"
        "        pass\ntime.sleep(1.5)\nsys.exit(3)\n"
    )
    res = ktrace("run", "-o", str(tiny_disk / "r.ktrace"), *counters, "--", PY, str(script))
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr and "standard output" not in res.stderr
    assert "disk full" in res.stderr or "trace written" in res.stderr


def test_force_replaces_a_store_holding_a_killed_writers_temporary_file(source: Path, tmp_path: Path) -> None:
    """A writer killed between writing `.ktrace-tmp-XXXXXXXX-meta.json` and its rename leaves that file in the store:
    it is ktrace's own, so --force still replaces the store (it refused: "not part of a .ktrace store")."""
    out = tmp_path / "t.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(out), "-q"]) == 0
    (out / ".ktrace-tmp-0123abcd-meta.json").write_text("{")
    rank = next(out.glob("node=*/rank=*"))
    (rank / ".ktrace-tmp-89abcdef-kernels.parquet").write_bytes(b"half")
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--force"]) == 0
    assert not list(out.rglob(".ktrace-tmp-*"))


def test_a_writer_killed_while_publishing_leaves_the_old_output_to_the_next_one(tmp_path: Path) -> None:
    """publish() moves the old folder aside, renames the new one in, then deletes the old: a kill between the two
    renames left the user's previous output only under a hidden name, and a kill during the delete left half of
    it forever. The next writer of that output puts the old one back, or finishes the delete."""
    out = tmp_path / "t.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(out), "-q"]) == 0
    before = fingerprint(out)
    aside = tmp_path / ".ktrace-old-0123abcd-t.ktrace"
    os.replace(out, aside)  # killed between the renames: no t.ktrace, the old one aside
    assert main(["import", str(ALEXNET), "-o", str(out), "-q"]) == 2  # still refused without --force: it is back
    assert fingerprint(out) == before and not aside.exists()
    shutil.copytree(out, aside)  # killed while deleting the old one after the swap
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--force"]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ktrace-")] == []


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_each_writing_verb_checks_its_target_once(
    verb: str, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once, under the output's lock, before the long work: the verb's own early check and the unlocked one
    before the lock were repeats of it (3 checks, each walking a store or gunzipping a file's opening)."""
    from ktrace.model import outputs

    calls: list[Path] = []
    check = outputs.check_target

    def counted(target: Path, *args: object, **kwargs: object) -> bool:
        calls.append(target)
        return check(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(outputs, "check_target", counted)
    out = tmp_path / WRITERS[verb][1]
    assert main(argv(verb, source, out)) == 0
    assert main(argv(verb, source, out, "--force")) == 0
    assert calls == [out, out]


@pytest.fixture(scope="module")
def alexnet_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("store") / "t.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--no-progress"]) == 0
    return out


@pytest.mark.parametrize(
    "meta",
    [
        '{"name": "my dataset", "rows": 3}',  # JSON, not ktrace's
        '{"schema_version": 1}',  # one of ktrace's two keys only
        "[1, 2]",
        "not json at all",
    ],
)
def test_force_keeps_a_store_shaped_folder_whose_meta_json_ktrace_did_not_write(
    alexnet_store: Path, tmp_path: Path, meta: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other entry is a store's (node=*/rank=*/<table>.parquet): only the meta.json check in
    model/outputs.py can tell it is not ktrace's, so --force must refuse it on that alone (a mutation of that
    check survived the suite: every foreign folder in the tests had some other foreign entry)."""
    out = tmp_path / "t.ktrace"
    shutil.copytree(alexnet_store, out)
    (out / "meta.json").write_text(meta)
    before = fingerprint(out)
    code = main(["import", str(ALEXNET), "-o", str(out), "-q", "--no-progress", "--force"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "its meta.json is not one ktrace wrote" in err and err.count("\n") == 1 and "Traceback" not in err
    assert fingerprint(out) == before
    (out / "meta.json").write_bytes((alexnet_store / "meta.json").read_bytes())  # ktrace's own again: replaced
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--no-progress", "--force"]) == 0
