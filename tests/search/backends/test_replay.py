"""Replay on synthetic, deterministic curves: simulated clock and recorded order (issue 7)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA, Decision
from mutune.search.best import best_at_rung
from mutune.search.schedulers.hyperband import Hyperband
from mutune.search.backends.replay import (CENSORED_TREATMENT, ReplaySettings, replay,
                                           replay_in_order)

TERMINAL = {"completed", "stopped", "diverged", "censored", "failed"}


def make_curves(n, *, every=1, max_step=9, seed=0, nan_frac=0.0, short_frac=0.0,
                sec_per_step=(0.5, 2.0)):
    """Seeded power-law curves {key: [(step, loss, seconds)]}; some diverge or end early."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        steps = list(range(every, max_step + 1, every))
        if rng.random() < short_frac:
            steps = steps[:int(rng.integers(1, len(steps) + 1))]
        a, b = rng.uniform(0.1, 1.0), rng.uniform(0.5, 2.0)
        vals = [a + b / math.sqrt(s) for s in steps]
        if rng.random() < nan_frac:
            k = int(rng.integers(0, len(vals)))
            vals[k:] = [math.nan] * (len(vals) - k)
        sps = rng.uniform(*sec_per_step)
        out[f"t{i:03d}"] = [(s, v, s * sps) for s, v in zip(steps, vals)]
    return out


def feed_directly(curves, settings):
    """Trial after trial, every report, until the core ends it or max_t: concurrency 1."""
    core = settings.build()
    out = []
    for key, curve in curves.items():
        for step, value, _ in curve:
            js = core.on_report(key, step, value)
            out.extend((j.trial, j.milestone, j.value if math.isfinite(j.value) else None,
                        j.cutoff, j.decision) for j in js)
            if core.stopped(key) or step >= settings.max_t:
                break
    return out, core


def _as_tuples(decisions):
    return [(d.trial, d.milestone, d.value if math.isfinite(d.value) else None, d.cutoff,
             d.decision) for d in decisions]


def test_small_sweep_by_hand_concurrency_two():
    # r=1, η=2, max_t=4: milestones 1, 2, 4. Two workers; a is fast, b slow, c waits.
    curves = {"a": [(1, 1.0, 1.0), (2, 0.8, 2.0), (4, 0.6, 4.0)],
              "b": [(1, 2.0, 3.0), (2, 1.5, 6.0), (4, 1.2, 12.0)],
              "c": [(1, 0.5, 1.0), (2, 0.4, 2.0), (4, 0.3, 4.0)]}
    r = replay(curves, ReplaySettings(grace_period=1, reduction_factor=2, max_t=4),
               concurrency=2)
    # t=1 a@1 continue (n=1); t=2 a@2 continue; t=3 b@1 stop (n=2, k=1) → c starts at 3;
    # t=4 a@4 completes; t=4 c@1 (n=3,k=1) best → continue; t=5 c@2 continue; t=7 c@4.
    got = [(d.trial, d.milestone, d.decision.value, d.time) for d in r.decisions]
    assert got == [("a", 1, "continue", 1.0), ("a", 2, "continue", 2.0),
                   ("b", 1, "stop", 3.0), ("a", 4, "complete", 4.0),
                   ("c", 1, "continue", 4.0), ("c", 2, "continue", 5.0),
                   ("c", 4, "complete", 7.0)]
    assert r.statuses == {"a": "completed", "b": "stopped", "c": "completed"}
    assert r.wall_s == 7.0 and r.device_s == 4.0 + 3.0 + 4.0
    assert r.held_s == {"a": 4.0, "b": 3.0, "c": 4.0}
    assert r.censored == [] and r.missing_data_decisions == 0
    assert r.best.trial == "c" and r.best.milestone == 1   # highest rung with ≥ 3 trials


