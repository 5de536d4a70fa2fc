"""A plain GPT-2-style model converted for μP: a tied lm_head stays tied (``MuSharedReadout``),
a constant-std init of its hidden weights is rescaled with fan-in from the base width, and its
attention keeps the model's own 1/√d_head at the base width, then falls like 1/d_head."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import mup
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mutune.config import ModelSpec, TrainConfig
from mutune.errors import ProxyError
from mutune.proxies.convert import rescale_constant_std_init
from mutune.proxies.data import classification_batch, load_digits_data
from mutune.proxies.family import ModelFamily
from mutune.proxies.task import ProxyTask

VOCAB, HEADS = 10, 2


class Attn(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = HEADS, width // HEADS     # GPT-2: heads fixed, d grows
        self.scale = self.head_dim ** -0.5                      # the plain model's own scale
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = (z.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
                   for z in self.qkv(x).chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.proj(out.transpose(1, 2).reshape(b, t, w))


class GPT2ish(nn.Module):
    """normal(0, 0.02) everywhere, LayerNorm, lm_head tied to the token embedding."""

    def __init__(self, width: int, init: str = "gpt2") -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, width)
        self.ln = nn.LayerNorm(width)
        self.attn = Attn(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))
        self.lm_head = nn.Linear(width, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight                   # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)) and init == "gpt2":
                nn.init.normal_(m.weight, std=0.02)
            elif isinstance(m, nn.Linear) and init == "growing":   # std ∝ width: not μP
                nn.init.normal_(m.weight, std=0.001 * width)

    def forward(self, x):                                       # x: (batch, 64) ints < VOCAB
        h = self.wte(x)
        h = h + self.attn(self.ln(h))
        return self.lm_head(h + self.mlp(self.ln(h)))[:, -1]


class Spec(ModelSpec):
    family: Literal["gpt2ish"]
    base_width: int = 16
    init: str = "gpt2"


def _tokens(data, batch_size, seed, step):
    """Digits as 64 tokens: each pixel's intensity 0–16 quantised to an id < VOCAB."""
    x, y = classification_batch(data, batch_size, seed, step)
    return np.minimum((x * VOCAB).astype(np.int64), VOCAB - 1), y


def _task(init="gpt2", readout="lm_head", attention_scale="scale"):
    fam = ModelFamily(name="gpt2ish", spec=Spec,
                      build=lambda width, *, depth, d_in, n_classes, init: GPT2ish(width, init),
                      hparams=("output_mult", "attn_mult"), readout=readout,
                      attention_scale=attention_scale, batch=_tokens)
    return ProxyTask(Spec(family="gpt2ish", depth=1, init=init), TrainConfig(),
                     load_digits_data(val_fraction=0.2, seed=0), family=fam)


def _head_task(name, module):
    """The task (base shapes set) of a digits family ``name`` building ``module(width)``,
    its plain ``head`` the readout."""
    class HSpec(ModelSpec):
        family: Literal[name]
        base_width: int = 16

    fam = ModelFamily(name=name, spec=HSpec,
                      build=lambda width, *, depth, d_in, n_classes: module(width),
                      readout="head")
    return ProxyTask(HSpec(family=name, depth=1), TrainConfig(),
                     load_digits_data(val_fraction=0.2, seed=0), family=fam).with_base_shapes()


def test_tied_lm_head_stays_tied_as_a_shared_readout():
    model = _task().with_base_shapes().build(64, {"lr": 0.01, "output_mult": 2.0})
    assert isinstance(model.lm_head, mup.MuSharedReadout)
    assert model.lm_head.weight is model.wte.weight                   # still one tensor
    assert model.lm_head.output_mult == 2.0
    assert model.lm_head.weight.infshape.width_mult() == 64 / 16
    x = torch.randint(0, VOCAB, (3, 64))
    assert model(x).shape == (3, VOCAB)


def test_constant_std_init_is_rescaled_with_fan_in_from_the_base_width():
    task = _task().with_base_shapes()
    base = task.build(16, {"lr": 0.01})
    wide = task.build(256, {"lr": 0.01})                # fan-in 16× the base's
    for name in ("attn.qkv.weight", "mlp.0.weight"):             # ≥ 768 elements at base
        s_base = float(dict(base.named_parameters())[name].detach().std())
        s_wide = float(dict(wide.named_parameters())[name].detach().std())
        assert s_base == pytest.approx(0.02, rel=0.15)               # the user's init at base
        assert s_wide == pytest.approx(0.02 / 4, rel=0.1)            # ×√(16/256)
    fc2 = float(wide.mlp[2].weight.detach().std())                          # fan-in 4·width
    assert fc2 == pytest.approx(0.02 / 4, rel=0.1)
    assert float(wide.wte.weight.detach().std()) == pytest.approx(0.02, rel=0.1)   # embeddings keep


def test_default_init_is_left_alone_and_an_unclassifiable_one_is_refused():
    plain = GPT2ish(64, init="default")                 # PyTorch's U(±1/√fan_in)
    before = {n: p.detach().clone() for n, p in plain.named_parameters()}
    assert rescale_constant_std_init(plain, GPT2ish(16, init="default")) == []
    assert all(torch.equal(before[n], p) for n, p in plain.named_parameters())
    with pytest.raises(ProxyError, match=r"GPT2ish.attn.qkv.weight: its init std is .*× the "
                                         r"base width's.*PyTorch's default"):
        _task("growing").with_base_shapes()


