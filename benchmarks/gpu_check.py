"""One short run on a CUDA machine: the μP GPT under bf16 autocast with the flash SDPA kernel.

Checks (issue 3) that the CUDA path of :mod:`mutune.proxies.device` works end to end: the flash
kernel accepts the μP ``attn_mult/d_head`` scale (it raises if it cannot run), bf16 autocast
trains (loss falls, stays finite), and reports the step time. Prints one JSON line:

    {"benchmark": "gpu_check", "device": …, "flash_sdpa": true, "autocast": "bfloat16",
     "width": …, "steps": …, "first_loss": …, "last_loss": …, "ms_per_step": …,
     "tokens_per_s": …, "max_memory_mb": …}

On a machine without CUDA it prints {"benchmark": "gpu_check", "skipped": "no CUDA"} and exits 0.
Usage: python benchmarks/gpu_check.py [--width 512] [--steps 50]
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from mutune.proxies.data import lm_batch, load_text_data
from mutune.proxies.device import select_device
from mutune.proxies.gpt import build_gpt
from mutune.proxies.parametrization import make_optimizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=256)
    a = p.parse_args()
    dev = select_device(prefer_cuda=True)
    if dev.kind != "cuda":
        print(json.dumps({"benchmark": "gpu_check", "skipped": "no CUDA"}))
        return
    data = load_text_data()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_gpt(a.width, vocab=256, seq_len=a.seq_len, depth=4, d_head=64,
                          ffn_ratio=4, base_width=128, parametrization="mup",
                          positions="rotary").to(dev.device)
    opt = make_optimizer(model, lr=3e-3)
    losses, times = [], []
    torch.cuda.reset_peak_memory_stats()
    for step in range(1, a.steps + 1):
        x, y = (torch.from_numpy(t).to(dev.device) for t in
                lm_batch(data.train, a.batch, a.seq_len, seed=0, step=step))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with dev.compute():
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256).float(),
                                                     y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    steady = sorted(times[5:])[len(times[5:]) // 2] if len(times) > 5 else times[-1]
    print(json.dumps({
        "benchmark": "gpu_check", "device": torch.cuda.get_device_name(0),
        "flash_sdpa": dev.flash_sdpa, "autocast": str(dev.autocast_dtype).removeprefix("torch."),
        "width": a.width, "steps": a.steps, "first_loss": losses[0], "last_loss": losses[-1],
        "loss_fell": losses[-1] < losses[0], "finite": all(l == l for l in losses),
        "ms_per_step": steady * 1e3, "tokens_per_s": a.batch * a.seq_len / steady,
        "max_memory_mb": torch.cuda.max_memory_allocated() / 2**20}))


if __name__ == "__main__":
    main()
