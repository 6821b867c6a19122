"""The rules engine's data types: Param, Evidence, Finding, RuleResult and Rule (whose check gets (trace, index, params))."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ktrace.analysis.gpu_peaks import GpuPeaks
from ktrace.analysis.index import TraceIndex
from ktrace.model.trace import Trace

Severity = Literal["info", "warning", "error"]
FleetMode = Literal["exact", "per rank"]
"""How a rule runs on the rank-by-rank path (analysis.rules.rank_rules): see Rule.fleet_mode."""
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
"""Severities from least to most severe; `ktrace check --fail-on` compares against this order."""

ParamValue = int | float | str | bool


def severity_rank(severity: str) -> int:
    """Position of `severity` in SEVERITIES (0 = info)."""
    return SEVERITIES.index(severity)


@dataclass(frozen=True)
class Param:
    """One documented, configurable threshold of a rule."""

    name: str
    default: ParamValue
    doc: str


@dataclass(frozen=True)
class Evidence:
    """One thing that made a rule fire: a time range, a kernel, a step, a counter sample, a rank.

    Fields a kind does not have are None. Times are ns since the Unix epoch, like every trace column.
    """

    kind: str
    """"gap", "step", "kernel", "memcpy", "api", "counter", "rank", "health", "range", ..."""
    start_ns: int | None = None
    end_ns: int | None = None
    node: str | None = None
    rank: int | None = None
    device: int | None = None
    stream: int | None = None
    name: str | None = None
    """What the evidence is about (kernel name, API name, what the CPU was doing)."""
    value: float | None = None
    """The measured quantity (duration in ms, utilization %, count); its unit is in the finding's message."""


@dataclass(frozen=True)
class Finding:
    """A verdict of one rule, with its evidence and what to do about it."""

    rule: str
    severity: Severity
    message: str
    recommendation: str
    evidence: tuple[Evidence, ...] = ()
    datapoints: int = 0
    """How many data points the rule looked at to reach this verdict."""
    triggered: int = 0
    """How many of them met the rule's condition."""


@dataclass(frozen=True)
class RuleResult:
    """What one rule did on one trace: its parameters, what it analysed and the findings (may be none)."""

    rule: str
    family: str
    description: str
    params: Mapping[str, ParamValue]
    """The parameters actually used (defaults merged with the configuration)."""
    datapoints: int
    triggered: int
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None
    """Why the rule could not run on this trace (the data it needs is absent), else None."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Small JSON-ready numbers the report plots for this rule (percentiles, histograms, series)."""

    @property
    def fired(self) -> bool:
        """True when the rule produced at least one finding."""
        return bool(self.findings)


@dataclass(frozen=True)
class Outcome:
    """What a rule's check function returns; the engine turns it into a RuleResult."""

    datapoints: int
    triggered: int
    fired: bool
    message: str = ""
    evidence: tuple[Evidence, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    severity: Severity | None = None
    """Overrides the rule's default severity for this finding (e.g. escalation past a second threshold)."""
    extra: tuple[Outcome, ...] = ()
    """Further findings of the same rule (e.g. one per GPU)."""


class Skip(Exception):
    """Raised by a check when the trace lacks the data the rule needs; the message says what is missing."""


CheckFn = Callable[[Trace, TraceIndex, Mapping[str, ParamValue]], Outcome]
"""A rule's check: the trace, its TraceIndex (analysis results shared by every rule) and the rule's parameters."""
PeaksCheckFn = Callable[[Trace, TraceIndex, Mapping[str, ParamValue], Mapping[str, GpuPeaks]], Outcome]
"""A check that also reads the rules file's GPU peaks (RulesConfig.gpu_peaks: name -> peaks)."""


@dataclass(frozen=True)
class Rule:
    """A registered rule: documentation, parameters with defaults, and the check that evaluates it."""

    name: str
    family: str
    """"sagemaker", "timeline", "hardware" or "health"."""
    description: str
    recommendation: str
    params: tuple[Param, ...]
    check: CheckFn
    severity: Severity = "warning"
    """Severity of a finding unless the configuration or the check says otherwise."""
    source: str = ""
    """Where the rule and its defaults come from (anchor tool, reference section)."""
    peaks_check: PeaksCheckFn | None = None
    """The check with the rules file's `[gpu_peaks."NAME"]` rows, for a rule that measures against the GPU's peak
    (run_rules calls it instead of `check`, which is the same with the built-in table alone)."""
    fleet_mode: FleetMode = "per rank"
    """How the rule runs on a many-rank store analysed rank by rank (analysis.rules.rank_rules):
    "exact": its check runs once on inputs reduced exactly from every rank (the same verdict, datapoints and
    findings as on the whole trace in one process); "per rank": its check runs on each rank's own trace and the
    results are added up (datapoints and triggered summed, a job-wide verdict naming the ranks it fired on, then
    each rank's findings named by their rank),
    so a threshold on a share, percentile or count is judged per rank, not on the job's total."""

    def defaults(self) -> dict[str, ParamValue]:
        """Parameter name -> default value."""
        return {p.name: p.default for p in self.params}
