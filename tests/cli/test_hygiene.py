"""Import hygiene: `ktrace --help` and `import ktrace.analysis` stay light (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_FOR_HELP = ["polars", "pyarrow", "numba", "textual", "cupti", "numpy"]


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_help_imports_nothing_heavy() -> None:
    loaded = _modules_after(
        "import contextlib, io\nfrom ktrace.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])"
    )
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY_FOR_HELP)


@pytest.mark.parametrize("module", ["ktrace.analysis", "ktrace", "ktrace.model", "ktrace.importers"])
def test_library_imports_skip_numba_textual_and_cupti(module: str) -> None:
    loaded = {m.split(".")[0] for m in _modules_after(f"import {module}")}
    assert not loaded & {"numba", "textual", "cupti"}


def test_no_stray_njit_outside_the_kernels_package() -> None:
    from pathlib import Path

    import ktrace

    root = Path(ktrace.__file__).parent
    offenders = [
        str(p)
        for p in root.rglob("*.py")
        if "_kernels" not in p.parts and ("@njit" in p.read_text() or "numba.jit(" in p.read_text())
    ]
    assert offenders == []