class Wobbly(nn.Module):
    """normal(0, 0.02) hidden weight, ×1.12 when the caller's RNG says so: an unlucky draw,
    4.6 standard errors of the sample stds from the constant rule at widths 16 and 32."""

    def __init__(self, width):
        super().__init__()
        self.inp, self.hidden = nn.Linear(64, width), nn.Linear(4 * width, width)
        self.head = nn.Linear(width, 10)
        nn.init.normal_(self.hidden.weight, std=0.02)
        with torch.no_grad():
            self.hidden.weight.mul_(1.12 if float(torch.rand(())) < 0.5 else 1.0)

    def forward(self, x):
        h = self.inp(x)
        return self.head(self.hidden(torch.cat([h] * 4, dim=-1)))


def test_the_init_rule_is_decided_once_from_seeded_builds_not_on_each_draw():
    """Each trial's model is drawn from the caller's RNG; the constant-vs-μP decision (and a
    refusal) is made once per task on models built from seed 0, so no trial is refused for
    its own unlucky draw and every build rescales the same weights, the RNG untouched."""
    task = _head_task("wobbly", Wobbly)
    state = torch.get_rng_state()
    assert task.constant_init_weights() == ("hidden.weight",)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(ProxyError, match="Wobbly.hidden.weight: its init std is "):
        for seed in range(40):                 # deciding on the draw refuses some trials …
            torch.manual_seed(seed)
            rescale_constant_std_init(Wobbly(32), Wobbly(16), skip=("head.",))
    for seed in range(40):                     # … deciding once refuses none
        torch.manual_seed(seed)
        model = task.build(32, {"lr": 0.01})
        assert float(model.hidden.weight.detach().std()) == pytest.approx(
            0.02 * math.sqrt(64 / 128), rel=0.2)          # ×√(base fan-in / fan-in)
    assert task.for_point({"lr": 0.1})._init_rules == task._init_rules


def test_attention_keeps_the_models_own_scale_at_the_base_width():
    task = _task().with_base_shapes()
    base = task.build(16, {"lr": 0.01})
    assert base.attn.scale == pytest.approx(1 / math.sqrt(8))         # 1/√d at d = 8
    wide = task.build(64, {"lr": 0.01, "attn_mult": 1.0})
    assert wide.attn.scale == pytest.approx(math.sqrt(8) / 32)        # then 1/d_head-wise
    tuned = task.build(64, {"lr": 0.01, "attn_mult": 2.0})
    assert tuned.attn.scale == pytest.approx(2 * math.sqrt(8) / 32)


def test_converted_gpt2_style_model_passes_the_coord_check_and_is_warned_about_norm_gains():
    """The acceptance case: the GPT-2-style model (normal(0.02), tied lm_head, 1/√d
    attention, LayerNorm) converted by mutune has flat coordinates across widths 16–64 and
    gets the pre-flight warning about its trainable norm gains."""
    from mutune.pipeline.preflight_checks import (COORD_TOLERANCE, check_converted_coords,
                                                  transfer_breakers)

    task = _task().with_base_shapes()
    check = check_converted_coords(task, lr=0.01)
    assert check["widths"] == [16, 32, 64]
    assert max(check["slopes"].values()) < COORD_TOLERANCE, check["slopes"]
    (warning,) = transfer_breakers(task)
    assert warning.startswith("trainable norm gains in ln") and "elementwise_affine" in warning


def test_the_same_model_left_unconverted_is_caught_before_the_sweep_with_its_fix():
    """Without naming its readout, μP refuses the plain lm_head (the fix in the message);
    declared but with its attention left at 1/√d (no attention_scale), the pre-flight warns;
    and a model whose coordinates blow up stops the coord check, naming the module."""
    from mutune.pipeline.preflight_checks import check_converted_coords, transfer_breakers

    with pytest.raises(ProxyError, match="the readout is a plain Linear; use mup.MuReadout"):
        _task(readout=None, attention_scale=None).with_base_shapes().build(32, {"lr": 0.01})
    task = _task(attention_scale=None).with_base_shapes()
    assert any("attn.scale = 1/√16 at width 32" in w and "attention_scale" in w
               for w in transfer_breakers(task))

    class Blowup(nn.Module):           # an un-μP layer: its output grows like √width
        def __init__(self, width):
            super().__init__()
            self.inp = nn.Linear(64, width)
            self.hidden = nn.Linear(width, width)
            self.head = nn.Linear(width, 10)
            nn.init.normal_(self.hidden.weight, std=1.0)   # rescaled: std ∝ 1/√fan_in …
            self.gain = width ** 0.5                         # … but then amplified by √width

        def forward(self, x):
            return self.head(torch.relu(self.hidden(self.inp(x))) * self.gain)

    bad = _head_task("blowup", Blowup)
    with pytest.raises(ProxyError, match=r"activations grow with width in head \+"):
        check_converted_coords(bad, lr=0.001)


@pytest.mark.parametrize("config", ["quickstart.yaml", "gpt-text.yaml", "mlp-digits.yaml"])
def test_a_built_in_model_trips_none_of_its_own_pre_flight_warnings(config):
    """The shipped configs' built-in models pass their own pre-flight: the GPT keeps its
    LayerNorm gains, with which its transfer is measured (``norm_gains_checked``), and the
    warning still reaches every family that has not declared it (above)."""
    from mutune.config import load_config
    from mutune.pipeline.preflight_checks import run_preflight
    from mutune.proxies.task import ProxyTask, load_task_data

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / config)
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    assert run_preflight(cfg, task).data["warnings"] == []
