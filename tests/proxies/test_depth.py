"""Depth-wise μP (CompleteP, Depth-μP): branch scaling, per-group lr / Adam ε / weight decay
against CompleteP's reference code, the residual MLP, and the config's checks."""
from __future__ import annotations

import math

import pytest
import torch

from mutune.errors import ProxyError
from mutune.proxies import build_mlp, make_optimizer
from mutune.proxies.depth import DepthScaling, depth_param_groups
from mutune.proxies.gpt import GPTShape, MuGPT
from mutune.proxies.mlp import MLPShape, MuMLP
from tests.conftest import MLP_DIGITS, config_error

GPT_KW = dict(vocab=64, seq_len=8, d_head=8, ffn_ratio=2)


pytestmark = pytest.mark.usefixtures("one_thread")        # tests/proxies/conftest.py


@pytest.mark.parametrize("kind, alpha", [("completep", 1.0), ("depth_mup", 0.5)])
def test_branch_multiplier_and_group_factors_follow_the_reference_table(kind, alpha):
    """depth 8 over base 2 (m_L = 4): branches × 4^-α; hidden weights and vectors lr ×
    4^(α-1); every group's ε × 4^-α; embeddings and output keep their lr; weight decay is
    not depth-scaled (CompleteP's nanoGPT-mup ``configure_optimizers``)."""
    s = DepthScaling(kind, 8, 2)
    assert s.alpha == alpha and s.multiplier == 4.0
    assert s.branch_multiplier == pytest.approx(4.0 ** -alpha)
    for group in ("hidden_weight", "hidden_vector"):
        assert s.factors(group) == pytest.approx({"lr": 4.0 ** (alpha - 1), "eps": 4.0 ** -alpha,
                                                  "weight_decay": 1.0})
    for group in ("embedding", "output"):
        assert s.factors(group) == pytest.approx({"lr": 1.0, "eps": 4.0 ** -alpha,
                                                  "weight_decay": 1.0})
    # CompleteP (α = 1) keeps the hidden lr across depth; Depth-μP halves it at 4× depth
    assert s.factors("hidden_weight")["lr"] == (1.0 if kind == "completep" else 0.5)
    none = DepthScaling("none", 8, 2)
    assert none.branch_multiplier == 1.0
    assert none.factors("hidden_weight") == {"lr": 1.0, "eps": 1.0, "weight_decay": 1.0}
    assert DepthScaling(kind, 2, 2).branch_multiplier == 1.0       # the base depth


def test_bad_scalings_are_refused():
    with pytest.raises(ProxyError, match="depth parametrization 'deep'"):
        DepthScaling("deep", 4, 2)
    with pytest.raises(ProxyError, match="base_depth = 0"):
        DepthScaling("completep", 4, 0)
    with pytest.raises(ProxyError, match="layer group 'attn'"):
        DepthScaling("completep", 4, 2).factors("attn")


@pytest.mark.parametrize("kind", ["completep", "depth_mup"])
def test_gpt_optimizer_groups_equal_completep_reference_values(kind):
    """A μP GPT at width 32 (base 16: m_w = 2), depth 8 (base 2: m_L = 4) under AdamW: the
    learning rate, ε and weight decay of every parameter equal what CompleteP's reference
    code gives its group — hidden matrices lr·m_L^(α-1)/m_w and wd·m_w, hidden LayerNorms
    and biases lr·m_L^(α-1), embeddings and the final LayerNorm lr, ε·m_L^-α everywhere
    (the reference also divides ε by m_w; mutune's μP, like mup, does not). The readout is
    mup's MuReadout (vector-like, its 1/m_w in the forward pass)."""
    s = DepthScaling(kind, 8, 2)
    lr, eps, wd = 0.01, 1e-8, 0.1
    model = _gpt(32, 16, s)
    opt = make_optimizer(model, lr=lr, weight_decay=wd, eps=eps, kind="adamw", depth=s)
    a, m_l, m_w = s.alpha, 4.0, 2.0
    names = {id(p): n for n, p in model.named_parameters()}
    seen = set()
    for g in opt.param_groups:
        for p in g["params"]:
            name = names[id(p)]
            seen.add(name)
            if name.startswith("blocks.") and p.dim() == 2:
                want_lr, want_wd = lr * m_l ** (a - 1) / m_w, wd * m_w
            elif name.startswith("blocks."):
                want_lr, want_wd = lr * m_l ** (a - 1), wd
            else:                   # embeddings, final LayerNorm, readout
                want_lr, want_wd = lr, wd
            assert g["lr"] == pytest.approx(want_lr), name
            assert g["weight_decay"] == pytest.approx(want_wd), name
            assert g["eps"] == pytest.approx(eps * m_l ** -a), name
    assert seen == {n for n, _ in model.named_parameters()}
    assert all(b.branch_mult == pytest.approx(m_l ** -a) for b in model.blocks)


def _gpt(width: int, base: int, s: DepthScaling) -> MuGPT:
    from mutune.proxies.parametrization import build_parametrized

    def factory(w: int) -> MuGPT:
        return MuGPT(w, GPTShape(depth=s.depth, branch_mult=s.branch_multiplier, **GPT_KW))

    return build_parametrized(factory, width, base, "mup")


