"""Rule configuration: TOML files, --set overrides, and the errors users see for bad names and values."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ktrace.analysis.rules as rules_package
from ktrace.analysis.rules.base import Rule
from ktrace.analysis.rules.config import RulesConfig, apply_overrides, load_config
from ktrace.analysis.rules.engine import RULE_ORDER, all_rules, run_rules
from ktrace.model.errors import ExitCode, KtraceError

RULES = all_rules()


def rules_defined_in_modules() -> dict[str, str]:
    """Rule name -> module, for every Rule object defined at the top level of any module of the rules package
    (found by walking the package, not through RULE_ORDER or the modules' RULES tuples)."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(rules_package.__path__):
        module = importlib.import_module(f"{rules_package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Rule):
                found[value.name] = module.__name__
    return found


def test_every_rule_defined_in_a_module_runs_in_report_order():
    """A rule written in a module but missing from RULE_ORDER (or from its module's RULES) would never run."""
    defined = rules_defined_in_modules()
    assert len(defined) >= 20
    assert len(set(RULE_ORDER)) == len(RULE_ORDER)
    assert sorted(defined) == sorted(RULE_ORDER), f"defined but not in RULE_ORDER: {set(defined) - set(RULE_ORDER)}"
    assert [r.name for r in RULES] == list(RULE_ORDER)


def test_every_rule_is_documented():
    for rule in RULES:
        assert rule.description and rule.recommendation and rule.source
        for p in rule.params:
            assert p.doc, f"{rule.name}.{p.name} has no doc"


def test_sagemaker_defaults_match_the_reference():
    d = {r.name: r.defaults() for r in RULES}
    assert d["StepOutlier"]["stddev"] == 3.0 and d["StepOutlier"]["n_outliers"] == 10
    assert d["LowGPUUtilization"]["threshold_p95"] == 70.0 and d["LowGPUUtilization"]["threshold_p5"] == 10.0
    assert d["CPUBottleneck"]["threshold"] == 50.0 and d["CPUBottleneck"]["cpu_threshold"] == 90.0
    assert d["IOBottleneck"]["io_threshold"] == 50.0 and d["GPUMemoryIncrease"]["increase"] == 5.0
    assert d["GPUMemoryIncrease"]["window"] == 10 and d["LoadBalancing"]["threshold"] == 0.5
    assert d["MaxInitializationTime"]["threshold"] == 20.0 and d["GPUGaps"]["gap_ms"] == 500.0
    assert d["Dataloader"]["min_threshold"] == 70.0 and d["Dataloader"]["max_threshold"] == 200.0


def test_toml_file(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text(
        'disable = ["MaxInitializationTime"]\n[StepOutlier]\nstddev = 5\nseverity = "error"\n'
        "[gpugaps]\ngap_ms = 50\nenabled = true\n",
        encoding="utf-8",
    )
    config = load_config(path, RULES)
    assert config.params == {"StepOutlier": {"stddev": 5.0}, "GPUGaps": {"gap_ms": 50.0}}
    assert config.disabled == {"MaxInitializationTime"} and config.severity == {"StepOutlier": "error"}


def test_pyproject_section(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.ktrace.rules.FP32Matmul]\nmin_time_pct = 1\n", encoding="utf-8")
    assert load_config(path, RULES).params == {"FP32Matmul": {"min_time_pct": 1.0}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[NoSuchRule]\nx = 1\n", "unknown rule 'NoSuchRule'"),
        ("[StepOutlier]\nsigma = 1\n", "has no parameter 'sigma'"),
        ("[StepOutlier]\nn_outliers = 2.5\n", "not a valid int"),
        ("[StepOutlier]\nseverity = 'fatal'\n", "not one of info, warning, error"),
        ("[StepOutlier\n", "not valid TOML"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(KtraceError, match=message) as err:
        load_config(path, RULES)
    assert err.value.exit_code == ExitCode.USAGE


def test_missing_file():
    with pytest.raises(KtraceError) as err:
        load_config("/nonexistent/rules.toml", RULES)
    assert err.value.exit_code == ExitCode.NOT_FOUND


def test_set_overrides_and_severity(synthetic_trace):
    config = apply_overrides(
        RulesConfig(), ["PageableMemcpy.severity=error", "FP32Matmul.enabled=false", "GPUGaps.gap_ms=1e9"], RULES
    )
    report = run_rules(synthetic_trace, config)
    assert "FP32Matmul" not in {r.rule for r in report.results}
    assert report.result("PageableMemcpy").findings[0].severity == "error"
    assert not report.result("GPUGaps").fired and report.result("GPUGaps").params["gap_ms"] == 1e9
    with pytest.raises(KtraceError, match="expected RULE.PARAM=VALUE"):
        apply_overrides(RulesConfig(), ["GPUGaps=1"], RULES)