def test_censored_when_the_replay_needs_steps_the_record_lacks():
    # the original stopped "b" at step 2; a gentler replay (η=4) lets it go on
    curves = {"a": [(1, 1.0, 1.0), (2, 0.9, 2.0), (4, 0.8, 4.0)],
              "b": [(1, 0.9, 1.0), (2, 0.85, 2.0)]}
    r = replay(curves, ReplaySettings(grace_period=1, reduction_factor=4, max_t=4))
    assert r.statuses == {"a": "completed", "b": "censored"}
    assert r.missing_data_decisions == 1
    assert r.censored[0] == ("b", 2, 4)     # last step 2, needed step 4 (max_t)
    assert r.treatment == CENSORED_TREATMENT and "last recorded report" in r.treatment
    assert r.held_s["b"] == 2.0
    r2 = replay(curves, ReplaySettings(grace_period=1, reduction_factor=4, max_t=4),
                failed=["b"])
    assert r2.statuses["b"] == "failed" and r2.missing_data_decisions == 0


def test_nan_between_milestones_diverges_at_that_report():
    curves = {"a": [(1, 1.0, 1.0), (2, 0.9, 2.0), (3, math.nan, 3.0), (4, 0.5, 4.0)]}
    r = replay(curves, ReplaySettings(grace_period=1, reduction_factor=2, max_t=4))
    assert r.statuses == {"a": "diverged"}
    assert r.decisions[-1].decision is Decision.DIVERGED and r.decisions[-1].milestone == 3
    assert r.held_s["a"] == 3.0 and r.best is not None


def test_replay_with_smaller_max_t_completes_early_and_in_order_equals_sim_at_c1():
    curves = make_curves(12, max_step=16, seed=3)
    s = ReplaySettings(grace_period=1, reduction_factor=2, max_t=8)
    r = replay(curves, s)
    assert set(r.statuses.values()) <= {"completed", "stopped"}
    assert all(r.held_s[k] <= curves[k][7][2] + 1e-12 for k in curves)
    reports = [(0, k, st_, v, sec) for k, c in curves.items() for st_, v, sec in c]
    o = replay_in_order(reports, s)
    assert _as_tuples(o.decisions) == _as_tuples(r.decisions)
    assert o.statuses == r.statuses and o.held_s == r.held_s and o.wall_s is None


def test_bad_inputs_raise_with_the_rule():
    s = ReplaySettings(grace_period=1, reduction_factor=2, max_t=4)
    with pytest.raises(SearchError, match="concurrency = 0"):
        replay({}, s, concurrency=0)
    with pytest.raises(SearchError, match="strictly increasing"):
        replay({"a": [(2, 1.0, 1.0), (1, 1.0, 2.0)]}, s)
    with pytest.raises(SearchError, match="kind = 'pbt'"):
        replay({}, ReplaySettings(grace_period=1, reduction_factor=2, max_t=4, kind="pbt"))
    with pytest.raises(SearchError, match="step order"):
        replay_in_order([(1, "a", 2, 1.0), (2, "a", 1, 1.0)], s)
    assert replay({}, s).statuses == {} and replay({}, s).best is None


@pytest.mark.parametrize("curve, match", [
    ([(1, 1.0)], r"trial 'a', report 0: \(1, 1\.0\): each report must be \(step, value, seconds\)"),
    ([(1, 1.0, 1.0), 5], r"trial 'a', report 1: 5: each report must be"),
    ([(6.7, 1.0, 1.0)], r"trial 'a': report 0 step = 6\.7 \(float\): must be an integer"),
    ([(1, "0.5", 1.0)], r"trial 'a': report 0 value = '0\.5' \(str\): must be a real number"),
    ([(1, None, 1.0)], r"trial 'a': report 0 value = None"),
    ([(1, True, 1.0)], r"trial 'a': report 0 value = True \(bool\)"),
])
def test_malformed_recorded_curves_raise_naming_the_trial_the_report_and_the_field(curve,
                                                                                  match):
    s = ReplaySettings(grace_period=1, reduction_factor=2, max_t=4)
    with pytest.raises(SearchError, match=match):
        replay({"a": curve}, s)


