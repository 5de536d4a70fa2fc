"""The CUDA code path (bf16 autocast, flash SDPA) selected only when CUDA is present."""
import torch

from mutune.proxies.device import select_device
from mutune.proxies.gpt import build_gpt


def test_cpu_when_cuda_absent_or_not_asked(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for prefer in (True, False):
        d = select_device(prefer_cuda=prefer)
        assert d.kind == "cpu" and d.autocast_dtype is None and not d.flash_sdpa


def test_compute_context_trains_a_gpt_step_on_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    d = select_device(prefer_cuda=True)
    m = build_gpt(32, vocab=256, seq_len=8, depth=1, d_head=16, ffn_ratio=2, base_width=32,
                  parametrization="mup").to(d.device)
    x = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    with d.compute():
        out = m(x)
    assert out.dtype == torch.float32 and out.device.type == "cpu"
    out.float().mean().backward()
    assert m.blocks[0].qkv.weight.grad is not None
