"""Counting parameters on the meta device runs no initializer (mutune.proxies.meta_init)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from mutune.proxies.meta_init import SkipInitOnMeta

ROOT = Path(__file__).resolve().parents[2]

COUNT = """
import sys
from mutune.config import load_config
from mutune.proxies.task import ProxyTask, load_task_data
cfg = load_config({path!r})
task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
hp = {{n: 1.0 for n in cfg.search.space}}
meta = task.n_params({width}, hp)
print(meta, "torch._dynamo" in sys.modules)
real = sum(p.numel() for p in task.build({width}, hp).parameters())
print(real)
"""


def _count(config: Path, width: int) -> tuple[int, bool, int]:
    out = subprocess.run([sys.executable, "-c", COUNT.format(path=str(config), width=width)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    return int(out[0]), out[1] == "True", int(out[2])


def test_meta_count_equals_the_real_model_and_imports_no_dynamo():
    """Both built-in families (the GPT's normal_ initializers are what used to import
    torch._dynamo on the meta device): the meta count equals the real model's, and the count
    leaves torch._dynamo unimported (a fresh interpreter each)."""
    for config, width in ((ROOT / "configs" / "gpt-text.yaml", 64),
                          (ROOT / "configs" / "mlp-digits.yaml", 96)):
        meta, dynamo, real = _count(config, width)
        assert meta == real > 0, config.name
        assert dynamo is False, config.name


def test_only_meta_tensors_are_skipped():
    """Inside the mode a concrete tensor is still initialized (values change, as seeded); a
    meta tensor comes back as the same object, through a Tensor method or torch.nn.init, with
    positional or keyword ``tensor``; other operations on meta tensors still run."""
    gen = torch.Generator().manual_seed(0)
    with SkipInitOnMeta():
        cpu = torch.zeros(4, 3)
        torch.nn.init.normal_(cpu, generator=gen)
        assert bool((cpu != 0).all())
        cpu.uniform_(2.0, 3.0)
        assert bool(((cpu >= 2.0) & (cpu <= 3.0)).all())
        meta = torch.empty(5, 7, device="meta", requires_grad=True)
        assert torch.nn.init.normal_(meta) is meta
        assert torch.nn.init.kaiming_uniform_(tensor=meta) is meta
        assert torch.nn.init.trunc_normal_(meta, std=0.02) is meta
        with torch.no_grad():
            assert meta.uniform_() is meta
        assert meta.shape == (5, 7) and meta.requires_grad
        assert (meta @ torch.empty(7, 2, device="meta")).shape == (5, 2)
