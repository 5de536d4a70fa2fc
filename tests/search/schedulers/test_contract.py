"""One contract, every scheduler core (docs/architecture.md §4, §9): ASHA stopping and promotion,
and
Hyperband with either, driven by the same simulated executor on synthetic deterministic curves."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA, Decision, bracket_count, rung_milestones
from mutune.search.best import best_at_rung
from mutune.search.schedulers.factory import make_scheduler, scheduler_from_state
from mutune.search.backends.simulated import feed_events, power_law_curve, simulate

CORES = [("asha", "stopping"), ("asha", "promotion"), ("hyperband", "stopping"),
         ("hyperband", "promotion")]
TERMINAL = {"completed", "stopped", "diverged"}


def _core(kind, variant, r, eta, max_t, mode="min", seed=0):
    return make_scheduler(kind, variant=variant, grace_period=r, reduction_factor=eta,
                          max_t=max_t, mode=mode, seed=seed)


def _noisy(seed, nan_every=0):
    base = power_law_curve(seed)

    def f(i, s):
        if nan_every and i % nan_every == nan_every - 1 and s >= 2:
            return math.nan if i % 2 else math.inf
        return base(i, s)
    return f


@settings(max_examples=120, deadline=None)
@given(core=st.sampled_from(CORES), eta=st.sampled_from([2, 3, 4]), r=st.integers(1, 4),
       k=st.integers(0, 3), extra=st.integers(0, 5), concurrency=st.integers(1, 6),
       n=st.integers(1, 30), report_every=st.integers(1, 7), seed=st.integers(0, 2**16),
       nan_every=st.sampled_from([0, 3, 7]), mode=st.sampled_from(["min", "max"]))
def test_every_sweep_terminates_with_every_trial_terminal(core, eta, r, k, extra, concurrency,
                                                          n, report_every, seed, nan_every,
                                                          mode):
    max_t = r * eta ** k + extra
    c = _core(*core, r, eta, max_t, mode=mode, seed=seed)
    res = simulate(c, _noisy(seed, nan_every), num_samples=n, concurrency=concurrency,
                   max_t=max_t, report_every=report_every)
    assert set(res.statuses.values()) <= TERMINAL and len(res.statuses) == n
    assert c.paused() == {}
    assert res.max_running <= concurrency
    for key, status in res.statuses.items():
        if status == "completed":
            assert res.last_step[key] >= max_t
        if status == "stopped" and core[1] == "promotion":
            assert res.last_step[key] < max_t        # stopped while paused at a rung
    # NaN/inf: never a cutoff; every non-finite judgement is DIVERGED, and such trials diverge
    for j in res.decisions:
        assert j.cutoff is None or math.isfinite(j.cutoff)
        if not math.isfinite(j.value):
            assert j.decision in (Decision.DIVERGED,)
            assert res.statuses[j.trial] == "diverged"
    # every trial that reported a non-finite value ended diverged at that report
    for key, step, value in res.reports:
        if not math.isfinite(value):
            assert res.statuses[key] == "diverged" and res.last_step[key] == step


@pytest.mark.parametrize("kind, variant", CORES)
def test_mode_max_mirrors_mode_min(kind, variant):
    """Negating every value and flipping the mode gives the same decisions."""
    f = _noisy(11)
    a = simulate(_core(kind, variant, 1, 3, 27, "min", 5), f, num_samples=60, concurrency=3,
                 max_t=27, report_every=2)
    b = simulate(_core(kind, variant, 1, 3, 27, "max", 5), lambda i, s: -f(i, s),
                 num_samples=60, concurrency=3, max_t=27, report_every=2)
    assert a.statuses == b.statuses
    assert [(j.trial, j.milestone, j.decision) for j in a.decisions] == \
           [(j.trial, j.milestone, j.decision) for j in b.decisions]
    assert [j.cutoff for j in a.decisions] == [None if j.cutoff is None else -j.cutoff
                                               for j in b.decisions]
    assert "stopped" in a.statuses.values() and "completed" in a.statuses.values()


@pytest.mark.parametrize("mode", ["min", "max"])
def test_mode_keeps_the_better_direction(mode):
    """In min mode the low curves go on; in max mode the high ones (asha, stopping)."""
    values = [0.1 * (i + 1) for i in range(9)]
    res = simulate(_core("asha", "stopping", 1, 3, 9, mode), lambda i, s: values[i],
                   num_samples=9, concurrency=1, max_t=9)
    done = {k for k, v in res.statuses.items() if v == "completed"}
    # arrival order is ascending; min mode: every newcomer is worst → only t0 survives;
    # max mode: every newcomer is best → all survive rung 1 (it is the top of its rung).
    assert done == ({"t0"} if mode == "min" else {f"t{i}" for i in range(9)})


@pytest.mark.parametrize("kind, variant", CORES)
def test_report_jumping_past_a_milestone_is_judged_at_its_first_report_past_it(kind,
                                                                             variant):
    c = _core(kind, variant, 2, 2, 32)
    res = simulate(c, power_law_curve(3), num_samples=12, concurrency=2, max_t=32,
                   report_every=5)   # reports at 5, 10, 15, …: never on a milestone
    first_past: dict[tuple[str, int], float] = {}
    for key, step, value in res.reports:
        for m in rung_milestones(2, 2, 32):
            if step >= m and (key, m) not in first_past:
                first_past[(key, m)] = value
    judged = [j for j in res.decisions if j.decision is not Decision.PROMOTE]
    assert judged
    for j in judged:
        if j.decision is Decision.STOP and (j.trial, j.milestone) not in first_past:
            continue
        assert j.value == first_past[(j.trial, j.milestone)]
    for m, vals in c.rung_values().items():
        for key, v in vals.items():
            assert v == first_past[(key, m)]


@pytest.mark.parametrize("kind, variant", CORES)
def test_resumed_from_state_makes_the_same_decisions(kind, variant):
    c = _core(kind, variant, 1, 3, 27, seed=9)
    res = simulate(c, _noisy(4, 7), num_samples=25, concurrency=3, max_t=27, report_every=2)
    for cut in (1, len(res.events) // 3, 2 * len(res.events) // 3):
        a = _core(kind, variant, 1, 3, 27, seed=9)
        head = feed_events(a, res.events[:cut])
        b = scheduler_from_state(json.loads(json.dumps(a.state_dict())))
        assert type(b) is type(a) and b.state_dict() == a.state_dict()
        assert head + feed_events(b, res.events[cut:]) == res.decisions


def test_state_loader_rejects_unknown_kinds():
    with pytest.raises(SearchError, match="kind = 'pbt'"):
        scheduler_from_state({"kind": "pbt", "version": 1})
    with pytest.raises(SearchError, match="variant = 'async'"):
        make_scheduler("asha", variant="async", grace_period=1, reduction_factor=2, max_t=4)


@settings(max_examples=200, deadline=None)
@given(r=st.integers(1, 10**6), eta=st.integers(2, 10), max_t=st.integers(1, 10**12))
def test_bracket_count_equals_integer_floor_log_plus_one(r, eta, max_t):
    if max_t < r:
        with pytest.raises(SearchError, match="max_t"):
            bracket_count(r, eta, max_t)
        return
    # exact ⌊log_η(max_t / r)⌋: the largest s with r·η^s ≤ max_t, by integer search
    s = 0
    while r * eta ** (s + 1) <= max_t:
        s += 1
    assert bracket_count(r, eta, max_t) == s + 1
    assert bracket_count(r, eta, r * eta ** s) == s + 1          # boundary exactly on a power


def test_float_log_would_miscount_exact_powers():
    cases = [(1, 3, 243), (1, 10, 1000), (1, 5, 125), (3, 3, 3 ** 6)]
    assert any(math.floor(math.log(t / r, e)) + 1 != len(rung_milestones(r, e, t))
               for r, e, t in cases)
    assert [bracket_count(r, e, t) for r, e, t in cases] == [6, 4, 4, 6]


def test_best_trial_scope_last_vs_best_so_far_at_equal_budget():
    rungs = {10: {"a": 0.50, "b": 0.45, "c": 0.60}, 30: {"a": 0.30, "b": 0.35, "c": 0.32},
             90: {"a": 0.05}}
    curves = {"a": [(10, 0.5), (20, 0.40), (30, 0.30)],
              "b": [(10, 0.45), (20, 0.20), (30, 0.35)],   # best before the rung, then worse
              "c": [(10, 0.6), (20, 0.5), (31, 0.32)]}
    last = best_at_rung(rungs, mode="min", scope="last")
    assert (last.trial, last.milestone, last.value) == ("a", 30, 0.30)   # not the 1-trial top
    bsf = best_at_rung(rungs, mode="min", scope="best-so-far", curves=curves)
    assert (bsf.trial, bsf.milestone, bsf.value) == ("b", 30, 0.20)
    with pytest.raises(SearchError, match="needs the curve"):
        best_at_rung(rungs, scope="best-so-far")
    with pytest.raises(SearchError, match="scope = 'all'"):
        best_at_rung(rungs, scope="all")
    # a report past the milestone (c at 31) counts: it is the report c was judged with
    mx = best_at_rung({30: {"a": 0.3, "b": 0.35, "c": 0.32}}, mode="max", scope="best-so-far",
                      curves=curves)
    assert (mx.trial, mx.value) == ("c", 0.6)


def test_hyperband_promotion_promotes_in_brackets_and_finishes_clean():
    c = _core("hyperband", "promotion", 1, 2, 8, seed=1)
    res = simulate(c, power_law_curve(2), num_samples=40, concurrency=4, max_t=8)
    promos = [j for j in res.decisions if j.decision is Decision.PROMOTE]
    assert promos and all(j.milestone in c.milestones_of(j.trial) for j in promos)
    assert set(res.statuses.values()) <= TERMINAL
    assert np.isfinite([j.value for j in promos]).all()


# -- every rule, every core ---------------------------------------------------------------------

def _rung(core, trial: str, milestone: int) -> dict[str, float]:
    """The values recorded at ``milestone`` in ``trial``'s own rungs (its bracket's)."""
    if hasattr(core, "bracket_rung_values"):
        return core.bracket_rung_values()[core.bracket_of(trial)][milestone]
    return core.rung_values()[milestone]


def _better(values: dict[str, float], v: float, mode: str) -> int:
    return sum(1 for x in values.values() if math.isfinite(x) and (x < v if mode == "min"
                                                                      else x > v))


def _continuous(seed):
    """Curves without ties: every trial's value differs at every step."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.1, 1.0, 500), rng.uniform(0.5, 2.0, 500)
    return lambda i, s: float(a[i] + b[i] / math.sqrt(s))


