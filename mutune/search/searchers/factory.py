"""The searcher a config names, seeded from the sweep seed."""
from __future__ import annotations

from mutune.config import SearchConfig
from mutune.errors import SearchError
from mutune.search.searchers.base import Searcher
from mutune.search.searchers.simple import GridSearcher, RandomSearcher
from mutune.search.searchers.tpe import TPESearcher

__all__ = ["make_searcher", "SEARCHERS"]

SEARCHERS = ("random", "grid", "tpe")


def make_searcher(search: SearchConfig, sweep_seed: int, width_index: int) -> Searcher:
    """The searcher ``search.searcher`` names, seeded from the sweep seed.

    Raises:
        SearchError: an unknown searcher name."""
    name = search.searcher
    if name == "random":
        return RandomSearcher(search, sweep_seed, width_index)
    if name == "grid":
        return GridSearcher(search)
    if name == "tpe":
        return TPESearcher(search, sweep_seed, width_index)
    raise SearchError(f"search.searcher = {name!r}: must be one of {SEARCHERS}")
