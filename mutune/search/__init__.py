"""Search: the ASHA scheduler core, its Ray Tune adapter, search spaces and the trial loop.

Import the submodules you need (``mutune.search.asha`` is pure Python; ``tuner``, ``book`` and
``ray_adapter`` import Ray).
"""
from mutune.search.asha import ASHA, Decision, Judgement, bracket_count, rung_milestones
from mutune.search.best import BestTrial, best_at_rung

__all__ = ["ASHA", "Decision", "Judgement", "rung_milestones", "bracket_count", "BestTrial",
           "best_at_rung"]
