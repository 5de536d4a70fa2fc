"""A width's best trial is ranked by the sweep's own metric and mode, ``best-so-far`` included
(no Ray: the trials' recorded reports and a real ASHA core fed with them)."""
from __future__ import annotations

import itertools

import pytest

from mutune.pipeline.proxy_stage import width_result
from mutune.pipeline.sweep import SweepRun
from mutune.search.backends.groups import RunOutcome
from mutune.search.backends.trial_record import TrialRecord
from mutune.search.schedulers import ASHA

# (val_accuracy, val_loss) at steps 1, 2, 3: a score and a loss that disagree with a naive
# read of the loss under mode max — the most accurate trial has the lowest loss
CURVES = {
    "w16-t0": [(0.50, 1.2), (0.70, 0.9), (0.90, 0.40)],
    "w16-t1": [(0.40, 1.6), (0.45, 1.5), (0.50, 1.40)],
    "w16-t2": [(0.45, 1.3), (0.60, 1.0), (0.65, 0.95)],
}


def _score_sweep(tiny_config, scope):
    search = tiny_config.search.model_copy(update={
        "metric": "val_accuracy", "mode": "max", "best_scope": scope,
        "scheduler": tiny_config.search.scheduler.model_copy(
            update={"grace_period": 3, "max_t": 3})})
    config = tiny_config.model_copy(update={"search": search})
    core = ASHA(grace_period=3, reduction_factor=3, max_t=3, mode="max")
    records = []
    for i, (key, curve) in enumerate(CURVES.items()):
        reports = [{"step": s, "val_accuracy": acc, "val_loss": loss}
                   for s, (acc, loss) in enumerate(curve, start=1)]
        core.on_report(key, 3, curve[-1][0])
        records.append(TrialRecord(key, i + 1, {"hparams": {"lr": 0.01 * (i + 1),
                                                            "output_mult": 1.0},
                                                "seed": i, "index": i},
                                   0.0, reports=reports, status="completed"))
    run = SweepRun(config, recorder=None, task=None, sweep_id=1, out_dir=None,
                   seq=itertools.count(1))
    return width_result(run, 16, 1, RunOutcome(records, core), record=False)


@pytest.mark.parametrize("scope", ["last", "best-so-far"])
def test_the_best_trial_of_a_score_ranked_sweep_is_the_highest_score(tiny_config, scope):
    got = _score_sweep(tiny_config, scope)
    assert got.best_trial_id == 1 and got.best_val_loss == pytest.approx(0.90)
