"""Searchers propose hyperparameters; schedulers decide (Syne Tune's split, DESIGN.md §9).

Every searcher has one contract, used by the Ray adapter (:mod:`mutune.search.backends.ray_tune.searcher_adapter`) and
usable with any scheduler core (ASHA stopping or promotion, Hyperband):

* ``suggest(key) -> dict | None``: the hyperparameters of the next trial (``key`` is the
  executor's trial name), or None once ``num_samples`` points were proposed;
* ``observe(key, step, value)``: a report of the ranked metric at training ``step``;
* ``complete(key, status)``: the trial ended ``completed``/``stopped``/``diverged``/``failed``.

Searchers:

* :class:`RandomSearcher` — independent draws (Bergstra & Bengio 2012, JMLR), the same points at
  every width (common random numbers): :func:`mutune.search.searchers.space.sample_configs`.
* :class:`GridSearcher` — the cartesian product of each dimension's grid (``choice`` values;
  ``grid_points`` values per continuous dimension, log-spaced for ``loguniform``), in
  lexicographic order of the sorted names; more samples than grid points cycle the grid (each
  repeat trains with a fresh seed). Ray Tune's ``grid_search`` repeats the grid ``num_samples``
  times instead.
* :class:`TPESearcher` — Optuna's Tree-structured Parzen Estimator (Bergstra et al. 2011,
  NeurIPS; ``optuna.samplers.TPESampler(seed=…)``) through Optuna's ask/tell interface. Each
  report becomes ``trial.report(value, step)``; a trial the scheduler stopped is told as
  ``PRUNED`` (TPE then ranks it by its last intermediate value, the way Optuna's own pruners
  feed TPE), a completed one with its final value, a diverged or failed one as ``FAIL``.
  Ray Tune's ``OptunaSearch`` tells stopped trials as completed with their last value instead,
  mixing budgets.

All randomness comes from ``numpy.random.SeedSequence`` children of the sweep seed.
"""
from __future__ import annotations

import abc
import itertools
import math
from typing import Any

import numpy as np

from mutune.config import Choice, LogUniform, SearchConfig, Uniform
from mutune.errors import SearchError
from mutune.search.searchers.space import sample_configs

__all__ = ["RandomSearcher", "GridSearcher", "TPESearcher", "FixedSearcher", "make_searcher",
           "grid_points", "SEARCHERS"]

SEARCHERS = ("random", "grid", "tpe")


