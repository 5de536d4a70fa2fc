"""The one driver loop: start, report, decide, promote, finish — and tell the searcher.

Every backend — Ray Tune (:mod:`mutune.search.backends.ray_tune`), the simulator
(:mod:`mutune.search.backends.simulated`) and the replay (:mod:`mutune.search.backends.replay`)
— executes what one :class:`SweepDriver` decides, so the scheduler cores and the searchers see
the same calls in the same order under each. Backends only translate: "a slot is free"
becomes :meth:`SweepDriver.next_action`, "the trial reported" :meth:`SweepDriver.report`, "the
trial died" :meth:`SweepDriver.ended`.

Trials belong to **groups**; each group has its own scheduler core (its own rungs) and its own
searcher (today one group per proxy width, or the one target run). On a free slot the driver
takes, in this order (Li et al. 2020, Algorithm 2: promotions before new trials):

1. the promotion candidate of every group's core, highest rung first (the earlier group on
   ties): the paused trial resumes from its checkpoint;
2. an interrupted trial of a resumed sweep (it keeps its key and restores its checkpoint);
3. a new trial from the first group, in the order given, whose searcher still has points and
   that the budget admits (a refusal is final for the sweep);
4. nothing to start, nothing running, nothing promotable: ``finish()`` every core — the trials
   still paused stop — and the sweep is done.

Every report reaches the searcher (``observe``) before the core judges it, the report that
stops a trial included; a trial's end reaches the searcher (``complete``) the moment the driver
knows it — at the judging report, at ``finish()``, or when the backend says it died. With one
slot the searcher's log (:meth:`~mutune.search.searchers.Searcher.state_dict`) is therefore the
same under Ray as in the simulator for the same curves.

Trial keys are the driver's: ``key_of(index)`` of the group (``t0``, ``t1``, … by default);
backends map their own ids to them.
"""
from mutune.search.driver.catch_up import catch_up
from mutune.search.driver.loop import SweepDriver
from mutune.search.driver.types import (EXECUTOR_STATUSES, Action, ActionKind, Admission, Group,
                                        Outcome, TrialState)

__all__ = ["SweepDriver", "Group", "Action", "ActionKind", "Outcome", "Admission", "catch_up",
           "TrialState", "EXECUTOR_STATUSES"]
