"""Search spaces: the config's distributions sampled with seeds derived from the sweep seed."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mutune.config import Choice, LogUniform, SearchConfig, Uniform
from mutune.config.spaces import as_value, fmt_value

__all__ = ["sample_configs", "trial_seeds", "width_seed_sequence"]


def width_seed_sequence(sweep_seed: int, width_index: int) -> np.random.SeedSequence:
    """The SeedSequence of proxy width number ``width_index`` (0-based) of a sweep."""
    return np.random.SeedSequence([sweep_seed, 1, width_index])


def sample_configs(search: SearchConfig, sweep_seed: int, width_index: int) -> list[dict]:
    """Draw ``search.num_samples`` hyperparameter dicts for one proxy width.

    Returns:
        list of length num_samples of {name: value}; fixed hyperparameters included."""
    del width_index  # random search: identical points at every width
    rng = np.random.default_rng(np.random.SeedSequence([sweep_seed, 0]))
    out = []
    names = sorted(search.space)
    for _ in range(search.num_samples):
        point: dict[str, float] = dict(search.fixed)
        for name in names:
            dist = search.space[name]
            if isinstance(dist, LogUniform):
                point[name] = float(math.exp(rng.uniform(math.log(dist.low),
                                                         math.log(dist.high))))
            elif isinstance(dist, Uniform):
                point[name] = float(rng.uniform(dist.low, dist.high))
            elif isinstance(dist, Choice):
                point[name] = as_value(dist.values[int(rng.integers(len(dist.values)))])
        out.append(point)
    return out


def trial_seeds(sweep_seed: int, width_index: int, n: int) -> list[int]:
    """``n`` training seeds (init, batches) for the trials of one width, as 31-bit ints."""
    children = width_seed_sequence(sweep_seed, width_index).spawn(n)
    return [int(c.generate_state(1)[0] & 0x7FFFFFFF) for c in children]


def describe(point: Mapping[str, float]) -> str:
    """Short text of a point, e.g. ``lr=0.0031 output_mult=2.1``."""
    return " ".join(f"{k}={fmt_value(v, '.3g')}" for k, v in sorted(point.items()))
