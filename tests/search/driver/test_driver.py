"""The driver loop on its own: the order it fills a free slot in, what each report means, what a
backend may and may not ask of it, groups routed to their own cores, and what the searcher is
told (docs/architecture.md §4.3)."""
from __future__ import annotations

import math

import pytest

from mutune.errors import SearchError
from mutune.search.driver import ActionKind, Group, SweepDriver
from mutune.search.schedulers import ASHA, Decision, PromotionASHA
from mutune.search.searchers.simple import FixedSearcher


class _Told(FixedSearcher):
    """Fixed points that keep every report and end they are told in their log."""

    def _observe(self, key, step, value):
        return True

    def _complete(self, key, status):
        return True


def _group(name, core, n, max_t=8):
    return Group(name, _Told([{"lr": 0.1 * (i + 1)} for i in range(n)]), core, max_t,
                 key_of=lambda i: f"{name}-t{i}")


def test_each_trial_reports_to_the_core_of_its_own_group():
    a, b = ASHA(grace_period=1, reduction_factor=2, max_t=8), \
        ASHA(grace_period=2, reduction_factor=2, max_t=8)
    d = SweepDriver([_group("w16", a, 2), _group("w32", b, 2)], concurrency=4)
    keys = [d.next_action().key for _ in range(4)]
    assert keys == ["w16-t0", "w16-t1", "w32-t0", "w32-t1"]   # groups in the order given
    assert d.next_action().kind is ActionKind.WAIT            # 4 running: no slot
    d.report("w16-t0", 2, 0.5)
    d.report("w32-t0", 2, 0.4)
    log = d.groups["w16"].searcher.state_dict()["events"]
    assert log[-1] == ["observe", "w16-t0", 2, 0.5]             # observed before judged
    assert set(a.rung_values()[1]) == {"w16-t0"} and set(a.rung_values()[2]) == {"w16-t0"}
    assert set(b.rung_values()[2]) == {"w32-t0"} and "w16-t0" not in b.rung_values()[2]
    assert d.group_of("w32-t0").core is b


def test_promotions_go_first_highest_rung_across_groups_then_new_trials():
    a = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)
    b = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)
    d = SweepDriver([_group("a", a, 3), _group("b", b, 3)], concurrency=2)
    for key in (d.next_action().key, d.next_action().key):     # a-t0, a-t1
        assert d.report(key, 1, 0.5 if key == "a-t0" else 0.4).action == "pause"
    act = d.next_action()                                      # a-t1 is top of 2 (k = 1)
    assert (act.kind, act.key, act.judgement.decision) == (ActionKind.PROMOTE, "a-t1",
                                                           Decision.PROMOTE)
    assert d.report("a-t1", 2, 0.3).action == "pause"          # alone at rung 2: k = 0
    assert d.next_action().key == "a-t2"                       # nothing promotable: new
    # a backend that cannot resume paused trials it holds waits instead of skipping ahead
    d.report("a-t2", 1, 0.1)                                   # rung 1: n = 3, k = 1
    assert a.candidate().trial == "a-t2"
    assert d.next_action(can_promote_live=False).kind is ActionKind.WAIT
    assert d.next_action(can_promote_live=lambda k: k != "a-t2").kind is ActionKind.WAIT
    assert d.next_action().key == "a-t2"


def test_the_end_stops_paused_trials_in_every_group_and_tells_their_searchers():
    a = PromotionASHA(grace_period=1, reduction_factor=3, max_t=9)
    ga = _group("a", a, 1)
    d = SweepDriver([ga, _group("b", ASHA(grace_period=1, reduction_factor=3, max_t=9), 1)],
                    concurrency=1)
    assert d.next_action().key == "a-t0"
    assert d.report("a-t0", 1, 0.5).action == "pause"          # alone: never promotable
    assert d.next_action().key == "b-t0"
    out = d.report("b-t0", 9, 0.4)
    assert (out.action, out.status) == ("end", "completed")
    assert [j.decision for j in out.judgements] == [Decision.COMPLETE] * 3
    # a backend that cannot stop the paused trial it holds must not end the sweep
    assert d.next_action(can_finish_live=False).kind is ActionKind.WAIT
    end = d.next_action()
    assert end.kind is ActionKind.DONE and [j.trial for j in end.finished] == ["a-t0"]
    assert d.status("a-t0")[0] == "stopped" and "never promoted" in d.status("a-t0")[1]
    assert ga.searcher.state_dict()["events"][-1] == ["complete", "a-t0", "stopped"]
    assert d.next_action().kind is ActionKind.DONE and not d.next_action().finished


