"""Search: scheduler cores (ASHA stopping and promotion, Hyperband), searchers, a simulated
executor, the Ray Tune adapters, and the trial loop with checkpoints.

Import the submodules you need (``asha``, ``promotion``, ``hyperband``, ``schedulers``,
``simulate`` and ``best`` are pure Python; ``searchers`` imports Optuna for TPE only when asked;
``tuner``, ``book``, ``ray_adapter`` and ``ray_searcher`` import Ray).
"""
from mutune.search.schedulers.asha import ASHA, Decision, Judgement, bracket_count, rung_milestones
from mutune.search.best import BestTrial, best_at_rung
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.schedulers.factory import make_scheduler, scheduler_from_state

__all__ = ["ASHA", "PromotionASHA", "Decision", "Judgement", "rung_milestones", "bracket_count",
           "BestTrial", "best_at_rung", "make_scheduler", "scheduler_from_state"]
