"""Ray Tune ``Searcher`` around a mutune searcher (:mod:`mutune.search.searchers`).

Ray asks :meth:`RaySearcher.suggest` for a new trial whenever it could start one. This adapter
proposes the searcher's next point only when a slot is free *and* the scheduler has no paused
trial to promote (Li et al. 2020, Algorithm 2: promotions first, then new trials), and says
``FINISHED`` after ``num_samples`` points. It enforces the concurrency itself: Ray's
``max_concurrent_trials`` (a ``ConcurrencyLimiter``) counts paused trials as live, which would
keep a promotion sweep from starting new trials while others wait at a rung.

Reports reach the searcher (``observe``) and each trial's end reaches it with its status
(``complete``), so model-based searchers (TPE) learn from every rung.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ray.tune.search import Searcher

from mutune.search.schedulers.asha import Decision

__all__ = ["RaySearcher"]


class RaySearcher(Searcher):
    """Propose points from ``searcher``; gate new trials on free slots and promotions.

    Args:
        searcher: a mutune searcher (random, grid, TPE, fixed points), kept as ``proposer``
            (Ray walks ``.searcher`` attributes as wrapped Ray searchers).
        make_point: (index, hparams) → the trial's ``point`` (seed, index, …).
        core: the scheduler core (None: run every trial to max_t), asked for candidates.
        metric, mode: the ranked metric and its direction.
        concurrency: trials running at once at most (paused ones do not count).
        max_t: the step a completed trial reaches.
        resume: points of an interrupted run's unfinished trials (each with its original
            ``key`` and ``restore_from`` checkpoint folder), issued before any new point.
        dormant: key → point of an interrupted run's trials paused at a rung (promotion):
            Ray does not know them; when the core's candidate is one, it is promoted here
            (recorded through ``book``) and issued as a new Ray trial restoring its checkpoint.
        book: the sweep's book (records a dormant trial's promotion).
        gate: the sweep's :class:`~mutune.search.budget.BudgetGate`, or None: asked before
            each new point whether its first rung fits; once it says no, no new trial starts.

    Each proposed point carries ``key``: the Ray trial id for a new trial, the original key
    for a resumed one; the scheduler core and the searcher know trials by that key.
    """

    def __init__(self, searcher: Any, make_point: Callable[[int, dict], dict], *, core: Any,
                 metric: str, mode: str, concurrency: int, max_t: int,
                 resume: list[dict] | None = None, dormant: dict[str, dict] | None = None,
                 book: Any = None, gate: Any = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.proposer, self.make_point, self.core = searcher, make_point, core
        self.concurrency, self.max_t = concurrency, max_t
        self.resume = [dict(p) for p in resume or []]
        self.dormant = {k: dict(p) for k, p in (dormant or {}).items()}
        self.book, self.gate = book, gate
        self.budget_closed = False
        self.live: set[str] = set()
        self.keys: dict[str, str] = {}   # Ray trial id → key

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return True

    @property
    def new_trials_left(self) -> bool:
        """Whether a trial Ray does not know yet may still start (a new point or a resumed
        one; dormant paused trials start only by promotion)."""
        return (not self.proposer.exhausted and not self.budget_closed) or bool(self.resume)

    @property
    def exhausted(self) -> bool:
        """True once every point was proposed (resumed ones included) and no dormant paused
        trial is left to promote or stop."""
        return not self.new_trials_left and not self.dormant

    def finish_dormant(self, key: str, judgement: Any) -> None:
        """The core's ``finish()`` stopped a dormant trial: record it and tell the searcher."""
        self.dormant.pop(key, None)
        self.book.finish_dormant(key, judgement)
        self.proposer.complete(key, "stopped")

    def running(self) -> int:
        """Live trials (by key) not paused at a rung."""
        paused = self.core.paused() if self.core is not None else {}
        return sum(t not in paused for t in self.live)

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.exhausted:
            return Searcher.FINISHED
        if self.running() >= self.concurrency:
            return None
        cand = self.core.candidate() if self.core is not None else None
        if cand is not None and cand.trial in self.dormant:
            point = self.dormant.pop(cand.trial)
            self.book.record_promotion(cand.trial, self.core.promote(cand.trial))
        elif cand is not None:
            return None            # a free slot goes to the promotion first
        elif self.resume:
            point = self.resume.pop(0)
        elif self.proposer.exhausted or self.budget_closed or not self._admitted():
            # only dormant trials left: they start by promotion. With nothing running and no
            # paused trial in Ray, Ray only polls suggest (it never asks the scheduler to
            # choose a trial), so the end of the sweep — finish() — happens here.
            live_paused = [k for k in self.core.paused() if k not in self.dormant]
            if self.running() == 0 and not live_paused:
                for j in self.core.finish():
                    self.finish_dormant(j.trial, j)
                self.book.save_state()
                return Searcher.FINISHED
            return None
        else:
            hp = self.proposer.suggest(trial_id)
            point = {**self.make_point(len(self.proposer.proposed) - 1, hp), "key": trial_id}
        key = self.keys[trial_id] = str(point["key"])
        self.live.add(key)
        return {"point": point}

    def _admitted(self) -> bool:
        """Whether the budget lets a new trial start (always, without a budget); a refusal
        is final for this run."""
        if self.gate is None or self.core is None:
            return True
        if not self.gate.admits(self.gate.estimate_gpu_hours(self.book, self.core.grace_period),
                                f"a new trial at width {self.book.width}"):
            self.budget_closed = True
        return not self.budget_closed

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if self.metric in result and "step" in result:
            self.proposer.observe(self.keys.get(trial_id, trial_id), int(result["step"]),
                                  float(result[self.metric]))

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        key = self.keys.get(trial_id, trial_id)
        self.live.discard(key)
        decision = self.core.stopped(key) if self.core is not None else None
        value = (result or {}).get(self.metric)
        step = int((result or {}).get("step", 0))
        if error:
            status = "failed"
        elif decision is Decision.DIVERGED or (value is not None
                                               and not math.isfinite(float(value))):
            status = "diverged"
        elif decision is Decision.STOP:
            status = "stopped"
        elif step >= self.max_t:
            status = "completed"
        else:
            status = "failed"
        self.proposer.complete(key, status)

    def get_state(self) -> dict:
        return {}   # mutune resumes from its database, not from Ray's experiment snapshot

    def set_state(self, state: dict) -> None:
        return None

    def save(self, checkpoint_path: str) -> None:
        # Ray snapshots searchers into its experiment state; mutune resumes from its own
        # database (the searcher's state_dict), never from that snapshot.
        return None

    def restore(self, checkpoint_path: str) -> None:
        return None