def test_reports_are_checked_and_named_by_the_metric():
    d = SweepDriver([_group("g", ASHA(grace_period=1, reduction_factor=2, max_t=8), 1)],
                    concurrency=1, metric="val_loss")
    key = d.next_action().key
    with pytest.raises(SearchError, match=r"trial 'g-t0': val_loss = '0\.5' \(str\)"):
        d.report(key, 1, "0.5")
    with pytest.raises(SearchError, match=r"trial 'g-t0': step = 1\.5"):
        d.report(key, 1.5, 0.5)
    with pytest.raises(SearchError, match="not a trial of this sweep"):
        d.report("nobody", 1, 0.5)
    out = d.report(key, 3, math.nan)
    assert (out.action, out.status, out.reason) == ("end", "diverged", "non-finite val_loss")
    with pytest.raises(SearchError, match="while ended"):
        d.report(key, 4, 0.5)


def test_a_backend_ends_what_the_driver_did_not_decide():
    g = _group("g", ASHA(grace_period=2, reduction_factor=2, max_t=8), 2)
    d = SweepDriver([g], concurrency=2)
    k0, k1 = d.next_action().key, d.next_action().key
    assert d.ended(k0, "failed", "CUDA error") is True
    assert d.ended(k0, "failed") is False                     # already ended
    with pytest.raises(SearchError, match="may end a trial only as one of"):
        d.ended(k1, "stopped")
    assert d.running == 1 and d.status(k0) == ("failed", "CUDA error")
    assert ["complete", k0, "failed"] in g.searcher.state_dict()["events"]


def test_the_target_group_runs_to_max_t_without_a_core():
    d = SweepDriver([Group("target", FixedSearcher([{"lr": 0.01}]), None, 6)], concurrency=1)
    key = d.next_action().key
    assert d.report(key, 3, 0.5).action == "continue"
    out = d.report(key, 6, 0.4)
    assert (out.action, out.status, out.judgements) == ("end", "completed", [])


def test_interrupted_trials_continue_first_and_dormant_ones_start_only_by_promotion():
    core = PromotionASHA(grace_period=1, reduction_factor=2, max_t=8)
    for key, v in (("g-t0", 0.9), ("g-t1", 0.2)):
        core.on_report(key, 1, v)                              # both paused at rung 1
    searcher = FixedSearcher([{"lr": 0.1}] * 4)
    for i in range(3):
        searcher.suggest(f"g-t{i}")
    d = SweepDriver([Group("g", searcher, core, 8, key_of=lambda i: f"g-t{i}")],
                    concurrency=1,
                    resume={"g": [("g-t2", {"hparams": {"lr": 0.1}, "restore_from": "/ckpt"})]},
                    dormant={"g": {"g-t0": {"hparams": {"lr": 0.1}},
                                   "g-t1": {"hparams": {"lr": 0.1}}}})
    act = d.next_action()
    assert (act.kind, act.key, act.live) == (ActionKind.PROMOTE, "g-t1", False)  # promotion 1st
    assert d.report("g-t1", 2, 0.1).action == "pause"
    act = d.next_action()
    assert (act.kind, act.key, act.point["restore_from"]) == (ActionKind.START, "g-t2", "/ckpt")


