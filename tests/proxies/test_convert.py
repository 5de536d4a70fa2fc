"""A plain GPT-2-style model converted for μP: a tied lm_head stays tied (``MuSharedReadout``),
a constant-std init of its hidden weights is rescaled with fan-in from the base width, and its
attention keeps the model's own 1/√d_head at the base width, then falls like 1/d_head."""
from __future__ import annotations

import math
from typing import Literal

import mup
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mutune.config import ModelSpec, TrainConfig
from mutune.errors import ProxyError
from mutune.proxies.convert import rescale_constant_std_init
from mutune.proxies.data import load_digits_data
from mutune.proxies.plugins import ModelFamily
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


def _task(init="gpt2"):
    fam = ModelFamily(name="gpt2ish", spec=Spec,
                      build=lambda width, *, depth, d_in, n_classes, init: GPT2ish(width, init),
                      hparams=("output_mult", "attn_mult"), readout="lm_head",
                      attention_scale="scale")
    return ProxyTask(Spec(family="gpt2ish", depth=1, init=init), TrainConfig(),
                     load_digits_data(val_fraction=0.2, seed=0), family=fam)


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
    for name in ("attn.qkv.weight", "attn.proj.weight", "mlp.0.weight"):
        s_base = float(dict(base.named_parameters())[name].detach().std())
        s_wide = float(dict(wide.named_parameters())[name].detach().std())
        assert s_base == pytest.approx(0.02, rel=0.1)                # the user's init at base
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


def test_attention_keeps_the_models_own_scale_at_the_base_width():
    task = _task().with_base_shapes()
    base = task.build(16, {"lr": 0.01})
    assert base.attn.scale == pytest.approx(1 / math.sqrt(8))         # 1/√d at d = 8
    wide = task.build(64, {"lr": 0.01, "attn_mult": 1.0})
    assert wide.attn.scale == pytest.approx(math.sqrt(8) / 32)        # then 1/d_head-wise
    tuned = task.build(64, {"lr": 0.01, "attn_mult": 2.0})
    assert tuned.attn.scale == pytest.approx(2 * math.sqrt(8) / 32)
