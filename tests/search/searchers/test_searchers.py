"""Searchers propose, schedulers decide: random, grid and Optuna TPE, each combined with every
scheduler core through the simulated executor (synthetic deterministic objective)."""
from __future__ import annotations

import json
import math
import statistics

import pytest

from mutune.config import parse_config
from mutune.errors import SearchError
from mutune.search.schedulers.factory import make_scheduler
from mutune.search.searchers import (GridSearcher, RandomSearcher, TPESearcher, grid_points,
                                     make_searcher)
from mutune.search.backends.simulated import simulate
from mutune.search.searchers.space import sample_configs
from tests.conftest import config_error


def _search(tiny_config, **update):
    d = tiny_config.model_dump(mode="json")
    d["search"].update(update)
    return parse_config(d).search


def _objective(hp, step):
    """A bowl in log lr around 1e-2, flattening with steps."""
    return (math.log10(hp["lr"]) + 2.0) ** 2 + 1.0 / math.sqrt(step)


def test_random_searcher_is_sample_configs_and_seeded(tiny_config):
    search = _search(tiny_config, num_samples=6)
    s = RandomSearcher(search, 3, 0)
    pts = [s.suggest(f"k{i}") for i in range(6)]
    assert pts == sample_configs(search, 3, 0)
    assert s.suggest("k0") == pts[0] and s.suggest("k6") is None and s.exhausted
    assert pts != [RandomSearcher(search, 4, 0).suggest(f"k{i}") for i in range(6)]


def test_grid_searcher_covers_the_product_log_spaced_and_cycles(tiny_config):
    search = _search(tiny_config, num_samples=7, grid_points=3,
                     space={"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
                            "output_mult": {"type": "choice", "values": [1.0, 2.0]}})
    grid = grid_points(search)
    assert len(grid) == 6
    assert sorted({round(math.log10(p["lr"]), 9) for p in grid}) == [-4.0, -3.0, -2.0]
    assert {p["output_mult"] for p in grid} == {1.0, 2.0}
    s = GridSearcher(search)
    pts = [s.suggest(f"k{i}") for i in range(7)]
    assert pts[:6] == grid and pts[6] == grid[0] and s.suggest("k7") is None


def test_config_names_the_searcher_field(tiny_config):
    d = tiny_config.model_dump(mode="json")
    d["search"]["searcher"] = "bayes"
    with config_error("search.searcher", "'bayes'", "Input should be"):
        parse_config(d)
    d["search"]["searcher"] = "tpe"
    d["search"]["scheduler"]["variant"] = "sideways"
    with config_error("search.scheduler.variant", "'sideways'", "Input should be"):
        parse_config(d)
    d["search"]["scheduler"]["variant"] = "promotion"
    d["search"]["best_scope"] = "all"
    with config_error("search.best_scope", "'all'", "Input should be"):
        parse_config(d)


def _drive(searcher, core, concurrency=2, max_t=27):
    """Simulate a sweep through the driver loop — the order Ray uses: the searcher proposes a
    trial when a slot frees, observes every report (the stopping one included) and is told
    each end as soon as the driver knows it."""
    res = simulate(core, _objective, searcher=searcher, concurrency=concurrency, max_t=max_t,
                   report_every=3)
    points = {k: t.point["hparams"] for k, t in res.driver.trials.items()}
    return res, points


@pytest.mark.parametrize("kind, variant", [("asha", "stopping"), ("asha", "promotion"),
                                           ("hyperband", "stopping"),
                                           ("hyperband", "promotion")])
def test_tpe_with_every_scheduler_is_seeded_and_learns(tiny_config, kind, variant):
    search = _search(tiny_config, num_samples=40, searcher="tpe",
                     space={"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-1}})

    def run(seed):
        core = make_scheduler(kind, variant=variant, grace_period=3, reduction_factor=3,
                              max_t=27, seed=seed)
        tpe = TPESearcher(search, seed, 0, n_startup_trials=8)
        return (*_drive(tpe, core), tpe)

    (res_a, pts_a, tpe), (res_b, pts_b, _) = run(0), run(0)
    assert pts_a == pts_b and res_a.statuses == res_b.statuses       # seeded end to end
    assert set(res_a.statuses.values()) <= {"completed", "stopped"}
    err = [abs(math.log10(pts_a[f"t{i}"]["lr"]) + 2.0) for i in range(40)]
    if variant == "stopping":
        # after the random start-up TPE concentrates near the optimum lr = 1e-2 (the prior's
        # median distance is 1 decade; the start-up draws here sit 2 decades away)
        assert statistics.median(err[-16:]) < 0.6 < statistics.median(err[:8])
    else:
        # promotion: paused trials are still running for Optuna (TPE ignores them), so it
        # learns only from ended trials — later; every end must still have been told
        told = {t.state.name for t in tpe.study.trials}
        assert len(tpe.study.trials) == 40 and told <= {"COMPLETE", "PRUNED"}


def test_tpe_tells_stopped_trials_as_pruned(tiny_config):
    import optuna

    search = _search(tiny_config, num_samples=3, searcher="tpe")
    tpe = TPESearcher(search, 0, 0)
    for k in ("a", "b", "c"):
        tpe.suggest(k)
    tpe.observe("a", 3, 0.5)
    tpe.observe("a", 3, 0.4)             # a repeated step is reported once
    tpe.observe("a", 9, 0.3)
    tpe.complete("a", "completed")
    tpe.observe("b", 3, 0.9)
    tpe.complete("b", "stopped")
    tpe.observe("c", 3, math.nan)        # non-finite: never told as a value
    tpe.complete("c", "diverged")
    states = [t.state for t in tpe.study.trials]
    S = optuna.trial.TrialState
    assert states == [S.COMPLETE, S.PRUNED, S.FAIL]
    assert tpe.study.trials[0].value == 0.3
    assert tpe.study.trials[1].intermediate_values == {3: 0.9}


def test_searcher_state_resumes_to_the_same_next_points(tiny_config):
    search = _search(tiny_config, num_samples=20, searcher="tpe")
    a = TPESearcher(search, 7, 1, n_startup_trials=3)
    for i in range(8):
        p = a.suggest(f"t{i}")
        a.observe(f"t{i}", 3, _objective(p, 3))
        a.complete(f"t{i}", "completed" if i % 2 else "stopped")
    state = json.loads(json.dumps(a.state_dict()))
    b = TPESearcher(search, 7, 1, n_startup_trials=3)
    b.load_state(state)
    assert [a.suggest(f"n{i}") for i in range(4)] == [b.suggest(f"n{i}") for i in range(4)]
    other = make_searcher(_search(tiny_config, num_samples=20), 7, 1)
    with pytest.raises(SearchError, match="cannot load searcher state"):
        other.load_state(state)
    c = TPESearcher(search, 8, 1, n_startup_trials=3)        # another seed
    with pytest.raises(SearchError, match="differs"):
        c.load_state(state)
