"""Published batch / token / weight-decay rules against hand-computed values."""
import pytest

from mutune.scaling import (adamw_timescale, adamw_weight_decay_for, scale_lr_for_batch,
                            scale_lr_for_tokens)


def test_batch_rules_by_hand():
    assert scale_lr_for_batch(1e-3, 64, 256, "adam") == pytest.approx(2e-3)      # √4 = 2
    assert scale_lr_for_batch(1e-3, 64, 256, "AdamW") == pytest.approx(2e-3)
    assert scale_lr_for_batch(0.1, 256, 8192, "sgd") == pytest.approx(3.2)       # ×32
    assert scale_lr_for_batch(0.1, 256, 64, "MuSGD") == pytest.approx(0.025)


def test_token_rule_by_hand():
    # 4× the tokens at β = 0.5 halves the lr
    assert scale_lr_for_tokens(1e-3, 1e9, 4e9, beta=0.5) == pytest.approx(5e-4)
    assert scale_lr_for_tokens(1e-3, 1e9, 4e9, beta=0) == 1e-3
    with pytest.raises(TypeError):
        scale_lr_for_tokens(1e-3, 1e9, 4e9)                    # β has no default


def test_adamw_timescale_by_hand():
    # η = 1e-3, λ = 0.1: τ_iter = 1/(1e-4) = 10 000 steps; B = 32, D = 320 000 → τ = 1 epoch
    tau = adamw_timescale(1e-3, 0.1, 320_000, 32)
    assert tau.tau_iters == pytest.approx(10_000)
    assert tau.tau_epochs == pytest.approx(1.0)
    # keep τ_epoch at 1 with 4× the data and half the lr: λ = B/(η·τ·D) = 32/(5e-4·1·1.28e6)
    lam = adamw_weight_decay_for(lr=5e-4, dataset_size=1_280_000, batch_size=32, tau_epochs=1.0)
    assert lam == pytest.approx(0.05)
    assert adamw_timescale(5e-4, lam, 1_280_000, 32).tau_epochs == pytest.approx(1.0)
    assert adamw_weight_decay_for(lr=1e-3, tau_iters=10_000) == pytest.approx(0.1)


@pytest.mark.parametrize("call, match", [
    (lambda: scale_lr_for_batch(-1e-3, 64, 128, "adam"), "lr = -0.001"),
    (lambda: scale_lr_for_batch(1e-3, 0, 128, "adam"), "batch_from = 0"),
    (lambda: scale_lr_for_batch(1e-3, 64, 128, "lion"), "optimizer = 'lion'"),
    (lambda: scale_lr_for_tokens(1e-3, 1e9, 2e9, beta=-0.3), "beta = -0.3"),
    (lambda: adamw_timescale(1e-3, 0.0, 1000, 10), "weight_decay = 0.0"),
    (lambda: adamw_weight_decay_for(lr=1e-3, tau_epochs=1.0), "both are needed"),
    (lambda: adamw_weight_decay_for(lr=1e-3, tau_epochs=1.0, tau_iters=5.0), "exactly one"),
])
def test_bad_inputs_raise_value_error_with_value_and_rule(call, match):
    with pytest.raises(ValueError, match=match):
        call()
