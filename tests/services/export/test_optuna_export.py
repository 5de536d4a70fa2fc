"""`export_to_optuna`: a recorded sweep read back by `optuna.load_study` (SQLite storage)."""
from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from mutune.errors import StoreError
from mutune.services.export.optuna import distributions_from_space, export_to_optuna
from mutune.services.store import Store

from tests.services.test_replay_service import record_sweep


@pytest.fixture
def sqlite_store(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'mutune.db'}") as s:
        yield s


@pytest.mark.parametrize("mode", ["min", "max"])
def test_export_reads_back_values_params_intermediates_states(sqlite_store, tmp_path, mode):
    sweep_id, ids = record_sweep(sqlite_store, n=10, workers=2, nan_trial=3, fail_trial=6,
                                 mode=mode)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    names = export_to_optuna(sqlite_store, sweep_id, storage)
    assert names == [f"mutune-{sweep_id}-w16", f"mutune-{sweep_id}-w32"]
    rows = sqlite_store.sweep_rows(sweep_id)
    for name, width in zip(names, (16, 32)):
        study = optuna.load_study(study_name=name, storage=storage)
        assert study.direction.name == ("MINIMIZE" if mode == "min" else "MAXIMIZE")
        assert study.user_attrs["fixed"] == {"weight_decay": 0.0}
        trials = {t.user_attrs["mutune_trial_id"]: t for t in study.get_trials()}
        assert sorted(trials) == ids[width]
        for row in (t for t in rows["trials"] if t["id"] in ids[width]):
            ot = trials[row["id"]]
            assert ot.params == {k: row["config"][k] for k in ("lr", "output_mult", "init_std")}
            assert ot.distributions["lr"] == FloatDistribution(1e-4, 1.0, log=True)
            assert ot.distributions["output_mult"] == FloatDistribution(0.5, 4.0)
            assert ot.distributions["init_std"] == CategoricalDistribution([0.5, 1.0, 2.0])
            inter = {r["step"]: float(r["metrics"]["val_loss"]) for r in row["reports"]}
            assert set(ot.intermediate_values) == set(inter)
            for step, v in inter.items():
                got = ot.intermediate_values[step]
                assert (math.isnan(got) and math.isnan(v)) or got == v
            finite = [v for _, v in sorted(inter.items()) if math.isfinite(v)]
            expected = {"completed": TrialState.COMPLETE, "stopped": TrialState.PRUNED,
                        "diverged": TrialState.FAIL, "failed": TrialState.FAIL}[row["status"]]
            assert ot.state is expected and ot.user_attrs["status"] == row["status"]
            if expected is TrialState.FAIL:
                assert ot.value is None
            else:
                assert ot.value == finite[-1]
        states = {t.state for t in study.get_trials()}
        assert {TrialState.COMPLETE, TrialState.PRUNED} <= states
    assert sum(t.state is TrialState.FAIL
               for n in names for t in optuna.load_study(study_name=n, storage=storage)
               .get_trials()) == 4   # one diverged + one failed per width
    best = optuna.load_study(study_name=names[0], storage=storage).best_trial
    assert best.state is TrialState.COMPLETE


def test_existing_study_is_refused_unless_overwrite(sqlite_store, tmp_path):
    sweep_id, _ = record_sweep(sqlite_store, widths=(16, 32), n=4)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    export_to_optuna(sqlite_store, sweep_id, storage, study_prefix="x")
    with pytest.raises(StoreError, match="exists already.*overwrite"):
        export_to_optuna(sqlite_store, sweep_id, storage, study_prefix="x")
    names = export_to_optuna(sqlite_store, sweep_id, storage, study_prefix="x", overwrite=True)
    assert len(optuna.load_study(study_name=names[0], storage=storage).trials) == 4


def test_unknown_distribution_is_named():
    with pytest.raises(StoreError, match=r"search.space.lr.type = 'normal'"):
        distributions_from_space({"lr": {"type": "normal"}})
