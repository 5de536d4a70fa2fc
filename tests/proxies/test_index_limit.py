"""A CUDA run whose micro-batch makes an activation of 2^31 elements or more is warned about
before it starts (mutune.proxies.index_limit): the H200 measurement of issue 18 (GPT width
11,264 on 65,536 tokens a step trained NaN), the micro-batch count that fits, and the dry run
that shows it."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from mutune.config import load_config, parse_config
from mutune.proxies.index_limit import INDEX_LIMIT, index_limit_warning, widest_activation
from tests.conftest import MLP_DIGITS


GPT_TEXT = Path(__file__).resolve().parents[2] / "configs" / "gpt-text.yaml"


def _gpt():
    return load_config(GPT_TEXT).model          # ffn_ratio 4, vocab 256, seq_len 64


def test_the_measured_failure_is_past_the_limit_and_two_micro_batches_fit():
    model = _gpt()
    # 1,024 rows × 64 tokens, FFN 4 × 11,264: the step that trained NaN on the H200
    assert widest_activation(model, 11264, 1024) == 65536 * 4 * 11264 > INDEX_LIMIT
    note = index_limit_warning(model, 11264, 1024, 1)
    assert note is not None and "2.95e+09 elements" in note
    assert "train.micro_batches to 2 or more" in note and "model.ffn_ratio 4" in note
    assert index_limit_warning(model, 11264, 1024, 2) is None       # 1.48e9 elements
    # the width the GPU check trained (13,312 at 32,768 tokens) stays under it
    assert widest_activation(model, 13312, 512) < INDEX_LIMIT
    assert index_limit_warning(model, 13312, 512, 1) is None


def test_the_logits_count_when_the_vocabulary_is_wider_than_the_ffn():
    model = _gpt().model_copy(update={"vocab": 1 << 20, "seq_len": 2048})
    assert widest_activation(model, 1024, 1) == 2048 * (1 << 20)       # 2^31: at the limit
    note = index_limit_warning(model, 1024, 1, 1)
    assert note is not None and "no micro-batch count fits" in note


def test_families_whose_shapes_mutune_does_not_know_are_not_judged():
    mlp = load_config(MLP_DIGITS).model
    assert widest_activation(mlp, 1 << 20, 1 << 20) is None
    assert index_limit_warning(mlp, 1 << 20, 1 << 20, 1) is None


def test_the_dry_run_of_a_gpu_sweep_shows_the_warning():
    """A GPU sweep's plan carries the target's warning and ``mutune run --dry-run`` prints it
    (timed here on the CPU: the warning depends on shapes, not on the device)."""
    from rich.console import Console

    from mutune.pipeline.dry_run import plan_sweep
    from mutune.services.report.plan import render_plan

    d = load_config(GPT_TEXT).model_dump(mode="json")
    d["widths"] = [32, 64]
    d["target"]["width"] = 16384           # 6.4e9 parameters: timed by extrapolation
    d["train"]["batch_size"] = 512         # 32,768 tokens × 4 × 16,384 = 2^31
    d["ray"]["gpus_per_trial"] = 1
    d["search"]["num_samples"] = 4
    plan = plan_sweep(parse_config(d), warmup_steps=2, overhead_s=1.0, on_ray=False)
    warning = plan["target"]["index_limit_warning"]
    assert warning is not None and "train.micro_batches to 2 or more" in warning
    out = io.StringIO()
    render_plan(plan, Console(file=out, width=200))
    assert "warning: the target run: width 16384" in out.getvalue()
    d["train"]["micro_batches"] = 2
    plan = plan_sweep(parse_config(d), warmup_steps=2, overhead_s=1.0, on_ray=False)
    assert plan["target"]["index_limit_warning"] is None
    # the limit was seen on CUDA: the same shapes on CPU trials are not judged
    d["train"]["micro_batches"], d["ray"]["gpus_per_trial"] = 1, 0
    plan = plan_sweep(parse_config(d), warmup_steps=2, overhead_s=1.0, on_ray=False)
    assert plan["target"]["index_limit_warning"] is None


def test_the_target_stage_warns_before_a_gpu_target_past_the_limit():
    """The target stage's check (:func:`warn_index_limit`) judges each worker's share of the
    batch: the same target on two data-parallel workers stays under the limit."""
    import warnings

    from mutune.pipeline.target_devices import warn_index_limit
    from mutune.proxies.task import ProxyTask

    d = load_config(GPT_TEXT).model_dump(mode="json")
    d["widths"], d["target"]["width"] = [32, 64], 16384
    d["train"]["batch_size"], d["ray"]["gpus_per_trial"] = 512, 1
    config = parse_config(d)
    task = ProxyTask(config.model, config.train, data=None)
    with pytest.warns(RuntimeWarning, match=r"the target run: width 16384.*micro_batches to 2"):
        warn_index_limit(config, task, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_index_limit(config, task, 2)                  # 256 rows a worker: under it
        cpu = parse_config({**d, "ray": {**d["ray"], "gpus_per_trial": 0}})
        warn_index_limit(cpu, task, 1)                     # CPU trials: not judged
