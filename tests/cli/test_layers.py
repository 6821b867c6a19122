"""The layer contracts of docs/architecture.md hold, and import-linter really fails when a layer is crossed or a
cycle is planted in any room."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "ktrace"


def _children(package: Path) -> list[Path]:
    """The files of the modules directly inside `package` (a subpackage by its __init__.py), by name."""
    return sorted(
        (p / "__init__.py" if p.is_dir() else p)
        for p in package.iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__")) or (p / "__init__.py").exists()
    )


PACKAGES = sorted(
    str(init.parent.relative_to(PACKAGE.parent))
    for init in PACKAGE.rglob("__init__.py")
    if len(_children(init.parent)) >= 2  # (one module cannot form a cycle)
)
"""ktrace itself (its rooms), every room, and every package inside a room (analysis.rules, tui.widgets...)."""


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
        ("tracer/run_result.py", "from ktrace.tracer.launcher import Say", "No import cycles among the rooms"),
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


def _module_name(root: Path, file: Path) -> str:
    parts = file.relative_to(root / "src").with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_cycle_planted_in_any_room_breaks_the_acyclic_contract(copy_of_repo: Path, package: str) -> None:
    """Two modules of the room import each other, one of them lazily (inside a function, as engines imported
    dask_engine): the acyclic contract names the room."""
    first, second = _children(copy_of_repo / "src" / package)[:2]
    originals = {first: first.read_text(), second: second.read_text()}
    first.write_text(originals[first] + f"\nimport {_module_name(copy_of_repo, second)}  # noqa\n")
    second.write_text(
        originals[second] + f"\n\ndef _planted() -> None:\n    import {_module_name(copy_of_repo, first)}  # noqa\n"
    )
    try:
        res = _lint(copy_of_repo)
    finally:
        for path, text in originals.items():
            path.write_text(text)
    room = package.replace("/", ".")
    assert res.returncode != 0, res.stdout[-2000:]
    assert f"No cycles are allowed in {room}." in res.stdout, res.stdout[-2000:]
