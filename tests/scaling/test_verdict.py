"""Each health verdict is reached by the case it names, in the documented precedence."""
import math

import pytest

from mutune.scaling import TransferRule, VERDICTS, rule_verdict


def _rule(slope, interval, *, n=5, residual=0.05):
    widths = tuple(64.0 * 2 ** k for k in range(n))
    return TransferRule("lr", -6.0, slope, widths, tuple(1e-3 for _ in widths),
                        slope_interval=interval, residual_scale=residual)


@pytest.mark.parametrize("rule, kwargs, name, phrase", [
    (_rule(0.01, (-0.05, 0.07)), dict(parametrization="mup"), "stable", "inside ±0.1"),
    (_rule(-0.5, (-0.62, -0.38)), dict(parametrization="mup"), "drifting",
     "b = -0.500 with 95 % interval [-0.620, -0.380]"),
    (_rule(0.0, (-0.5, 0.5)), dict(parametrization="mup"), "noisy", "4×tolerance"),
    (_rule(0.0, (-0.1, 0.1), residual=1.5), dict(parametrization="mup"), "noisy",
     "residual scale 1.5"),
    (_rule(0.0, (-0.08, 0.18)), dict(parametrization="mup"), "noisy", "straddles"),
    # an interval that excludes 0 is drift under μP, however close to 0 or wide it is
    (_rule(0.1, (0.02, 0.18)), dict(parametrization="mup"), "drifting", "excludes 0"),
    (_rule(-0.5, (-0.95, -0.05)), dict(parametrization="mup"), "drifting", "extrapolated"),
    (_rule(0.0, (-0.05, 0.05)), dict(parametrization="mup", edge="high"),
     "edge", "upper bound"),
    (_rule(0.0, (math.nan, math.nan), n=2), dict(parametrization="mup"), "too_few_sizes",
     "2 proxy size(s)"),
    (_rule(-0.9, (-1.0, -0.8)), dict(parametrization="sp"), "sp_corrected",
     "b = -0.900"),
    # the 4-sample sweep: every width fell back to its best trial, the same point
    (_rule(0.0, (0.0, 0.0)), dict(parametrization="mup",
                                  fallback="width 64: 4 finite trials: need ≥ 5"),
     "fallback", "need ≥ 5"),
    # identical optima without intervals: a zero-width interval is never "stable"
    (_rule(0.0, (-0.0, 0.0), residual=0.0), dict(parametrization="mup"), "noisy",
     "zero width"),
])
def test_each_verdict_by_its_case(rule, kwargs, name, phrase):
    v = rule_verdict(rule, **kwargs)
    assert v.name == name and v.name in VERDICTS
    assert phrase in v.reason


def test_precedence_and_advice():
    # too few sizes beats edge beats noisy; edge advice says which side
    v = rule_verdict(_rule(0.0, (-2.0, 2.0), n=2), parametrization="mup", edge="unknown")
    assert v.name == "too_few_sizes" and "add a proxy width" in v.advice
    v = rule_verdict(_rule(0.0, (-2.0, 2.0)), parametrization="sp", edge="low")
    assert v.name == "edge" and "downwards" in v.advice
    v = rule_verdict(_rule(-0.9, (-3.0, 1.0)), parametrization="sp")
    assert v.name == "noisy" and "seeds" in v.advice
    assert rule_verdict(_rule(0.0, (-0.05, 0.05), n=2),
                        parametrization="mup").name == "too_few_sizes"
    # a fallback beats edge: a best trial's "edge" says nothing
    v = rule_verdict(_rule(0.0, (-0.05, 0.05)), parametrization="mup", edge="unknown",
                     fallback="width 64: too few trials")
    assert v.name == "fallback" and "more samples" in v.advice


def test_argument_errors():
    with pytest.raises(ValueError, match="parametrization = 'ntk'"):
        rule_verdict(_rule(0, (-0.1, 0.1)), parametrization="ntk")
    with pytest.raises(ValueError, match="tolerance = 0"):
        rule_verdict(_rule(0, (-0.1, 0.1)), parametrization="mup", tolerance=0)
