"""Evaluation split among data-parallel workers: the parts' (n, Σ loss, Σ loss²) summed give
the whole split's mean and standard error (digits/MLP and text/GPT, one process)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mutune.config import load_config, parse_config
from mutune.errors import ProxyError
from mutune.proxies.meta_init import SkipInitOnMeta
from mutune.proxies.task import ProxyTask, load_task_data, loss_summary

ROOT = Path(__file__).resolve().parents[2]


def _parts(task, model, split, world):
    sums = [0.0, 0.0, 0.0]
    for rank in range(world):
        for i, v in enumerate(task.eval_moments(model, split, rank=rank, world=world)):
            sums[i] += v
    return sums


def _gpt_text_task():
    d = load_config(ROOT / "configs" / "gpt-text.yaml").model_dump(mode="json")
    d["model"].update(base_width=16, depth=1, seq_len=16)
    d["train"].update(eval_windows=37, batch_size=8)
    cfg = parse_config(d)
    return ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


@pytest.mark.parametrize("world", [2, 3])
def test_parts_of_a_digits_split_sum_to_the_whole(tiny_config, one_thread, world):
    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    model = task.build(16, {"lr": 0.01, "output_mult": 1.0})
    for split in ("val", "test"):
        n, total, squares = _parts(task, model, split, world)
        mean, se = task.evaluate(model, split)
        assert n == len(getattr(task.data, f"{split}_y"))
        assert loss_summary(n, total, squares) == pytest.approx((mean, se), rel=1e-5)


def test_parts_of_text_windows_sum_to_the_whole(one_thread):
    task = _gpt_text_task()
    model = task.build(16, {"lr": 0.01})
    n, total, squares = _parts(task, model, "val", 2)
    assert n == 37
    assert loss_summary(n, total, squares) == pytest.approx(task.evaluate(model, "val"),
                                                            rel=1e-5)


def test_a_bad_part_is_refused_and_tiny_sums_summarise():
    with pytest.raises(ProxyError, match="0 ≤ rank < world"):
        ProxyTask.eval_moments(None, None, "val", rank=2, world=2)
    one, none = loss_summary(1, 2.0, 4.0), loss_summary(0, 0.0, 0.0)
    assert one[0] == 2.0 and math.isnan(one[1])           # one unit: no spread to estimate
    assert all(math.isnan(v) for v in none)


@pytest.mark.parametrize("family", ["mlp", "gpt"])
def test_evaluation_moves_its_inputs_to_the_models_device(tiny_config, one_thread, family):
    """The evaluation's inputs go to the model's device: here PyTorch's meta device, which,
    like CUDA, refuses a CPU input (no GPU needed); the per-unit losses stay there."""
    task = (_gpt_text_task() if family == "gpt" else
            ProxyTask(tiny_config.model, tiny_config.train,
                      load_task_data(tiny_config)).with_base_shapes())
    hp = {"lr": 0.01} if family == "gpt" else {"lr": 0.01, "output_mult": 1.0}
    with torch.device("meta"), SkipInitOnMeta():
        model = task.build(16, hp)
    per = task._unit_losses(model, "val", 0, 1)
    assert per.device.type == "meta" and per.dtype == torch.float64
    assert per.shape == ((37,) if family == "gpt" else (len(task.data.val_y),))