@settings(max_examples=60, deadline=None)
@given(core=st.sampled_from(CORES), eta=st.sampled_from([2, 3]), r=st.integers(1, 3),
       k=st.integers(1, 3), concurrency=st.integers(1, 5), n=st.integers(1, 40),
       report_every=st.integers(1, 4), seed=st.integers(0, 2**16),
       mode=st.sampled_from(["min", "max"]))
def test_every_decision_follows_the_rule_of_its_core(core, eta, r, k, concurrency, n,
                                                      report_every, seed, mode):
    """Replaying the driver's calls one by one: every CONTINUE is inside the rung's top
    fraction when made (max(⌊n/η⌋, 1) stopping, ⌊n/η⌋ promotion) and every STOP outside; every
    PROMOTE is from the top ⌊n/η⌋ of its rung at that moment; a pause is at the lowest rung
    the trial is outside of, else at the highest it crossed; the milestones a trial is judged
    at increase; a trial reaching max_t is COMPLETE, never stopped; nothing stays paused."""
    max_t = r * eta ** k
    res = simulate(_core(*core, r, eta, max_t, mode=mode, seed=seed), _continuous(seed),
                   num_samples=n, concurrency=concurrency, max_t=max_t,
                   report_every=report_every)
    c = _core(*core, r, eta, max_t, mode=mode, seed=seed)
    promotion = core[1] == "promotion"
    top = (lambda m: m // eta) if promotion else (lambda m: max(m // eta, 1))
    last_judged: dict[str, int] = {}
    for ev in res.events:
        if ev[0] == "promote":
            m = c.paused()[ev[1]]
            vals = _rung(c, ev[1], m)
            assert _better(vals, vals[ev[1]], mode) < len(vals) // eta
            c.promote(ev[1])
            continue
        if ev[0] == "finish":
            for j in c.finish():
                assert j.decision is Decision.STOP and j.trial in res.statuses
            continue
        _, key, step, value = ev
        js = c.on_report(key, step, value)
        for i, j in enumerate(js):
            assert j.milestone > last_judged.get(key, 0)          # rungs increase
            last_judged[key] = j.milestone
            vals = _rung(c, key, j.milestone)
            inside = _better(vals, j.value, mode) < top(len(vals))
            if j.decision is Decision.CONTINUE:
                assert inside
            elif j.decision is Decision.STOP:
                assert not inside
            elif j.decision is Decision.PAUSE:
                assert i == len(js) - 1                 # nothing is judged past a pause
                crossed = [m for m in c.milestones_of(key) if m <= step]
                assert not inside or j.milestone == max(crossed)
            elif j.decision is Decision.COMPLETE:
                assert step >= max_t
        if step >= max_t and not any(j.decision is Decision.DIVERGED for j in js):
            assert c.completed(key) and c.stopped(key) is None
    assert c.paused() == {}
    for key, status in res.statuses.items():
        assert (status == "completed") == (res.last_step[key] >= max_t)


def test_asha_a_trial_that_trains_the_full_budget_is_completed_never_stopped():
    # ASHA(r 1, η 2, max_t 2): max_t is itself a rung. b trains both steps; at rung 2 it is
    # behind a, but it already trained the full budget: completed (and keeps its checkpoints).
    s = ASHA(grace_period=1, reduction_factor=2, max_t=2)
    s.on_report("a", 1, 1.0)
    s.on_report("b", 1, 0.5)
    s.on_report("a", 2, 1.0)
    (j,) = s.on_report("b", 2, 2.0)
    assert j.decision is Decision.COMPLETE and j.cutoff == 1.0
    assert s.completed("b") and s.stopped("b") is None and s.ended("b") is Decision.COMPLETE
    res = simulate(ASHA(grace_period=1, reduction_factor=2, max_t=2),
                   lambda i, st: [[1.0, 1.0], [0.5, 2.0]][i][st - 1], num_samples=2,
                   concurrency=2, max_t=2)
    assert res.statuses == {"t0": "completed", "t1": "completed"}


@pytest.mark.parametrize("kind, variant", CORES)
def test_a_report_after_a_trial_completed_raises(kind, variant):
    c = _core(kind, variant, 1, 2, 4)
    c.on_report("a", 4, 0.5)            # straight to max_t: completed
    assert c.completed("a")
    with pytest.raises(SearchError, match="'a' reported at step 5 after it ended"):
        c.on_report("a", 5, 0.4)


BAD_VALUES = [("'0.5'", "0.5"), ("'nan'", "nan"), ("None", None), ("True", True),
              ("[0.5]", [0.5]), ("array", np.array([0.5]))]


@pytest.mark.parametrize("kind, variant", CORES)
@pytest.mark.parametrize("shown, bad", BAD_VALUES)
def test_bad_metric_values_raise_naming_the_trial_the_field_and_the_value(kind, variant,
                                                                          shown, bad):
    c = _core(kind, variant, 1, 2, 8)
    with pytest.raises(SearchError, match=r"trial 'x': value = .*: must be a real number"):
        c.on_report("x", 1, bad)
    assert c.rung_values()[1] == {}                            # nothing recorded


@pytest.mark.parametrize("kind, variant", CORES)
@pytest.mark.parametrize("bad", [6.7, "6", None, True, 0, -1, math.nan])
def test_bad_steps_raise_naming_the_trial_the_field_and_the_value(kind, variant, bad):
    c = _core(kind, variant, 1, 2, 8)
    with pytest.raises(SearchError, match=r"trial 'x': step = "):
        c.on_report("x", bad, 0.5)


@pytest.mark.parametrize("kind, variant", CORES)
def test_python_and_numpy_numbers_are_accepted(kind, variant):
    c = _core(kind, variant, 1, 2, 8)
    c.on_report("a", np.int64(1), np.float32(0.5))
    c2 = _core(kind, variant, 1, 2, 8)
    c2.on_report("a", 1.0, 1)                                  # an integral float step
    if kind == "asha":                 # Hyperband may put "a" in a bracket starting later
        assert c.rung_values()[1] == {"a": 0.5} and c2.rung_values()[1] == {"a": 1.0}


def test_a_tensor_value_is_refused():
    torch = pytest.importorskip("torch")
    c = _core("asha", "stopping", 1, 2, 8)
    with pytest.raises(SearchError, match=r"value = tensor\(0\.5000\) \(Tensor\)"):
        c.on_report("x", 1, torch.tensor(0.5))