def test_a_follow_up_group_joins_when_its_group_is_done_and_goes_ahead_of_the_rest():
    a = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    b = ASHA(grace_period=1, reduction_factor=2, max_t=4)
    d = SweepDriver([_group("w32", a, 2), _group("w16", b, 3)], concurrency=2)
    joined = []

    def design(name):
        joined.append(name)
        return [_group(f"c{name}", None, 2, max_t=4)]
    d.when_done("w32", design)
    d.when_done("w16", design)
    assert [d.next_action().key for _ in range(2)] == ["w32-t0", "w32-t1"]
    assert not d.group_done("w32")               # exhausted, but its trials still run
    d.report("w32-t0", 4, 0.5)                   # runs to max_t: completed
    assert not d.group_done("w32") and d.next_action().key == "w16-t0"
    d.report("w32-t1", 1, 0.9)                   # rung 1 of 2: the worse half stops
    assert d.group_done("w32") and not joined
    act = d.next_action()                        # the follow-up joins at the free slot
    assert joined == ["w32"] and (act.key, act.group) == ("cw32-t0", "cw32")
    assert d.order == ["cw32", "w32", "w16"] and d.given == ("w32", "w16")
    d.report("cw32-t0", 4, 0.4)
    assert d.next_action().key == "cw32-t1"      # ahead of w16's new trials
    for key in ("w16-t0", "cw32-t1"):
        d.report(key, 4, 0.3)
    assert [d.next_action().key for _ in range(2)] == ["w16-t1", "w16-t2"]
    for key in ("w16-t1", "w16-t2"):
        d.report(key, 4, 0.3)
    assert d.next_action().key == "cw16-t0"      # w16 done: its follow-up joins behind cw32
    assert d.order == ["cw32", "cw16", "w32", "w16"] and joined == ["w32", "w16"]
    d.report("cw16-t0", 4, 0.2)
    assert d.next_action().key == "cw16-t1"
    d.report("cw16-t1", 4, 0.2)
    assert d.next_action().kind is ActionKind.DONE
    assert all(t.state == "ended" for t in d.trials.values()) and len(d.trials) == 9
    assert d.groups["cw16"].searcher.state_dict()["events"][-1][0] == "complete"


def test_a_follow_up_may_watch_the_groups_it_adds_and_only_those():
    """A hook may watch the groups it returns (the gate's round after the designs): that
    group's own hook runs once it is done, before the sweep can finish. Watching a group the
    hook did not add is refused."""
    d = SweepDriver([_group("w", None, 1, max_t=2)], concurrency=1)
    calls = []

    def design(name):
        calls.append(name)
        d.when_done("c0w", gate_round)
        return [_group("c0w", None, 1, max_t=2)]

    def gate_round(name):
        calls.append(name)
        return [_group("c1w", None, 2, max_t=2)]
    d.when_done("w", design)
    keys = []
    while (act := d.next_action()).kind is not ActionKind.DONE:
        keys.append(act.key)
        d.report(act.key, 2, 0.5)
    assert keys == ["w-t0", "c0w-t0", "c1w-t0", "c1w-t1"] and calls == ["w", "c0w"]
    assert d.order == ["c0w", "c1w", "w"]

    d = SweepDriver([_group("w", None, 1, max_t=2)], concurrency=1)

    def stray(name):
        d.when_done("elsewhere", lambda n: [])
        return [_group("c0w", None, 1, max_t=2)]
    d.when_done("w", stray)
    d.report(d.next_action().key, 2, 0.5)
    with pytest.raises(SearchError, match="watched a group it did not add"):
        d.next_action()


def test_joining_is_refused_for_a_taken_name_an_unknown_group_or_a_finished_sweep():
    d = SweepDriver([_group("a", None, 1, max_t=1)], concurrency=1)
    with pytest.raises(SearchError, match="exists"):
        d.add_group(_group("a", None, 1))
    with pytest.raises(SearchError, match="unknown group 'b'"):
        d.when_done("b", lambda name: [])
    with pytest.raises(SearchError, match="unknown group 'b'"):
        d.group_done("b")
    d.report(d.next_action().key, 1, 0.5)
    assert d.next_action().kind is ActionKind.DONE
    with pytest.raises(SearchError, match="the sweep is done"):
        d.add_group(_group("b", None, 1))
