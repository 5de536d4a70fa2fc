"""The worker's config dict read once into a typed TrialSpec at the training run's edge."""
from __future__ import annotations

import pytest

from mutune.errors import SearchError
from mutune.training.spec import TrialPoint, TrialSpec


def test_a_worker_config_reads_into_typed_values_with_its_defaults():
    spec = TrialSpec.from_config({
        "width": "64", "max_t": 27.0, "gpus": 0.5, "checkpoint_every": "auto",
        "checkpoint_at": [9, 3], "diverge_above": {"9": "2.5"}, "log_dir": "/elsewhere",
        "point": {"hparams": {"lr": 0.01}, "seed": "7", "replicate_seeds": [7, 8]}})
    assert (spec.width, spec.max_t, spec.gpus, spec.threads) == (64, 27, 0.5, 1)
    assert spec.checkpoint_every == "auto" and spec.checkpoint_at == (3, 9)
    assert spec.diverge_above == {9: 2.5}
    assert spec.metric == "val_loss" and spec.test_at_max_t and not spec.keep_final
    assert spec.point == TrialPoint({"lr": 0.01}, 7, 0, (7, 8))
    assert spec.point.seeds == (7, 8) and spec.trial_width == 64
    alone = TrialSpec.from_config({"max_t": 5, "point": {"hparams": {}, "seed": 1,
                                                         "width": 32}})
    assert alone.trial_width == 32 and alone.point.seeds == (1,)
    assert alone.checkpoint_every == 0


@pytest.mark.parametrize("config, names", [
    ({"max_t": 5, "point": {"hparams": {}, "seed": 1}}, "width"),
    ({"width": 8, "point": {"hparams": {}, "seed": 1}}, "max_t"),
    ({"width": 8, "max_t": 5, "point": {"seed": 1}}, "point.hparams"),
    ({"width": 8, "max_t": 5}, "point, point.hparams, point.seed"),
])
def test_a_missing_key_is_named(config, names):
    with pytest.raises(SearchError, match=f"lacks {names}:"):
        TrialSpec.from_config(config)


@pytest.mark.parametrize("max_t", [0, 2.5, True, "10", float("inf")])
def test_max_t_must_be_a_whole_number_of_steps(max_t):
    with pytest.raises(SearchError, match=r"max_t = .*: must be a whole number >= 1"):
        TrialSpec.from_config({"width": 8, "max_t": max_t,
                               "point": {"hparams": {}, "seed": 1}})