def test_without_a_depth_parametrization_the_optimizer_is_unchanged():
    torch.manual_seed(0)
    model = build_mlp(32, d_in=8, n_classes=3, depth=3, base_width=16, parametrization="mup")
    plain = make_optimizer(model, lr=0.01)
    none = make_optimizer(model, lr=0.01, depth=DepthScaling("none", 3, 1))
    assert [(g["lr"], g["eps"], len(g["params"])) for g in plain.param_groups] == \
        [(g["lr"], g["eps"], len(g["params"])) for g in none.param_groups]


def test_sgd_and_models_without_groups_are_refused():
    s = DepthScaling("completep", 4, 2)
    model = build_mlp(32, d_in=8, n_classes=3, depth=4, base_width=16, parametrization="mup")
    with pytest.raises(ProxyError, match="kind='sgd'"):
        make_optimizer(model, lr=0.01, kind="sgd", depth=s)

    class Bare(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(2, 2)

    with pytest.raises(ProxyError, match="no depth_groups"):
        depth_param_groups(Bare(), s, lr=0.1, eps=1e-8, weight_decay=0.0)


def test_residual_mlp_scales_each_branch():
    """h₀ = √input_mult·W_in x; h_l = h_(l-1) + branch_mult·W_l ReLU(h_(l-1)); readout of
    ReLU(h_L) — computed by hand from the model's own weights."""
    from mutune.proxies.parametrization import build_parametrized

    torch.manual_seed(0)
    stack = MLPShape(depth=3, residual=True, branch_mult=0.25)
    m = build_parametrized(lambda w: MuMLP(5, w, 3, stack, input_mult=4.0), 16, 16, "mup")
    assert len(m.hidden) == 3
    x = torch.randn(4, 5)
    h = m.input(x) * 2.0
    for layer in m.hidden:
        h = h + 0.25 * layer(torch.relu(h))
    torch.testing.assert_close(m(x), m.readout(torch.relu(h)), rtol=0, atol=0)
    assert set(m.depth_groups().values()) == {"embedding", "hidden_weight", "output"}
    with pytest.raises(ProxyError, match="needs residual=True"):
        MuMLP(5, 16, 3, MLPShape(depth=3, branch_mult=0.5))


def test_at_the_base_depth_completep_is_the_unscaled_model():
    """Branch multiplier 1 and every factor 1: the same logits and the same optimizer."""
    s = DepthScaling("completep", 2, 2)
    torch.manual_seed(1)
    a = _gpt(32, 16, s)
    torch.manual_seed(1)
    b = _gpt(32, 16, DepthScaling("none", 2, 2))
    idx = torch.randint(0, 64, (2, 8))
    torch.testing.assert_close(a(idx), b(idx), rtol=0, atol=0)
    lrs = sorted(g["lr"] for g in make_optimizer(a, lr=0.01, depth=s).param_groups)
    assert all(math.isclose(v, 0.01) or math.isclose(v, 0.005) for v in lrs)


def _model_section(train_sgd: bool = False, **over):
    from mutune.config import load_config, parse_config

    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["model"].update(over)
    if train_sgd:
        d["train"].update(optimizer="sgd", weight_decay=0.0)
    return parse_config(d)


def test_the_config_checks_depth_options_and_builds_a_scaled_trainable_model():
    with config_error("model.base_depth", "4", "must be at or below"):
        _model_section(residual=True, depth_parametrization="completep", base_depth=4)
    with config_error("model.residual", "False", "needs residual branches"):
        _model_section(depth_parametrization="completep")
    from mutune.config import load_config, parse_config

    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["model"] = {"family": "mlp", "depth_parametrization": "completep"}   # residual omitted
    with config_error("model.residual", "False", "needs residual branches"):
        parse_config(d)
    with config_error("model.depth_parametrization", "'depth_mup'", "Adam's"):
        _model_section(residual=True, depth_parametrization="depth_mup", train_sgd=True)
    cfg = _model_section(residual=True, depth_parametrization="completep", depth=4,
                         base_depth=2)
    assert cfg.model.build_options() == {"depth": 4, "residual": True, "branch_mult": 0.5}
    assert _model_section().model.build_options() == {"depth": 3}       # unchanged
    from mutune.proxies.task import ProxyTask, load_task_data

    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
    torch.manual_seed(0)
    model = task.build(128, {"lr": 0.01, "output_mult": 1.0})
    assert all(isinstance(m, torch.nn.Linear) for m in model.hidden) and len(model.hidden) == 4
    opt = task.optimizer(model, 0.01)
    hidden = [g for g in opt.param_groups if g.get("layer_group") == "hidden_weight"
              and g["params"]]
    assert hidden and all(g["lr"] == pytest.approx(0.01 / 2) for g in hidden)  # m_w 2, α 1
    x, y = task.batch(0, 1)
    loss = task.step_loss(model, x, y)
    loss.backward()
    opt.step()
    assert math.isfinite(float(loss.detach()))
