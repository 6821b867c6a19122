"""Rule configuration: thresholds from a TOML file and `--set Rule.param=value` overrides.

A rules file names each rule as a table; `enabled` and `severity` are accepted for every rule::

    disable = ["MaxInitializationTime"]      # rules not to run

    [StepOutlier]
    stddev = 5                               # any documented parameter of the rule
    severity = "error"                       # info | warning | error

The same tables may sit under `[rules]` or, in a pyproject.toml, under `[tool.ktrace.rules]`.

A `[gpu_peaks."NAME"]` table overrides a row of the GPU peak table (analysis.gpu_peaks) or adds a GPU: it applies
to every GPU whose name contains NAME (case-insensitive), in TFLOP/s (dense) and TB/s::

    [gpu_peaks."H100"]                       # override: fields left out keep the built-in row's
    bf16 = 700
    [gpu_peaks."MI300X"]                     # a GPU the table lacks: hbm_tbps is needed
    hbm_tbps = 5.3
    bf16 = 1307.4
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ktrace.analysis.gpu_peaks import GpuPeaks, peaks_from_table
from ktrace.analysis.rules.base import SEVERITIES, ParamValue, Rule
from ktrace.model.errors import ExitCode, KtraceError

_RULE_KEYS = ("enabled", "severity")


@dataclass(frozen=True)
class RulesConfig:
    """Which rules run, with which parameters and severities. The empty config means all defaults."""

    params: Mapping[str, Mapping[str, ParamValue]] = field(default_factory=dict)
    """Rule name -> parameter name -> value (only what differs from the defaults)."""
    disabled: frozenset[str] = frozenset()
    severity: Mapping[str, str] = field(default_factory=dict)
    """Rule name -> severity replacing the rule's default."""
    gpu_peaks: Mapping[str, GpuPeaks] = field(default_factory=dict)
    """The rules file's [gpu_peaks."NAME"] rows: NAME -> peaks (gpu_peaks.match_gpu's overrides)."""

    def params_for(self, rule: Rule) -> dict[str, ParamValue]:
        """The rule's defaults merged with this configuration."""
        merged = rule.defaults()
        merged.update(self.params.get(rule.name, {}))
        return merged


def _config_error(message: str) -> KtraceError:
    return KtraceError(message, ExitCode.USAGE)


def _rule_index(rules: Iterable[Rule]) -> dict[str, Rule]:
    return {r.name.lower(): r for r in rules}


def _find_rule(index: Mapping[str, Rule], name: str) -> Rule:
    rule = index.get(name.lower())
    if rule is None:
        close = [r.name for key, r in index.items() if name.lower()[:4] in key]
        hint = f" (did you mean {', '.join(close[:3])}?)" if close else ""
        raise _config_error(f"unknown rule {name!r}{hint}; `ktrace check --list-rules` lists them")
    return rule


def coerce_value(rule: Rule, param: str, value: Any) -> ParamValue:
    """`value` converted to the type of the parameter's default; a clear error when it cannot be."""
    spec = next((p for p in rule.params if p.name == param), None)
    if spec is None:
        names = ", ".join(p.name for p in rule.params) or "none"
        raise _config_error(f"rule {rule.name} has no parameter {param!r} (parameters: {names})")
    default = spec.default
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return value.lower() in ("true", "1", "yes")
            return bool(value)
        if isinstance(default, int):
            as_float = float(value)
            if as_float != int(as_float):
                raise ValueError(value)
            return int(as_float)
        if isinstance(default, float):
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        kind = type(default).__name__
        raise _config_error(f"{rule.name}.{param}: {value!r} is not a valid {kind}") from None


