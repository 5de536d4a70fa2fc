"""Search: schedulers decide, searchers propose, backends execute — joined by one driver loop."""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ASHA", "PromotionASHA", "Hyperband", "Scheduler", "Decision", "Judgement",
           "rung_milestones", "bracket_count", "BestTrial", "best_at_rung", "make_scheduler",
           "scheduler_from_state", "SweepDriver", "Group"]

_LAZY = {**dict.fromkeys(["ASHA", "PromotionASHA", "Hyperband", "Scheduler", "Decision",
                          "Judgement", "rung_milestones", "bracket_count", "make_scheduler",
                          "scheduler_from_state"], "mutune.search.schedulers"),
         "BestTrial": "mutune.search.best", "best_at_rung": "mutune.search.best",
         "SweepDriver": "mutune.search.driver", "Group": "mutune.search.driver"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mutune.search' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
