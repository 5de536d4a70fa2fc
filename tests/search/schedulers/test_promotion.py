"""Promotion ASHA (Li et al. 2020, Algorithm 2) on synthetic, deterministic curves."""
from __future__ import annotations

import json
import math

import pytest

from mutune.errors import SearchError
from mutune.search.schedulers.asha import Decision
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.backends.simulated import feed_events, simulate


def _flat(values):
    """Trial i reports values[i] at every step (a flat curve)."""
    return lambda i, step: values[i]


def test_hand_worked_sweep_pauses_promotes_and_stops_the_rest():
    # η = 2, rungs 1, 2, 4; one worker; promotable = top ⌊n/η⌋ of the rung. By hand:
    # t0 (0.5): alone at rung 1 (k = 0) → pauses, not promotable → t1 starts.
    # t1 (0.3): best of 2 at rung 1 (k = 1) → promoted; alone at rung 2 → paused → t2.
    # t2 (0.9): 3rd of 3 at rung 1 (k = 1) → not promotable → t3 starts.
    # t3 (0.1): best of 4 at rung 1 (k = 2) → promoted; best of 2 at rung 2 → promoted →
    #   completes at max_t 4. End: t0, t1 (rung 2, 2nd of 2) and t2 are stopped by finish().
    core = PromotionASHA(grace_period=1, reduction_factor=2, max_t=4)
    res = simulate(core, _flat([0.5, 0.3, 0.9, 0.1]), num_samples=4, concurrency=1, max_t=4)
    assert res.statuses == {"t0": "stopped", "t1": "stopped", "t2": "stopped",
                            "t3": "completed"}
    assert core.promotions() == [("t1", 1), ("t3", 1), ("t3", 2)]
    assert core.paused() == {}
    final = [j for j in res.decisions if j.trial == "t2"]
    assert [(j.milestone, j.decision) for j in final] == [(1, Decision.PAUSE),
                                                          (1, Decision.STOP)]
    assert final[-1].cutoff == 0.3          # k = 2 of {0.1, 0.3, 0.5, 0.9}
    assert [j.decision for j in res.decisions if j.trial == "t3"][-1] is Decision.COMPLETE
    assert res.last_step == {"t0": 1, "t1": 2, "t2": 1, "t3": 4}


def test_a_lone_first_arrival_is_not_promoted():
    # Li et al. 2020, Algorithm 2: promotable only from the top ⌊n/η⌋ — the first (and
    # worst) trial at a rung cannot ride to the top rung because it arrived first.
    core = PromotionASHA(grace_period=1, reduction_factor=3, max_t=9)
    assert [j.decision for j in core.on_report("worst", 1, 0.9)] == [Decision.PAUSE]
    assert core.candidate() is None                        # ⌊1/3⌋ = 0
    with pytest.raises(SearchError, match="not in the top"):
        core.promote("worst")
    core.on_report("b", 1, 0.5)
    assert core.candidate() is None                        # ⌊2/3⌋ = 0
    core.on_report("c", 1, 0.4)
    assert core.candidate().trial == "c"                   # ⌊3/3⌋ = 1: the best one


def test_candidate_scans_rungs_top_down_and_ties_go_to_the_earlier_pause():
    core = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)
    core.on_report("a", 1, 0.5)                          # rung 1, n = 1: k = 0
    core.on_report("b", 1, 0.4)                          # n = 2, k = 1: b is on top
    core.promote("b")
    core.on_report("b", 2, 0.4)                          # paused at rung 2 (n = 1)
    core.on_report("c", 1, 0.3)                          # n = 3, k = 1: c on top
    core.promote("c")
    core.on_report("c", 2, 0.3)                          # rung 2: n = 2, k = 1: c on top
    core.on_report("d", 1, 0.2)                          # rung 1: n = 4, k = 2: d on top
    c = core.candidate()
    assert (c.trial, c.milestone, c.decision) == ("c", 2, Decision.PROMOTE)  # higher rung
    assert core.candidate() == c                         # pure: asking changes nothing
    core.promote("c")
    assert core.candidate().trial == "d"
    # ties: paused trials with the same value at the same rung → the earlier pause first
    core2 = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)
    for t in ("x", "y", "z", "w"):
        core2.on_report(t, 1, 0.5)
    assert core2.candidate().trial == "x"
    core2.promote("x")
    assert core2.candidate().trial == "y"               # n = 4, k = 2, ties favour y
    core2.promote("y")
    assert core2.candidate() is not None                # ties favour the trial: z too
    with pytest.raises(SearchError, match="not paused"):
        core2.promote("x")


