"""ASHA core semantics on synthetic, deterministic learning curves (docs/architecture.md §4)."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA, Decision, bracket_count, rung_milestones


def test_milestones_and_exact_bracket_count():
    assert rung_milestones(1, 3, 243) == [1, 3, 9, 27, 81, 243]
    # float log would say floor(log(243, 3)) = 4 → 5 brackets; the exact answer is 6
    assert math.floor(math.log(243, 3)) == 4
    assert bracket_count(1, 3, 243) == 6
    assert rung_milestones(20, 3, 200) == [20, 60, 180]
    with pytest.raises(SearchError, match="reduction_factor = 1"):
        rung_milestones(1, 1, 10)
    with pytest.raises(SearchError, match="max_t = 5: must be >= grace_period"):
        rung_milestones(10, 3, 5)


@given(r=st.integers(1, 50), eta=st.integers(2, 6), k=st.integers(0, 8),
       extra=st.integers(0, 1000))
def test_bracket_count_is_floor_log_plus_one(r, eta, k, extra):
    max_t = r * eta ** k + min(extra, r * eta ** k * (eta - 1) - 1 if k or eta > 1 else 0)
    ms = rung_milestones(r, eta, max_t)
    assert bracket_count(r, eta, max_t) == k + 1 == len(ms)
    assert all(b == a * eta for a, b in zip(ms, ms[1:]))


def test_top_fraction_continues_ties_favour_the_trial():
    s = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    assert s.on_report("a", 1, 1.0)[0].decision is Decision.CONTINUE   # n=1, k=1
    assert s.on_report("b", 1, 2.0)[0].decision is Decision.STOP       # n=2, k=1, 2nd
    j = s.on_report("c", 1, 1.0)[0]                                   # n=3, k=1, tie best
    assert j.decision is Decision.CONTINUE and j.cutoff == 1.0
    j = s.on_report("d", 1, 0.5)[0]                                   # n=4, k=2
    assert j.decision is Decision.CONTINUE and j.cutoff == 1.0
    assert s.on_report("e", 1, 1.5)[0].decision is Decision.STOP      # n=5, k=2
    assert s.stopped("b") is Decision.STOP and s.stopped("a") is None


def test_mode_max():
    s = ASHA(grace_period=1, reduction_factor=2, max_t=4, mode="max")
    s.on_report("a", 1, 0.5)
    assert s.on_report("b", 1, 0.9)[0].decision is Decision.CONTINUE
    assert s.on_report("c", 1, 0.1)[0].decision is Decision.STOP


def test_report_skipping_milestones_is_judged_at_each_lowest_first():
    s = ASHA(grace_period=2, reduction_factor=2, max_t=16)
    js = s.on_report("a", 9, 0.3)     # jumps past 2, 4 and 8
    assert [j.milestone for j in js] == [2, 4, 8]
    assert all(j.value == 0.3 for j in js)
    assert [j.milestone for j in s.on_report("a", 16, 0.2)] == [16]
    assert s.on_report("b", 3, 0.1)[0].milestone == 2


def test_stop_ends_judging_and_later_reports_raise():
    s = ASHA(grace_period=1, reduction_factor=2, max_t=8)
    s.on_report("a", 1, 0.1)
    js = s.on_report("b", 4, 0.9)
    assert [j.decision for j in js] == [Decision.STOP]   # not judged at 2 and 4
    with pytest.raises(SearchError, match="after it ended"):
        s.on_report("b", 5, 0.1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_ranks_worst_never_cutoff_and_diverges(bad):
    s = ASHA(grace_period=1, reduction_factor=2, max_t=8)
    j = s.on_report("x", 1, bad)[0]
    assert j.decision is Decision.DIVERGED and j.cutoff is None
    # the NaN counts in n: with n=2, k=1; a finite value is best and continues, cutoff finite
    j = s.on_report("a", 1, 5.0)[0]
    assert j.decision is Decision.CONTINUE and j.cutoff == 5.0
    j = s.on_report("b", 1, 6.0)[0]    # n=3, k=1
    assert j.decision is Decision.STOP and j.cutoff == 5.0
    # between milestones: stops at once at its own step
    j = s.on_report("a", 3, bad)[-1]
    assert j.decision is Decision.DIVERGED and j.milestone in (2, 3)


def test_state_roundtrip_is_json_and_continues_identically():
    def feed(s, reports):
        return [(j.trial, j.milestone, j.decision.value) for t, st_, v in reports
                for j in s.on_report(t, st_, v)]
    first = [("a", 1, 0.5), ("b", 1, 0.7), ("c", 2, float("nan")), ("a", 2, 0.4)]
    rest = [("d", 1, 0.2), ("a", 4, 0.3), ("e", 4, 0.1)]
    s1 = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    feed(s1, first)
    s2 = ASHA.from_state(json.loads(json.dumps(s1.state_dict())))
    s3 = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    feed(s3, first)
    assert feed(s2, rest) == feed(s3, rest)
    assert s2.rung_values().keys() == s3.rung_values().keys()


@settings(max_examples=60, deadline=None)
@given(eta=st.integers(2, 4), n=st.integers(1, 40), seed=st.integers(0, 10_000),
       mode=st.sampled_from(["min", "max"]))
def test_decisions_match_a_brute_force_rescan(eta, n, seed, mode):
    """Sorted-list bookkeeping gives the same decisions as rescanning the rung each time."""
    import numpy as np
    rng = np.random.default_rng(seed)
    values = [float(v) for v in rng.integers(0, 6, n)]   # many ties
    s = ASHA(grace_period=1, reduction_factor=eta, max_t=eta ** 3, mode=mode)
    seen: list[float] = []
    for i, v in enumerate(values):
        seen.append(v)
        better = sum((w < v) if mode == "min" else (w > v) for w in seen)
        expect = Decision.CONTINUE if better < max(len(seen) // eta, 1) else Decision.STOP
        assert s.on_report(str(i), 1, v)[0].decision is expect
