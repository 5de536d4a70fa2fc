"""Ray Tune's ``Searcher`` face of the driver loop: translation, no decisions."""
from __future__ import annotations

from typing import Any

from ray.tune.search import Searcher

from mutune.search.driver import ActionKind, SweepDriver

__all__ = ["RaySearcher"]


class RaySearcher(Searcher):
    """Propose what the driver starts."""

    def __init__(self, driver: SweepDriver, book: Any, *, metric: str, mode: str) -> None:
        super().__init__(metric=metric, mode=mode)
        self.driver, self.book = driver, book
        self.keys: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "driver": None, "book": None}

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return True

    def suggest(self, trial_id: str) -> dict | str | None:
        act = self.driver.next_action(can_start=True, can_promote_live=False,
                                      can_finish_live=False)
        if act.kind is ActionKind.WAIT:
            return None
        if act.kind is ActionKind.DONE:
            for j in act.finished:            # only dormant trials can be left here
                self.book.finish_dormant(j.trial, j)
            if act.finished:
                self.book.save_state()
            return Searcher.FINISHED
        if act.kind is ActionKind.PROMOTE:   # a dormant trial: Ray starts it anew
            self.book.record_promotion(act.key, act.judgement)
        self.keys[trial_id] = act.key
        # the steps the trial may not hold a report back at (mutune/search/trial/report_hold.py)
        return {"point": act.point,
                "decide_at": self.driver.group_of(act.key).decision_steps()}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        return None    # the scheduler adapter hands every report to the driver

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        return None    # the book tells the driver how Ray ended a trial

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