def test_promotable_iff_in_top_fraction_itself_included():
    core = PromotionASHA(grace_period=1, reduction_factor=3, max_t=9)
    for t, v in (("a", 0.1), ("b", 0.2), ("c", 0.3)):
        core.on_report(t, 1, v)
    assert core.candidate().trial == "a"                # k = ⌊3/3⌋ = 1
    core.promote("a")
    assert core.candidate() is None                     # b is 2nd of 3: outside
    with pytest.raises(SearchError, match="not in the top"):
        core.promote("b")
    for t, v in (("d", 0.9), ("e", 0.8), ("f", 0.7)):
        core.on_report(t, 1, v)
    assert core.candidate().trial == "b"                # n = 6, k = 2: a and b


def test_report_past_milestones_pauses_at_the_lowest_rung_it_is_outside():
    core = PromotionASHA(grace_period=2, reduction_factor=2, max_t=16)   # rungs 2, 4, 8, 16
    core.on_report("b", 2, 0.5)
    core.on_report("c", 2, 0.6)
    js = core.on_report("a", 9, 0.3)      # rung 2: 1st of 3 (k = 1); rung 4: alone (k = 0)
    assert [(j.milestone, j.decision) for j in js] == [(2, Decision.CONTINUE),
                                                       (4, Decision.PAUSE)]
    assert core.paused()["a"] == 4
    assert core.rung_values()[8] == {"a": 0.3}            # recorded at every rung ≤ 9
    with pytest.raises(SearchError, match="while paused"):
        core.on_report("a", 10, 0.2)
    # inside at every rung crossed → pauses at the highest
    core2 = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)   # rungs 1, 2, 4, 8
    core2.on_report("p", 1, 0.9)
    core2.on_report("q", 1, 0.8)
    core2.promote("q")
    core2.on_report("q", 2, 0.8)
    js = core2.on_report("r", 3, 0.1)     # rung 1: 1st of 3; rung 2: 1st of 2 (k = 1)
    assert [(j.milestone, j.decision) for j in js] == [(1, Decision.CONTINUE),
                                                       (2, Decision.PAUSE)]
    core2.promote("r")
    js = core2.on_report("r", 8, 0.05)
    assert [(j.milestone, j.decision) for j in js] == [(4, Decision.COMPLETE),
                                                       (8, Decision.COMPLETE)]
    assert core2.completed("r") and "r" not in core2.paused()
    with pytest.raises(SearchError, match="after it ended"):
        core2.on_report("r", 9, 0.05)


def test_max_t_not_a_milestone_promoted_top_rung_runs_to_max_t():
    core = PromotionASHA(grace_period=2, reduction_factor=3, max_t=20)   # rungs 2, 6, 18
    res = simulate(core, lambda i, s: 1.0 / (i + 1) + 1.0 / s, num_samples=40,
                   concurrency=2, max_t=20, report_every=2)
    completed = [k for k, v in res.statuses.items() if v == "completed"]
    assert completed and all(res.last_step[k] == 20 for k in completed)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_diverges_at_once_counts_in_n_never_a_cutoff(bad):
    core = PromotionASHA(grace_period=1, reduction_factor=2, max_t=4)
    js = core.on_report("x", 3, bad)
    assert [(j.milestone, j.decision, j.cutoff) for j in js] == [(1, Decision.DIVERGED, None)]
    assert core.stopped("x") is Decision.DIVERGED and core.paused() == {}
    core.on_report("a", 1, 0.5)                 # n = 2, k = 1: a is best
    core.on_report("b", 1, 0.7)                 # n = 3, k = 1
    c = core.candidate()
    assert c.trial == "a" and c.cutoff == 0.5
    with pytest.raises(SearchError, match="after it ended"):
        core.on_report("x", 4, 0.1)


def test_state_roundtrip_mid_sweep_makes_the_same_decisions():
    curve = lambda i, s: (0.3 + 0.1 * ((7 * i) % 5)) + 2.0 / s   # noqa: E731
    core = PromotionASHA(grace_period=1, reduction_factor=3, max_t=27)
    res = simulate(core, curve, num_samples=12, concurrency=3, max_t=27, report_every=2)
    for cut in (0, 5, len(res.events) // 2, len(res.events) - 1):
        a = PromotionASHA(grace_period=1, reduction_factor=3, max_t=27)
        head = feed_events(a, res.events[:cut])
        state = json.loads(json.dumps(a.state_dict()))
        b = PromotionASHA.from_state(state)
        assert b.state_dict() == a.state_dict()
        tail = feed_events(b, res.events[cut:])
        assert head + tail == res.decisions
    with pytest.raises(SearchError, match="as asha-promotion"):
        PromotionASHA.from_state({**core.state_dict(), "kind": "asha"})