def config_from_mapping(doc: Mapping[str, Any], rules: Iterable[Rule]) -> RulesConfig:
    """Build a RulesConfig from a decoded TOML document, checking every rule and parameter name."""
    tool = doc.get("tool")
    if isinstance(tool, Mapping) and isinstance(tool.get("ktrace"), Mapping):
        doc = tool["ktrace"].get("rules", {})
    elif isinstance(doc.get("rules"), Mapping):
        doc = doc["rules"]
    index = _rule_index(rules)
    params: dict[str, dict[str, ParamValue]] = {}
    severity: dict[str, str] = {}
    disabled: set[str] = set()
    peaks: dict[str, GpuPeaks] = {}
    for key, value in doc.items():
        if key == "gpu_peaks":
            peaks = _gpu_peaks(value)
            continue
        if key == "disable":
            if not isinstance(value, list):
                raise _config_error("`disable` must be a list of rule names")
            disabled.update(_find_rule(index, str(v)).name for v in value)
            continue
        if not isinstance(value, Mapping):
            raise _config_error(f"{key!r} must be a table of parameters, e.g. [{key}] threshold = 1")
        _rule_table(_find_rule(index, key), value, params, severity, disabled)
    return RulesConfig(params=params, disabled=frozenset(disabled), severity=severity, gpu_peaks=peaks)


def _gpu_peaks(tables: Any) -> dict[str, GpuPeaks]:
    """The [gpu_peaks."NAME"] tables as peaks rows (gpu_peaks.peaks_from_table), each checked."""
    if not isinstance(tables, Mapping) or not all(isinstance(t, Mapping) for t in tables.values()):
        raise _config_error('gpu_peaks must hold one table per GPU, e.g. [gpu_peaks."H100"] bf16 = 700')
    try:
        return {str(name): peaks_from_table(str(name), table) for name, table in tables.items()}
    except ValueError as exc:
        raise _config_error(str(exc)) from None


def _rule_table(
    rule: Rule,
    table: Mapping[str, Any],
    params: dict[str, dict[str, ParamValue]],
    severity: dict[str, str],
    disabled: set[str],
) -> None:
    """Read one [Rule] table into params / severity / disabled."""
    for param, raw in table.items():
        if param == "enabled":
            if not raw:
                disabled.add(rule.name)
        elif param == "severity":
            severity[rule.name] = _check_severity(rule, raw)
        else:
            params.setdefault(rule.name, {})[param] = coerce_value(rule, param, raw)


def _check_severity(rule: Rule, value: Any) -> str:
    if value not in SEVERITIES:
        raise _config_error(f"{rule.name}.severity: {value!r} is not one of {', '.join(SEVERITIES)}")
    return str(value)


def load_config(path: str | Path, rules: Iterable[Rule]) -> RulesConfig:
    """Read a rules TOML file (see the module docstring for its shape)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    p = Path(path)
    if not p.is_file():
        raise KtraceError(f"rules file not found: {p}", ExitCode.NOT_FOUND)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _config_error(f"{p}: not valid TOML: {exc}") from None
    return config_from_mapping(doc, rules)


def apply_overrides(config: RulesConfig, assignments: Iterable[str], rules: Iterable[Rule]) -> RulesConfig:
    """Apply `Rule.param=value` strings (the CLI's --set) on top of `config`."""
    index = _rule_index(rules)
    params = {k: dict(v) for k, v in config.params.items()}
    severity = dict(config.severity)
    disabled = set(config.disabled)
    for text in assignments:
        target, sep, raw = text.partition("=")
        rule_name, dot, param = target.strip().partition(".")
        if not sep or not dot or not param:
            raise _config_error(f"--set {text!r}: expected RULE.PARAM=VALUE, e.g. StepOutlier.stddev=5")
        rule = _find_rule(index, rule_name)
        raw = raw.strip()
        if param == "severity":
            severity[rule.name] = _check_severity(rule, raw)
        elif param == "enabled":
            if raw.lower() in ("false", "0", "no"):
                disabled.add(rule.name)
            else:
                disabled.discard(rule.name)
        else:
            params.setdefault(rule.name, {})[param] = coerce_value(rule, param, raw)
    return replace(config, params=params, severity=severity, disabled=frozenset(disabled))
