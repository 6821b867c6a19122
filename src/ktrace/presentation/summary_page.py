"""The summary as a Page: header facts, grouped notes, then one section per table, in the terminal's order.

`ktrace summary` lays this page out in the terminal (report.terminal); `ktrace summary --json` prints its
document, summary_to_dict (computed when first read: the terminal never needs it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ktrace.analysis.summary import ABSENT_DATA, Summary
from ktrace.model.units import format_ns
from ktrace.presentation import summary_gpu as gpu
from ktrace.presentation.labels import step_source_note
from ktrace.presentation.notes import grouped_notes
from ktrace.presentation.page import Page, Section
from ktrace.presentation.summary_critical_path import critical_path_section
from ktrace.presentation.summary_hardware import collectives_section, efficiency_section, roofline_section
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.presentation.summary_operators import operators_section
from ktrace.presentation.summary_python import python_section
from ktrace.presentation.summary_ranks import load_balance_section, stragglers_section


class LazyDocument(Mapping[str, Any]):
    """A JSON document made when first read (a Mapping: views that print JSON read it like a dict)."""

    def __init__(self, make: Callable[[], Mapping[str, Any]]) -> None:
        self._make = make
        self._made: Mapping[str, Any] | None = None

    def _doc(self) -> Mapping[str, Any]:
        if self._made is None:
            self._made = self._make()
        return self._made

    def __getitem__(self, key: str) -> Any:
        return self._doc()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._doc())

    def __len__(self) -> int:
        return len(self._doc())


def summary_facts(summary: Summary) -> tuple[tuple[str, str], ...]:
    """source, ranks, kernels, job time and steps (per rank on 2+ ranks, and where inferred, how)."""
    phases = summary.phases
    steps = f"{phases.steps}{' per rank' if summary.ranks > 1 else ''}{step_source_note(phases.step_source)}"
    return (
        ("source", summary.source),
        ("ranks", str(summary.ranks)),
        ("kernels", f"{summary.kernels:,}"),
        ("job", format_ns(phases.duration_ns)),
        ("steps", steps),
    )


def summary_sections(summary: Summary, *, by_shape: bool = False) -> tuple[Section, ...]:
    """Every section of the summary, in order (a section the summary has no data for is left out)."""
    found: list[Section | None] = [
        gpu.phases_section(summary),
        *gpu.utilization_sections(summary),
        *gpu.kernel_sections(summary),
        operators_section(summary, by_shape=by_shape),
        python_section(summary.python_profile),
        gpu.latency_section(summary),
        gpu.steps_section(summary),
        *gpu.kernel_mix_sections(summary),
        collectives_section(summary.collectives),
        roofline_section(summary.roofline),
        efficiency_section(summary),
        gpu.counters_section(summary),
        load_balance_section(summary.load_balance),
        stragglers_section(summary.stragglers),
        critical_path_section(summary.critical_path),
        gpu.annotations_section(summary),
    ]
    return tuple(s for s in found if s is not None)


def summary_page(summary: Summary, *, by_shape: bool = False) -> Page:
    """The summary's page: facts, notes (repeats grouped; what the trace lacks flagged absent), sections; its
    document is summary_to_dict(summary). `by_shape` adds the operators by input shape."""
    return Page(
        title=f"ktrace summary of {summary.source}",
        facts=summary_facts(summary),
        sections=summary_sections(summary, by_shape=by_shape),
        notes=grouped_notes(summary.notes, ABSENT_DATA),
        document=LazyDocument(lambda: summary_to_dict(summary)),
    )
