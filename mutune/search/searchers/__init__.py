"""Searchers propose hyperparameters; schedulers decide (Syne Tune's split)."""
from mutune.search.searchers.base import Searcher
from mutune.search.searchers.factory import SEARCHERS, make_searcher
from mutune.search.searchers.simple import FixedSearcher, GridSearcher, RandomSearcher, grid_points
from mutune.search.searchers.tpe import TPESearcher

__all__ = ["Searcher", "RandomSearcher", "GridSearcher", "TPESearcher", "FixedSearcher",
           "make_searcher", "grid_points", "SEARCHERS"]
