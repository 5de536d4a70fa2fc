"""Searchers propose hyperparameters; schedulers decide (Syne Tune's split).

One contract (:class:`Searcher`, :mod:`.base`); model-free searchers (:mod:`.simple`:
fixed points, seeded random draws, the grid); Optuna's TPE (:mod:`.tpe`, Optuna imported only
when it is built); the search space and per-trial seeds (:mod:`.space`).
"""
from mutune.search.searchers.base import Searcher
from mutune.search.searchers.factory import SEARCHERS, make_searcher
from mutune.search.searchers.simple import FixedSearcher, GridSearcher, RandomSearcher, grid_points
from mutune.search.searchers.tpe import TPESearcher

__all__ = ["Searcher", "RandomSearcher", "GridSearcher", "TPESearcher", "FixedSearcher",
           "make_searcher", "grid_points", "SEARCHERS"]