@pytest.mark.parametrize("report, match", [
    ((1, "a", 2), r"report 0: \(1, 'a', 2\): must be \(seq, trial, step, value\)"),
    ((1, "a", 6.7, 0.5), r"trial 'a': step = 6\.7 \(float\): must be an integer"),
    ((1, "a", 2, "0.5"), r"trial 'a': value = '0\.5' \(str\)"),
])
def test_malformed_recorded_reports_raise_in_recorded_order(report, match):
    s = ReplaySettings(grace_period=1, reduction_factor=2, max_t=4)
    with pytest.raises(SearchError, match=match):
        replay_in_order([report], s)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), eta=st.integers(2, 4), r=st.integers(1, 3), k=st.integers(0, 3),
       every=st.integers(1, 4), seed=st.integers(0, 10_000), mode=st.sampled_from(["min", "max"]),
       kind=st.sampled_from(["asha", "hyperband"]))
def test_concurrency_one_in_arrival_order_equals_feeding_the_core(n, eta, r, k, every, seed,
                                                                  mode, kind):
    max_t = r * eta ** k
    curves = make_curves(n, every=every, max_step=max_t + every, seed=seed, nan_frac=0.1,
                         short_frac=0.2)
    s = ReplaySettings(grace_period=r, reduction_factor=eta, max_t=max_t, mode=mode,
                       kind=kind, seed=seed)
    direct, core = feed_directly(curves, s)
    sim = replay(curves, s, concurrency=1)
    assert _as_tuples(sim.decisions) == direct
    assert sim.scheduler.rung_values() == core.rung_values()
    times = [d.time for d in sim.decisions]
    assert times == sorted(times)
    # recorded order = trial after trial gives the same again
    reports = [(i, key, st_, v, sec) for i, (key, c) in enumerate(
        (key, c) for key, c in curves.items()) for st_, v, sec in c]
    assert _as_tuples(replay_in_order(reports, s).decisions) == direct


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), eta=st.integers(2, 4), k=st.integers(0, 4),
       conc=st.integers(1, 12), seed=st.integers(0, 10_000),
       kind=st.sampled_from(["asha", "hyperband"]))
def test_every_trial_ends_terminal_and_accounting_adds_up(n, eta, k, conc, seed, kind):
    max_t = eta ** k
    curves = make_curves(n, max_step=max_t, seed=seed, nan_frac=0.1, short_frac=0.3)
    s = ReplaySettings(grace_period=1, reduction_factor=eta, max_t=max_t, kind=kind, seed=seed)
    res = replay(curves, s, concurrency=conc)
    assert set(res.statuses) == set(curves)
    assert set(res.statuses.values()) <= TERMINAL
    assert math.isclose(res.device_s, sum(res.held_s.values()))
    assert res.wall_s <= res.device_s + 1e-9
    assert res.wall_s >= res.device_s / conc - 1e-9
    assert len(res.censored) == sum(v == "censored" for v in res.statuses.values())
    # at each rung at most max(⌊n/η⌋, 1) … of the trials judged there continue — in the
    # asynchronous rule a trial judged early may continue while later ones stop; the
    # invariant that holds is: a trial continues only if it was in the top then.
    for d in res.decisions:
        if d.decision is Decision.CONTINUE and d.cutoff is not None:
            assert d.value <= d.cutoff
    # a stopped trial never shows up later
    ended = {}
    for i, d in enumerate(res.decisions):
        assert d.trial not in ended
        if d.decision is not Decision.CONTINUE:
            ended[d.trial] = i
    if res.best is not None:
        assert res.best == best_at_rung(res.scheduler.rung_values(), min_trials=3)
    assert isinstance(res.scheduler, ASHA if kind == "asha" else Hyperband)


def test_more_workers_shorten_the_wall_not_the_sum():
    curves = make_curves(60, max_step=27, seed=1)
    s = ReplaySettings(grace_period=1, reduction_factor=3, max_t=27)
    one = replay(curves, s, concurrency=1)
    many = replay(curves, s, concurrency=8)
    assert many.wall_s < one.wall_s / 3
    assert one.wall_s == pytest.approx(one.device_s)
