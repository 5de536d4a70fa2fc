"""Widths without a confirmation design: their sweep's rung optimum moved to max_t by the
shift the narrowest width's design measured (mutune.pipeline.horizon_shift), on the simulated
backend whose learning-rate optimum moves with the horizon as it does in real training."""
from __future__ import annotations

import math

import pytest

from mutune.config import parse_config
from mutune.pipeline import run_pipeline
from mutune.pipeline.horizon_shift import _moved
from mutune.pipeline.optimum_record import WidthOptimum
from mutune.search.backends.simulated_run import SimulatedBackend, SyntheticLoss
from mutune.services.store import Store
from tests.conftest import make_tiny_config

#: lr* at max_t = 27; at rung 3 it is 2^(0.25·log2 9) ≈ 1.73× higher (0.79 octave)
LOSS = SyntheticLoss(optimum={"lr": 0.01, "output_mult": 2.0}, lr_drift=-0.25, lr_horizon=27)


def _config(num_samples: int, **transfer):
    d = make_tiny_config().model_dump(mode="json")
    d["widths"], d["target"]["width"] = [16, 32, 64], 256
    d["search"]["num_samples"] = num_samples
    d["search"]["space"]["lr"] = {"type": "loguniform", "low": 1e-4, "high": 1.0}
    d["transfer"].update({"gate_rounds": 1, "confirm_widths": 1, **transfer})
    return parse_config(d)


def _run(config, tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'shift.db'}") as store:
        result = run_pipeline(config, store, out_dir=tmp_path / "out",
                              backend=SimulatedBackend(LOSS))
        rows = store.sweep_rows(result.sweep_id)
    return result, rows


def test_wider_widths_take_the_narrowest_designs_horizon_shift(tmp_path):
    result, rows = _run(_config(12), tmp_path)
    # one design, at the narrowest width; the wider widths trained their sweeps only
    assert {t["width"] for t in rows["trials"] if t["kind"] == "confirm"} == {16}
    narrow, *wider = result.proxies
    assert narrow.optimum.optimum_horizon == "max_t" and narrow.optimum.horizon_shift is None
    want = 0.25 * math.log2(27 / 3)
    for p in wider:
        shift = p.optimum.horizon_shift
        assert shift["from"] == "width 16" and shift["rung"] == 3
        assert shift["octaves"]["lr"] == pytest.approx(-want, abs=0.25)
        # the rung's optimum sits where short runs put it; the moved one where max_t does
        assert math.log2(shift["at_rung"]["lr"] / 0.01) == pytest.approx(want, abs=0.25)
        assert abs(math.log2(p.optimum.optimum["lr"] / 0.01)) < 0.25
        assert p.optimum.optimum_horizon.startswith("rung 3 of max_t 27, moved")
        # the loss law compares the widths at max_t: each best is a trial trained to it
        assert p.milestone == 27
    lr = next(r for r in result.rules if r["hyperparameter"] == "lr")
    assert abs(math.log2(lr["transferred_value"] / 0.01)) < 0.25
    assert lr["optimum_source"].startswith("per width: at max_t on the designed widths")
    # the loss at stake is read from the one full-horizon surface, and says so
    assert "width 16's loss surface" in lr["reason"]


def test_every_width_is_designed_where_no_rung_can_place_its_optimum(tmp_path):
    # 4 samples: no rung holds the 2·k + 3 trials a quadratic needs, so no optimum can be moved
    result, rows = _run(_config(4), tmp_path)
    assert {t["width"] for t in rows["trials"] if t["kind"] == "confirm"} == {16, 32, 64}
    assert all(p.optimum.horizon_shift is None for p in result.proxies)


def test_confirm_widths_all_designs_every_width(tmp_path):
    result, rows = _run(_config(12, confirm_widths="all"), tmp_path)
    assert {t["width"] for t in rows["trials"] if t["kind"] == "confirm"} == {16, 32, 64}
    assert all(p.optimum.optimum_horizon == "max_t" for p in result.proxies)


def _opt(value: float, lo: float, hi: float) -> WidthOptimum:
    return WidthOptimum(milestone=3, optimum_horizon="x", method="quadratic",
                        optimum={"lr": value}, n_trials=9, trial_ids=[],
                        interval={"lr": [lo, hi]}, on_edge={}, edge_side={})


def test_a_moved_interval_adds_the_three_fits_half_widths_in_quadrature():
    e = math.e
    own, full, rung = _opt(0.04, 0.04 / e, 0.04 * e), _opt(0.01, 0.01 / e ** 2, 0.01 * e), \
        _opt(0.02, 0.02 / e ** 3, 0.02 * e ** 0.5)
    value, (lo, hi), octaves = _moved("lr", own, full, rung)
    assert value == pytest.approx(0.02) and octaves == pytest.approx(-1.0)
    # below: own 1, full 2, rung's above 0.5; above: own 1, full 1, rung's below 3
    assert math.log(value / lo) == pytest.approx(math.sqrt(1 + 4 + 0.25))
    assert math.log(hi / value) == pytest.approx(math.sqrt(1 + 1 + 9))
    _, none, _ = _moved("lr", own, full, _opt(0.02, math.nan, 1.0))
    assert none is None
