"""Labels and JSON shaping live in presentation/, not in analysis/ (issue #25): no analysis module defines a
`*_dict` / `*_to_dict` function or one of the view labels that moved to presentation.labels."""

from __future__ import annotations

import ast
from pathlib import Path

import ktrace.analysis

ANALYSIS = Path(ktrace.analysis.__file__).parent

LABELS = frozenset({"step_source_note", "memory_op_label", "peak_line"})
"""View labels that presentation.labels holds."""


def presentation_functions(module: Path) -> set[str]:
    """The functions `module` defines that shape JSON or label a number for a view."""
    names = {node.name for node in ast.walk(ast.parse(module.read_text())) if isinstance(node, ast.FunctionDef)}
    return {n for n in names if n.endswith("_dict") or "_to_dict" in n or n in LABELS}


def test_analysis_defines_no_json_shaping_nor_labels() -> None:
    found = {
        str(p.relative_to(ANALYSIS)): names
        for p in sorted(ANALYSIS.rglob("*.py"))
        if (names := presentation_functions(p))
    }
    assert found == {}


def test_the_scan_sees_a_json_shaping_function(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def thing_dict(x):\n    return {}\n\n\ndef step_source_note(s):\n    return s\n")
    assert presentation_functions(planted) == {"thing_dict", "step_source_note"}
