"""Optuna's Tree-structured Parzen Estimator through its ask/tell interface.

Bergstra, Bardenet, Bengio & Kégl 2011, "Algorithms for Hyper-Parameter Optimization", NeurIPS."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from mutune.config import Choice, LogUniform, SearchConfig
from mutune.config.spaces import as_value
from mutune.search.searchers.base import Searcher

__all__ = ["TPESearcher"]


class TPESearcher(Searcher):
    """Optuna TPE through ask/tell, seeded from the sweep seed."""

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
                    [as_value(v) for v in d.values])
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
        return {**self._fixed, **{k: as_value(v) for k, v in trial.params.items()}}

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