class _Base(abc.ABC):
    """Shared bookkeeping: ``num_samples`` proposals at most, keys seen once."""

    def __init__(self, num_samples: int) -> None:
        if not isinstance(num_samples, int) or num_samples < 1:
            raise SearchError(f"num_samples = {num_samples!r}: must be an integer >= 1")
        self.num_samples = num_samples
        self.proposed: dict[str, dict[str, float]] = {}
        self._events: list[tuple] = []

    @property
    def exhausted(self) -> bool:
        """True once ``num_samples`` points were proposed."""
        return len(self.proposed) >= self.num_samples

    def suggest(self, key: str) -> dict[str, float] | None:
        """The next point (name → value, fixed hyperparameters included), or None when
        exhausted. Asking again for a known ``key`` returns its point (idempotent)."""
        if key in self.proposed:
            return dict(self.proposed[key])
        if self.exhausted:
            return None
        point = self._next(len(self.proposed), key)
        self.proposed[key] = point
        self._events.append(("suggest", key, dict(point)))
        return dict(point)

    @abc.abstractmethod
    def _next(self, index: int, key: str) -> dict[str, float]:
        """The point of proposal number ``index`` (0-based) for trial ``key``."""

    def observe(self, key: str, step: int, value: float) -> None:
        """A report of the ranked metric at training ``step``."""
        if key in self.proposed and self._observe(key, int(step), float(value)):
            self._events.append(("observe", key, int(step), float(value)))

    def complete(self, key: str, status: str) -> None:
        """The trial ended with ``status`` (completed/stopped/diverged/failed)."""
        if key in self.proposed and self._complete(key, status):
            self._events.append(("complete", key, status))

    def _observe(self, key: str, step: int, value: float) -> bool:
        return False   # model-free: nothing to remember

    def _complete(self, key: str, status: str) -> bool:
        return False

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: every call in order (``["suggest", key, point]``, ``["observe", key,
        step, value]``, ``["complete", key, status]``), enough to resume: a fresh searcher of
        the same settings fed the same calls is in the same state (TPE's seeded sampler
        proposes the same points for the same history)."""
        return {"version": 1, "kind": type(self).__name__, "events": [list(e) for e in
                                                                       self._events]}

    def load_state(self, state: dict[str, Any]) -> None:
        """Replay :meth:`state_dict` output into a freshly built searcher of the same settings.

        Raises:
            SearchError: another searcher's state, or a saved point that differs from what
                this searcher proposes (the settings or the seed changed).
        """
        if state.get("version") != 1 or state.get("kind") != type(self).__name__:
            raise SearchError(f"cannot load searcher state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r} into {type(self).__name__}")
        for ev in state["events"]:
            if ev[0] == "suggest":
                got = self.suggest(ev[1])
                if got != ev[2]:
                    raise SearchError(f"saved point of trial {ev[1]!r} {ev[2]} differs from "
                                      f"the searcher's {got}: settings or seed changed")
            elif ev[0] == "observe":
                self.observe(ev[1], int(ev[2]), float(ev[3]))
            elif ev[0] == "complete":
                self.complete(ev[1], ev[2])


class FixedSearcher(_Base):
    """Hands out given points in order (the target run, checks, benchmarks)."""

    def __init__(self, points: list[dict[str, float]]) -> None:
        super().__init__(len(points))
        self._points = [dict(p) for p in points]

    def _next(self, index: int, key: str) -> dict[str, float]:
        return dict(self._points[index])


class RandomSearcher(FixedSearcher):
    """Independent seeded draws: exactly :func:`~mutune.search.searchers.space.sample_configs`."""

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
            axes.append([float(v) for v in d.values])
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


class TPESearcher(_Base):
    """Optuna TPE through ask/tell, seeded from the sweep seed.

    Args:
        search: the search config (space, fixed, num_samples, mode).
        sweep_seed, width_index: seed the sampler with ``SeedSequence([seed, 5, width_index])``.
        n_startup_trials: random trials before TPE models (Optuna's default is 10).
    """

    def __init__(self, search: SearchConfig, sweep_seed: int, width_index: int = 0, *,
                 n_startup_trials: int = 10) -> None:
        import optuna

        super().__init__(search.num_samples)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        seed = int(np.random.SeedSequence([sweep_seed, 5, width_index]).generate_state(1)[0]
                   & 0x7FFFFFFF)
        self._optuna = optuna
        self.study = optuna.create_study(
            direction="minimize" if search.mode == "min" else "maximize",
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials))
        self._dists: dict[str, Any] = {}
        for name in sorted(search.space):
            d = search.space[name]
            if isinstance(d, Choice):
                self._dists[name] = optuna.distributions.CategoricalDistribution(
                    [float(v) for v in d.values])
            else:
                self._dists[name] = optuna.distributions.FloatDistribution(
                    d.low, d.high, log=isinstance(d, LogUniform))
        self._fixed = dict(search.fixed)
        self._trials: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._steps: dict[str, set[int]] = {}
        self._told: set[str] = set()

    def _next(self, index: int, key: str) -> dict[str, float]:
        trial = self.study.ask(self._dists)
        self._trials[key] = trial
        self._steps[key] = set()
        return {**self._fixed, **{k: float(v) for k, v in trial.params.items()}}

    def _observe(self, key: str, step: int, value: float) -> bool:
        trial = self._trials[key]
        if key in self._told or not math.isfinite(value) or step in self._steps[key]:
            return False
        trial.report(value, step)
        self._steps[key].add(step)
        self._last[key] = value
        return True

    def _complete(self, key: str, status: str) -> bool:
        if key in self._told:
            return False
        self._told.add(key)
        trial, state = self._trials[key], self._optuna.trial.TrialState
        if status == "completed" and key in self._last:
            self.study.tell(trial, self._last[key])
        elif status == "stopped" and key in self._last:
            self.study.tell(trial, state=state.PRUNED)
        else:
            self.study.tell(trial, state=state.FAIL)
        return True


def make_searcher(search: SearchConfig, sweep_seed: int, width_index: int) -> _Base:
    """The searcher ``search.searcher`` names, seeded from the sweep seed.

    Raises:
        SearchError: an unknown searcher name.
    """
    name = search.searcher
    if name == "random":
        return RandomSearcher(search, sweep_seed, width_index)
    if name == "grid":
        return GridSearcher(search)
    if name == "tpe":
        return TPESearcher(search, sweep_seed, width_index)
    raise SearchError(f"search.searcher = {name!r}: must be one of {SEARCHERS}")
