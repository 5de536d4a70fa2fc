"""Hyperband core (Li et al. 2018 §3, asynchronous brackets as in ASHA) on synthetic curves."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA, Decision, bracket_count
from mutune.search.schedulers.hyperband import Hyperband, bracket_sizes


def _curve(seed: int, steps: list[int]) -> list[float]:
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.1, 1.0), rng.uniform(0.5, 2.0)
    return [a + b / math.sqrt(s) for s in steps]


def test_brackets_are_ashas_with_growing_grace_period_exact_s_max():
    hb = Hyperband(grace_period=1, reduction_factor=3, max_t=243)
    assert hb.s_max == 5 == bracket_count(1, 3, 243) - 1   # float log would give 4
    assert [b.grace_period for b in hb.brackets] == [1, 3, 9, 27, 81, 243]
    assert [b.milestones[0] for b in hb.brackets] == [1, 3, 9, 27, 81, 243]
    assert all(b.milestones[-1] == 243 for b in hb.brackets)
    # classic n_{s'} = ceil((s_max+1) η^{s'} / (s'+1)), s' = s_max - s
    assert bracket_sizes(1, 3, 243) == [243, 98, 41, 18, 9, 6]  # 6·3^5/6, ⌈6·81/5⌉, …
    with pytest.raises(SearchError, match="reduction_factor = 1"):
        Hyperband(grace_period=1, reduction_factor=1, max_t=9)
    with pytest.raises(SearchError, match="mode"):
        Hyperband(grace_period=1, reduction_factor=2, max_t=9, mode="best")


def test_assignment_is_seeded_deterministic_and_follows_cycle_counts():
    a = Hyperband(grace_period=1, reduction_factor=2, max_t=8, seed=7)
    b = Hyperband(grace_period=1, reduction_factor=2, max_t=8, seed=7)
    c = Hyperband(grace_period=1, reduction_factor=2, max_t=8, seed=8)
    keys = [f"t{i}" for i in range(200)]
    sa = [a.assign(k) for k in keys]
    assert sa == [b.assign(k) for k in keys]
    assert sa != [c.assign(k) for k in keys]
    sizes = bracket_sizes(1, 2, 8)
    cycle = sum(sizes)
    first = sa[:cycle]
    assert [first.count(s) for s in range(len(sizes))] == sizes
    assert a.assign("t0") == sa[0]   # assignment is sticky


def test_report_goes_to_its_bracket_and_rung_values_merge_by_milestone():
    hb = Hyperband(grace_period=1, reduction_factor=2, max_t=8, seed=0)
    for i in range(30):
        key = f"t{i}"
        ms = hb.milestones_of(key)
        for step in range(1, 9):
            js = hb.on_report(key, step, 1.0 / (i + 1) + 1.0 / step)
            assert all(j.milestone in ms for j in js)
            if hb.stopped(key):
                break
    merged = hb.rung_values()
    per = hb.bracket_rung_values()
    for m, vals in merged.items():
        assert vals == {k: v for b in per for k, v in b.get(m, {}).items()}
    assert hb.stopped("unknown") is None


def test_nan_diverges_in_its_bracket():
    hb = Hyperband(grace_period=1, reduction_factor=2, max_t=8)
    hb.on_report("a", 8, 0.5)
    j = hb.on_report("b", 8, math.nan)
    assert j[0].decision is Decision.DIVERGED and j[0].cutoff is None
    assert hb.stopped("b") is Decision.DIVERGED


@settings(max_examples=40, deadline=None)
@given(eta=st.integers(2, 4), r=st.integers(1, 3), k=st.integers(0, 3),
       n=st.integers(1, 40), seed=st.integers(0, 2**16), cut=st.integers(0, 60))
def test_state_roundtrip_continues_identically(eta, r, k, n, seed, cut):
    max_t = r * eta ** k
    steps = list(range(1, max_t + 1))
    feed = [(f"t{i}", s, v) for i in range(n) for s, v in zip(steps, _curve(seed + i, steps))]
    a = Hyperband(grace_period=r, reduction_factor=eta, max_t=max_t, seed=seed)
    cut = min(cut * len(feed) // 60, len(feed))

    def run(hb, items):
        out = []
        for key, s, v in items:
            if hb.stopped(key) is None:
                js = hb.on_report(key, s, v)
                out.extend((j.trial, j.milestone, j.decision) for j in js)
        return out

    head = run(a, feed[:cut])
    state = json.loads(json.dumps(a.state_dict()))
    b = Hyperband.from_state(state)
    assert b.state_dict() == a.state_dict()
    assert run(a, feed[cut:]) == run(b, feed[cut:])
    assert all(m in a.milestones for _, m, _ in head)
    assert a.rung_values() == b.rung_values()


def test_from_state_rejects_other_kinds_and_edited_assignments():
    a = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    with pytest.raises(SearchError, match="kind 'asha'"):
        Hyperband.from_state(a.state_dict())
    hb = Hyperband(grace_period=1, reduction_factor=2, max_t=4, seed=3)
    s0 = hb.assign("x")
    state = hb.state_dict()
    state["assigned"] = [["x", (s0 + 1) % (hb.s_max + 1)]]
    with pytest.raises(SearchError, match="disagrees with seed 3"):
        Hyperband.from_state(state)
