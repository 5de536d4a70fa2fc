"""Replay speed: synthetic sweeps re-simulated with a simulated clock (issue 7).

Seeded synthetic learning curves (power laws with noise; a few trials diverge), 50 reports per
trial every 5 steps (max_t 250), replayed with ASHA (grace 5, η 3, max_t 250) at 4 and 64
concurrent workers. Prints one JSON object per case:

    {"benchmark": "replay", "trials": …, "reports_per_trial": 50, "workers": …,
     "seconds": …, "trials_per_s": …}

``seconds`` is the median over ``--repeat`` runs of :func:`mutune.search.backends.replay.replay`
alone
(building the curves is excluded). Run: ``python benchmarks/replay.py --repeat 5``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from mutune.search.backends.replay import ReplaySettings, replay

REPORTS = 50
EVERY = 5


def synthetic_curves(n_trials: int, *, reports: int = REPORTS, every: int = EVERY,
                     seed: int = 0) -> dict[str, list[tuple[int, float, float]]]:
    """``n_trials`` seeded curves: loss = floor + scale·step^(−rate) + noise, seconds per step
    drawn per trial; about 1 % of trials turn NaN partway."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    steps = np.arange(1, reports + 1) * every
    floor = rng.uniform(0.1, 1.0, n_trials)[:, None]
    scale = rng.uniform(0.5, 3.0, n_trials)[:, None]
    rate = rng.uniform(0.2, 0.8, n_trials)[:, None]
    loss = floor + scale * steps[None, :] ** -rate
    loss = loss + rng.normal(0.0, 0.01, loss.shape)
    diverge = rng.random(n_trials) < 0.01
    at = rng.integers(0, reports, n_trials)
    for i in np.flatnonzero(diverge):
        loss[i, at[i]:] = np.nan
    sec = rng.uniform(0.01, 0.05, n_trials)[:, None] * steps[None, :]
    step_list = steps.tolist()
    return {f"t{i:06d}": list(zip(step_list, loss[i].tolist(), sec[i].tolist()))
            for i in range(n_trials)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown")
    p.add_argument("--trials", type=int, nargs="*", default=[1000, 10000])
    p.add_argument("--workers", type=int, nargs="*", default=[4, 64])
    args = p.parse_args(argv)
    settings = ReplaySettings(kind="asha", grace_period=5, reduction_factor=3, max_t=250)
    for n in args.trials:
        curves = synthetic_curves(n)
        for workers in args.workers:
            times = []
            for _ in range(max(args.repeat, 1)):
                t0 = time.perf_counter()
                result = replay(curves, settings, concurrency=workers)
                times.append(time.perf_counter() - t0)
                assert len(result.statuses) == n
            sec = statistics.median(times)
            print(json.dumps({"benchmark": "replay", "trials": n, "reports_per_trial": REPORTS,
                              "workers": workers, "seconds": round(sec, 4),
                              "trials_per_s": round(n / sec, 1)}), flush=True)


if __name__ == "__main__":
    main()
