"""The utilization figure past MAX_SERIES curves: the least busy ones, and a title that says how many of how many."""

from __future__ import annotations

from types import SimpleNamespace

from ktrace.analysis.dashboard import UtilizationSeries
from ktrace.presentation.report_dashboard import MAX_SERIES, _utilization


def _curves(n: int) -> tuple[UtilizationSeries, ...]:
    return tuple(UtilizationSeries(f"n/rank{r}/GPU0", "timeline", (0.0, 1.0), (90.0, 90.0 - r % 50)) for r in range(n))


def test_many_curves_keep_the_least_busy_and_say_so() -> None:
    """64 ranks: the old figure drew ranks 0-31 and dropped 32-63 unsaid, a slow rank among them."""
    curves = _curves(64)
    (figure,) = _utilization(SimpleNamespace(utilization=curves, utilization_bin_ms=1.0))  # type: ignore[arg-type]
    labels = [s["label"] for s in figure.data["series"]]
    assert len(labels) == MAX_SERIES and f"the {MAX_SERIES} least busy of 64 curves" in figure.title
    assert "n/rank49/GPU0" in labels and "n/rank0/GPU0" not in labels  # rank 49 is the least busy
    assert labels == sorted(labels, key=lambda label: int(label.split("rank")[1].split("/")[0]))  # their order


def test_few_curves_are_all_drawn_under_the_plain_title() -> None:
    (figure,) = _utilization(SimpleNamespace(utilization=_curves(8), utilization_bin_ms=1.0))  # type: ignore[arg-type]
    assert len(figure.data["series"]) == 8 and "least busy" not in figure.title
