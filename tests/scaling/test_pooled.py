"""Pooling per-width optima under μP (random effects, DerSimonian & Laird 1986)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mutune.scaling.pooled import pool_optima


def _iv(v, se):
    return (v * math.exp(-1.959964 * se), v * math.exp(1.959964 * se))


def test_agreeing_widths_pool_to_a_narrower_interval_than_any_one():
    opt = [0.0312, 0.0269, 0.0285]
    ivs = [_iv(v, 0.2) for v in opt]
    p = pool_optima(opt, ivs)
    assert p.tau == 0.0 and p.n_widths == 3
    assert p.standard_error == pytest.approx(0.2 / math.sqrt(3))
    assert p.value == pytest.approx(math.exp(np.mean(np.log(opt))))
    lo, hi = p.interval
    assert math.log(hi / lo) < min(math.log(b / a) for a, b in ivs)


def test_widths_that_disagree_beyond_their_errors_widen_the_interval():
    tight = [0.01, 0.02, 0.04]
    p = pool_optima(tight, [_iv(v, 0.05) for v in tight])
    assert p.tau > 0.3
    lo, hi = p.interval
    assert lo < 0.01 and hi > 0.04     # the next width may lie as far as the widths scatter


def test_where_widths_share_one_optimum_the_interval_covers_it_as_often_as_it_claims():
    rng = np.random.default_rng(0)
    hits, n = 0, 2000
    for _ in range(n):
        se = rng.uniform(0.1, 0.3, size=6)
        logs = -3.5 + rng.normal(0, se)
        p = pool_optima(list(np.exp(logs[:5])), [_iv(math.exp(y), s)
                                                 for y, s in zip(logs[:5], se[:5])])
        hits += p.interval[0] <= math.exp(-3.5) <= p.interval[1]
    assert 0.93 <= hits / n <= 0.99


@pytest.mark.parametrize("opt, ivs, msg", [
    ([0.1], [(0.05, 0.2)], "≥ 2"),
    ([0.1, 0.2], [(0.05, 0.2)], "intervals"),
    ([0.1, 0.5], [(0.05, 0.2), (0.1, 0.4)], "must lie in"),
    ([0.1, -0.2], [(0.05, 0.2), (0.1, 0.4)], "finite and > 0"),
    ([0.1, 0.2], [(0.05, 0.2), (0.2, 0.2)], "low < high"),
])
def test_bad_input_is_refused(opt, ivs, msg):
    with pytest.raises(ValueError, match=msg):
        pool_optima(opt, ivs)
