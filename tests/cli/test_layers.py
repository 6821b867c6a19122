"""The layer contracts of DESIGN.md hold, and import-linter really fails when a layer is crossed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [exe, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def copy_of_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_contracts_hold(copy_of_repo: Path) -> None:
    res = _lint(copy_of_repo)
    assert res.returncode == 0, res.stdout[-3000:]


def test_model_importing_the_tui_breaks_the_layers(copy_of_repo: Path) -> None:
    schema = copy_of_repo / "src" / "ktrace" / "model" / "schema.py"
    original = schema.read_text()
    schema.write_text(original + "\nimport ktrace.tui  # noqa\n")
    try:
        res = _lint(copy_of_repo)
    finally:
        schema.write_text(original)
    assert res.returncode != 0
    assert "ktrace.model is not allowed to import ktrace.tui" in res.stdout


def test_numba_outside_kernels_breaks_a_contract(copy_of_repo: Path) -> None:
    target = copy_of_repo / "src" / "ktrace" / "exporters" / "tables.py"
    original = target.read_text()
    target.write_text(original + "\nimport numba  # noqa\n")
    try:
        res = _lint(copy_of_repo)
    finally:
        target.write_text(original)
    assert res.returncode != 0 and "numba" in res.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("cli/summary.py", "import textual", "textual only in the TUI"),  # the CLI reaches textual only through tui
        ("exporters/chrome_json.py", "import perfetto", "perfetto (its protobuf descriptors) only in the Perfetto"),
        ("analysis/summary.py", "import plotly", "plotly only in the HTML report"),
        # the cycle launcher <-> finalize came back (through the result type they share)
        ("tracer/run_result.py", "from ktrace.tracer.launcher import Say", "No import cycles among the tracer's"),
    ],
)
def test_a_direct_import_outside_its_room_breaks_a_contract(
    copy_of_repo: Path, module: str, line: str, contract: str
) -> None:
    target = copy_of_repo / "src" / "ktrace" / module
    original = target.read_text()
    target.write_text(original + f"\n{line}  # noqa\n")
    try:
        res = _lint(copy_of_repo)
    finally:
        target.write_text(original)
    assert res.returncode != 0 and f"{contract}" in res.stdout and "BROKEN" in res.stdout
