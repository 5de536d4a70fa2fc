"""μP proxy models: SP equivalence at the base width, shapes, causality, init, guards, training."""
from __future__ import annotations

import contextlib
import dataclasses
import math

import mup
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from mutune.errors import ProxyError
from mutune.proxies import (GPTShape, MLPShape, MuGPT, MuMLP, build_gpt, build_mlp,
                            build_parametrized, classification_batch, count_parameters,
                            load_digits_data, make_optimizer)
from tests.conftest import MLP_DIGITS

GPT_KW = dict(vocab=256, seq_len=16, depth=2, d_head=8, ffn_ratio=4)


pytestmark = pytest.mark.usefixtures("one_thread")        # tests/proxies/conftest.py


@contextlib.contextmanager
def seeded(seed: int):
    """Seed torch's global RNG inside a fork, so nothing leaks to other tests."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _mlp(width, parametrization, *, base_width=16, depth=2, seed=0):
    with seeded(seed):
        return build_mlp(width, d_in=64, n_classes=10, depth=depth, base_width=base_width,
                         parametrization=parametrization)


def _gpt(width, parametrization, *, base_width=16, seed=0, **kw):
    with seeded(seed):
        return build_gpt(width, base_width=base_width, parametrization=parametrization,
                         **GPT_KW, **kw)


def _two_steps(model, x, loss_fn):
    opt = make_optimizer(model, lr=1e-2, weight_decay=0.1)
    for _ in range(2):
        opt.zero_grad()
        loss_fn(model(x)).backward()
        opt.step()
    with torch.no_grad():
        return model(x)


@settings(max_examples=8, deadline=None)
@given(base_width=st.integers(8, 48), depth=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_mup_mlp_equals_sp_twin_at_base_width(base_width, depth, seed):
    mu = _mlp(base_width, "mup", base_width=base_width, depth=depth, seed=seed)
    sp = _mlp(base_width, "sp", base_width=base_width, depth=depth, seed=seed)
    for (name, a), (_, b) in zip(mu.named_parameters(), sp.named_parameters()):
        assert torch.equal(a, b), name
    x = torch.rand(5, 64, generator=torch.Generator().manual_seed(seed))
    target = torch.arange(5) % 10
    out_mu = _two_steps(mu, x, lambda z: nn.functional.cross_entropy(z, target))
    out_sp = _two_steps(sp, x, lambda z: nn.functional.cross_entropy(z, target))
    assert out_mu.abs().sum() > 0
    assert torch.equal(out_mu, out_sp)


def test_mup_gpt_equals_sp_twin_at_base_width():
    # the exact twin keeps μP's conventions (sp_style=False); only the base shapes differ
    mu, sp = _gpt(16, "mup"), _gpt(16, "sp", sp_style=False)
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    loss = lambda z: z.logsumexp(-1).mean()  # noqa: E731
    assert torch.equal(_two_steps(mu, idx, loss), _two_steps(sp, idx, loss))


def test_gpt_defaults_follow_the_parametrization():
    """μP: logits scaled 8/d_head, zero query, mup's readout init, PyTorch's default init
    elsewhere; an SP model (the transfer check's twin): 1/√d_head and no zero init."""
    mu, sp = _gpt(32, "mup"), _gpt(32, "sp")
    d_head = mu.d_head
    assert mu.blocks[0].attn_scale == 8 / d_head
    assert sp.blocks[0].attn_scale == 1 / d_head ** 0.5
    assert torch.count_nonzero(mu.readout.weight) == mu.readout.weight.numel()
    assert torch.count_nonzero(mu.readout.bias) == 0
    assert torch.count_nonzero(mu.blocks[0].qkv.weight[:32]) == 0
    assert torch.count_nonzero(sp.readout.weight) > 0
    assert torch.count_nonzero(sp.blocks[0].qkv.weight[:32]) > 0
    # PyTorch's default: embeddings N(0, 1), linear weights U(±1/√fan_in)
    assert 0.8 < float(mu.tok_emb.weight.detach().std()) < 1.2
    fc = mu.blocks[0].fc.weight.detach()
    assert float(fc.abs().max()) <= 1 / 32 ** 0.5 + 1e-6
    assert _gpt(32, "mup", init_std=0.02).tok_emb.weight.std() < 0.05


def test_sp_differs_from_mup_above_base_width():
    mu, sp = _mlp(64, "mup"), _mlp(64, "sp")
    assert mu.readout.width_mult() == 4 and sp.readout.width_mult() == 1
    groups = make_optimizer(mu, lr=1.0).param_groups
    assert sorted(g["lr"] for g in groups) == [0.25, 1.0]  # hidden (matrix-like) lr / width_mult


@pytest.mark.parametrize("width", [16, 32])
def test_gpt_forward_shapes_and_causality(width):
    model = _gpt(width, "mup")
    # make the readout non-zero, so logits depend on the inputs
    with seeded(3), torch.no_grad():
        model.readout.weight.normal_()
        for block in model.blocks:
            block.qkv.weight.normal_(std=0.3)
    idx = torch.randint(0, 256, (3, 12), generator=torch.Generator().manual_seed(2))
    logits = model(idx)
    assert logits.shape == (3, 12, 256)
    changed = idx.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 256
    after = model(changed)
    assert torch.allclose(logits[:, :8], after[:, :8], atol=1e-6)
    assert not torch.allclose(logits[:, 8:], after[:, 8:])
    with pytest.raises(ProxyError, match="seq_len"):
        model(torch.zeros(1, GPT_KW["seq_len"] + 1, dtype=torch.long))


def test_readout_is_zero_at_init():
    """The MLP's readout, and the GPT's with readout_zero_init, start at zero: uniform
    logits; the GPT's query rows are zero either way."""
    x = torch.rand(4, 64, generator=torch.Generator().manual_seed(0))
    assert torch.count_nonzero(_mlp(32, "mup")(x)) == 0
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    assert torch.count_nonzero(_gpt(32, "mup", readout_zero_init=True)(idx)) == 0
    assert torch.count_nonzero(_gpt(32, "mup")(idx)) > 0
    block = _gpt(32, "mup").blocks[0]
    assert torch.count_nonzero(block.qkv.weight[:32]) == 0  # zero query
    assert torch.count_nonzero(block.qkv.weight[32:]) > 0


@pytest.mark.parametrize("kw", [{}, {"init_std": 0.02}])
def test_gpt_readout_init_is_mups_and_scales_like_one_over_fan_in(kw):
    """mup's MuReadout init: the stored weight is PyTorch's times √width_mult (what
    set_base_shapes leaves on a MuReadout) or N(0, init_std²), so the effective weight
    (stored / width_mult) has std ∝ 1/fan_in (TP V Table 3); SP keeps the unscaled init."""
    def eff(model):
        ro = model.readout
        return float(ro.weight.detach().std()) / ro.width_mult()
    small, big = eff(_gpt(16, "mup", **kw)), eff(_gpt(128, "mup", **kw))
    assert big / small == pytest.approx(16 / 128, rel=0.1)
    stored = float(_gpt(128, "mup", **kw).readout.weight.detach().std())
    # PyTorch's U(±1/√fan_in): std 1/√(3·128), times √8; or N(0, 0.02²) as it is
    expected = 1 / math.sqrt(3 * 128) * math.sqrt(128 / 16) if not kw else 0.02
    assert stored == pytest.approx(expected, rel=0.1)
    sp = float(_gpt(128, "sp").readout.weight.detach().std())
    assert sp == pytest.approx(1 / math.sqrt(3 * 128), rel=0.1)


def test_gpt_init_variance_scales_like_one_over_fan_in():
    def std(model):
        return model.blocks[0].proj.weight.std().item(), model.tok_emb.weight.std().item()
    for kw in ({}, {"init_std": 0.02}):     # PyTorch's default init, and a set std
        (mu_small, emb_small), (mu_big, emb_big) = (std(_gpt(16, "mup", **kw)),
                                                    std(_gpt(128, "mup", **kw)))
        assert mu_big / mu_small == pytest.approx(math.sqrt(16 / 128), rel=0.15)
        assert emb_big / emb_small == pytest.approx(1.0, rel=0.1)  # vector-like
    # SP with a set std: constant std; PyTorch's default is fan-in scaled in SP too
    sp_small, sp_big = (std(_gpt(16, "sp", init_std=0.02))[0],
                        std(_gpt(128, "sp", init_std=0.02))[0])
    assert sp_big / sp_small == pytest.approx(1.0, rel=0.15)


class _Tied(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.emb = nn.Embedding(64, width)
        self.hidden = nn.Linear(width, width)
        self.readout = mup.MuSharedReadout(self.emb.weight, bias=False)

    def forward(self, idx):
        return self.readout(self.hidden(self.emb(idx)))


def test_shared_readout_embedding_init_does_not_grow_with_width():
    """mup issue 55: set_base_shapes rescales the shared weight by √width_mult; we undo it."""
    with seeded(0):
        small = build_parametrized(_Tied, 16, 16, "mup")
        big = build_parametrized(_Tied, 256, 16, "mup")
    assert big.emb.weight.std().item() == pytest.approx(small.emb.weight.std().item(), rel=0.1)


class _PlainReadout(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.hidden = nn.Linear(8, width)
        self.out = nn.Linear(width, 3)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def test_guard_plain_linear_readout():
    with pytest.raises(ProxyError, match="MuReadout"):
        build_parametrized(_PlainReadout, 32, 16, "mup")
    build_parametrized(_PlainReadout, 32, 16, "sp")  # SP needs no MuReadout


def test_guard_mup_declared_but_nothing_scales():
    def ignores_width(width):
        return MuMLP(64, 16, 10)
    with pytest.raises(ProxyError, match="nothing scales"):
        build_parametrized(ignores_width, 64, 16, "mup")
    build_parametrized(ignores_width, 16, 16, "mup")  # at base width multipliers are 1 by rule


def test_guard_adam_with_weight_decay():
    model = _mlp(32, "mup")
    with pytest.raises(ProxyError, match="adamw"):
        make_optimizer(model, lr=1e-3, weight_decay=0.01, kind="adam")
    assert isinstance(make_optimizer(model, lr=1e-3, kind="adam"), torch.optim.Adam)
    assert isinstance(make_optimizer(model, lr=1e-3, weight_decay=0.1), torch.optim.AdamW)
    assert isinstance(make_optimizer(model, lr=1e-3, kind="sgd"), torch.optim.SGD)


@pytest.mark.parametrize("kwargs, match", [
    (dict(width=32, base_width=16, parametrization="ntk"), "unknown parametrization"),
    (dict(width=8, base_width=16, parametrization="mup"), "width=8 < base_width=16"),
    (dict(width=16, base_width=0, parametrization="mup"), "base_width must be >= 1"),
])
def test_guard_bad_arguments(kwargs, match):
    with pytest.raises(ProxyError, match=match):
        build_parametrized(lambda w: MuMLP(64, w, 10), **kwargs)


def test_other_input_errors():
    with pytest.raises(ProxyError, match="multiple of d_head"):
        MuGPT(20, GPTShape(d_head=8))
    with pytest.raises(ProxyError, match="depth"):
        MuMLP(64, 16, 10, MLPShape(depth=0))
    with pytest.raises(ProxyError, match="lr"):
        make_optimizer(_mlp(16, "sp"), lr=-1.0)
    with pytest.raises(ProxyError, match="unknown optimizer"):
        make_optimizer(_mlp(16, "sp"), lr=1e-3, kind="lion")
    with pytest.raises(ProxyError, match="infshape"):
        make_optimizer(MuMLP(64, 16, 10), lr=1e-3)


def test_count_parameters():
    assert count_parameters(MuMLP(64, 16, 10, MLPShape(depth=2))) == 64 * 16 + 16 * 16 + 16 * 10


@pytest.mark.parametrize("width", [32, 64])
def test_adam_steps_reduce_training_loss_on_digits(width):
    data = load_digits_data(seed=0)
    model = _mlp(width, "mup", base_width=32)
    opt = make_optimizer(model, lr=2 ** -7, kind="adam")
    x_all, y_all = torch.from_numpy(data.train_x), torch.from_numpy(data.train_y)

    def train_loss():
        with torch.no_grad():
            return nn.functional.cross_entropy(model(x_all), y_all).item()

    before = train_loss()
    for step in range(30):
        xb, yb = classification_batch(data, 64, seed=0, step=step)
        opt.zero_grad()
        nn.functional.cross_entropy(model(torch.from_numpy(xb)), torch.from_numpy(yb)).backward()
        opt.step()
    after = train_loss()
    assert before == pytest.approx(math.log(10), rel=1e-5)  # zero readout: uniform logits
    assert after < 0.5 * before


# -- GPT knobs: rotary positions, tied embeddings (mup issue 55) ---------------------------
@pytest.mark.parametrize("positions", ["learned", "rotary"])
@pytest.mark.parametrize("tied", [False, True])
def test_gpt_knobs_forward_causal_and_tied_init_width_independent(positions, tied):
    from mutune.proxies.gpt import build_gpt

    stds = []
    for w in (32, 128, 512):
        m = build_gpt(w, vocab=64, seq_len=12, depth=1, d_head=16, ffn_ratio=2, base_width=32,
                      parametrization="mup", positions=positions, tied=tied)
        if tied:
            assert m.readout.weight is m.tok_emb.weight
        assert (m.pos_emb is None) == (positions == "rotary")
        stds.append(float(m.tok_emb.weight.detach().std()))
        x = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
        y1 = m(x)
        x2 = x.clone()
        x2[:, -1] = (x2[:, -1] + 1) % 64
        y2 = m(x2)
        assert y1.shape == (2, 12, 64)
        assert torch.allclose(y1[:, :-1], y2[:, :-1], atol=1e-6)
    # the embedding init does not grow with width (mup issue 55), tied or not
    assert max(stds) / min(stds) < 1.1, stds


def test_rotary_needs_even_d_head():
    from mutune.proxies.gpt import GPTShape, MuGPT

    with pytest.raises(ProxyError, match="even d_head"):
        MuGPT(15, GPTShape(d_head=15, positions="rotary"))


def test_saved_base_shapes_build_the_same_model():
    """Models built from a saved .bsh equal those built from base and delta models."""
    from mutune.proxies.gpt import build_gpt
    from mutune.proxies.mlp import MLPShape, MuMLP, build_mlp
    from mutune.proxies.parametrization import base_shapes_text

    bsh = base_shapes_text(lambda w: MuMLP(8, w, 3, MLPShape(depth=2)), 16)
    assert bsh.startswith("# mup base shapes")
    for w in (16, 64):
        outs = []
        for shapes in (None, bsh):
            with torch.random.fork_rng():
                torch.manual_seed(3)
                m = build_mlp(w, d_in=8, n_classes=3, depth=2, base_width=16,
                              parametrization="mup", output_mult=2.0, base_shapes=shapes)
            outs.append(m)
        assert [p.infshape.width_mult() for p in outs[0].parameters()] == \
            [p.infshape.width_mult() for p in outs[1].parameters()]
        for a, b in zip(outs[0].parameters(), outs[1].parameters()):
            assert torch.equal(a, b)
    with pytest.raises(ProxyError, match="not a mup .bsh"):
        build_gpt(32, vocab=16, seq_len=4, depth=1, d_head=16, ffn_ratio=1, base_width=16,
                  parametrization="mup", base_shapes="- just a list")


def test_parameter_count_on_the_meta_device_builds_nothing():
    """ProxyTask.n_params counts on the meta device: the same count as the real model at a
    small width, and a 2-billion-parameter MLP (8.6 GB of float32) is counted without a
    weight being allocated — every parameter the factory built is a meta tensor."""
    from mutune.config import ModelSpec, TrainConfig, load_config
    from mutune.proxies.data import load_digits_data
    from mutune.proxies.family import ModelFamily
    from mutune.proxies.task import ProxyTask, load_task_data

    cfg = load_config(MLP_DIGITS)
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
    hp = {"output_mult": 2.0}
    assert task.n_params(64, hp) == sum(p.numel() for p in task.build(64, hp).parameters())
    devices = []
    real_build = task.family.build

    def spy(width, **kw):
        model = real_build(width, **kw)
        devices.extend({p.device.type for p in model.parameters()})
        return model

    spied = ProxyTask(cfg.model, cfg.train, task.data,
                      family=dataclasses.replace(task.family, build=spy))
    w, d_in, k, depth = 32768, 64, 10, cfg.model.depth
    expected = d_in * w + (depth - 1) * w * w + w * k      # MuMLP: no biases
    assert spied.n_params(w, hp) == expected and expected > 2e9
    assert set(devices) == {"meta"}

    class Spec(ModelSpec):
        family: str = "copies"

    def copies(width, *, depth, d_in, n_classes):   # copies its weights to a concrete device
        return nn.Sequential(nn.Linear(d_in, width), nn.Linear(width, n_classes)).to("cpu")

    fam = ModelFamily(name="copies", spec=Spec, build=copies, readout=None)
    bad = ProxyTask(Spec(), TrainConfig(), load_digits_data(val_fraction=0.2, seed=0),
                    family=fam)
    with pytest.raises(ProxyError, match="'copies' cannot be built on the meta device"):
        bad.n_params(64, {})


def test_adam_steps_with_the_fused_kernel_and_lands_where_the_foreach_path_does():
    """Adam/AdamW use torch's fused kernel on a CPU model (one pass per tensor), and two
    steps land where the default multi-tensor path does, to float rounding."""
    from mutune.proxies.parametrization import fused_adam_ok

    fused, plain = _mlp(64, "mup"), _mlp(64, "mup")
    x = torch.randn(8, fused.d_in, generator=torch.Generator().manual_seed(1))
    opt = make_optimizer(fused, lr=1e-2, weight_decay=0.1)
    assert all(g["fused"] for g in opt.param_groups)
    assert make_optimizer(_mlp(64, "mup"), lr=1e-2, kind="adam").defaults["fused"]
    assert not make_optimizer(_mlp(64, "mup"), lr=1e-2, kind="sgd").defaults.get("fused")
    ref = mup.optim.MuAdamW(plain.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
    for model, o in ((fused, opt), (plain, ref)):
        for _ in range(2):
            o.zero_grad()
            model(x).square().mean().backward()
            o.step()
    for a, b in zip(fused.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # integer tensors or several devices: the default path
    assert not fused_adam_ok([torch.zeros(2, dtype=torch.int64, requires_grad=False)])
    assert not fused_adam_ok([torch.zeros(2), torch.zeros(2, device="meta")])
    assert fused_adam_ok([torch.zeros(2), torch.zeros(3)])
