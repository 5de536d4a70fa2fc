"""Model-free searchers: given points, seeded random draws, and the grid."""
from __future__ import annotations

import itertools
import math

import numpy as np

from mutune.config import Choice, LogUniform, SearchConfig, Uniform
from mutune.config.spaces import as_value
from mutune.search.searchers.base import Searcher
from mutune.search.searchers.space import sample_configs

__all__ = ["FixedSearcher", "RandomSearcher", "GridSearcher", "grid_points"]


class FixedSearcher(Searcher):
    """Hands out given points in order (the target run, checks, benchmarks)."""

    def __init__(self, points: list[dict[str, float]]) -> None:
        super().__init__(len(points))
        self._points = [dict(p) for p in points]

    def _next(self, index: int, key: str) -> dict[str, float]:
        return dict(self._points[index])


class RandomSearcher(FixedSearcher):
    """Independent seeded draws (Bergstra & Bengio 2012, JMLR): :func:`~.space.sample_configs`."""

    def __init__(self, search: SearchConfig, sweep_seed: int, width_index: int = 0) -> None:
        super().__init__(sample_configs(search, sweep_seed, width_index))


def grid_points(search: SearchConfig) -> list[dict[str, float]]:
    """The full grid: product over sorted names of each dimension's values (``choice``:
    its values; ``uniform``: ``grid_points`` evenly spaced values on [low, high];
    ``loguniform``: evenly spaced in log), fixed hyperparameters added to every point."""
    names = sorted(search.space)
    axes = []
    for name in names:
        d = search.space[name]
        n = search.grid_points
        if isinstance(d, Choice):
            axes.append([as_value(v) for v in d.values])
        elif isinstance(d, LogUniform):
            axes.append([float(v) for v in np.exp(np.linspace(math.log(d.low),
                                                              math.log(d.high), n))])
        elif isinstance(d, Uniform):
            axes.append([float(v) for v in np.linspace(d.low, d.high, n)])
    return [{**search.fixed, **dict(zip(names, combo))} for combo in itertools.product(*axes)]


class GridSearcher(FixedSearcher):
    """The grid of :func:`grid_points`, cycled to ``num_samples`` points."""

    def __init__(self, search: SearchConfig) -> None:
        grid = grid_points(search)
        super().__init__([grid[i % len(grid)] for i in range(search.num_samples)])
