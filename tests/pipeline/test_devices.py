"""Devices priced right: a device's name mapped to the cost table, bf16 and flash attention
only where the device supports them, the device kind taken from the granted device, and a
whole sweep on a Ray cluster that declares GPUs (``ray.init(num_gpus=…)`` on this CPU
machine) packing two half-GPU trials per card and billing the fraction."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mutune.config import load_config, parse_config
from mutune.config.cost import DEFAULT_DEVICES, device_kind_of
from mutune.pipeline.devices import granted_device_kind, with_granted_device
from mutune.proxies.device import numerics_for
from tests.conftest import MLP_DIGITS, config_error

KNOWN = list(DEFAULT_DEVICES)


@pytest.mark.parametrize("name, kind", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"),
    ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-40GB", "a100"), ("NVIDIA A10G", "a10g"),
    ("Tesla V100-SXM2-16GB", "v100"), ("Tesla T4", "t4"), ("NVIDIA L4", "l4"),
    ("NVIDIA B200", "b200"), ("A100", "a100"), ("H100", "h100"),
    ("NVIDIA RTX 6000 Ada Generation", "nvidia-rtx-6000-ada-generation")])
def test_a_device_name_maps_to_its_cost_table_kind(name, kind):
    assert device_kind_of(name, KNOWN) == kind


def test_a_kind_the_config_adds_is_found_and_an_empty_name_refused():
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["cost"]["devices"] = {"MI300X": {"peak_flops": 1.3e15, "on_demand": 4.0}}
    cfg = parse_config(d)
    assert device_kind_of("AMD Instinct MI300X", cfg.cost.kinds()) == "mi300x"
    with pytest.raises(ValueError, match="no letters or digits"):
        device_kind_of(" -- ", KNOWN)


@pytest.mark.parametrize("cap, bf16, dtype, flash", [
    ((9, 0), True, torch.bfloat16, True),       # H100 / H200
    ((8, 0), True, torch.bfloat16, True),       # A100
    ((8, 6), True, torch.bfloat16, True),       # A10G
    ((8, 9), True, torch.bfloat16, True),       # L4
    ((7, 5), False, None, False),               # T4: float32, SDPA's own kernel choice
    ((7, 0), False, None, False)])              # V100
def test_bf16_and_flash_only_where_the_device_takes_them(cap, bf16, dtype, flash):
    assert numerics_for(cap, bf16_supported=bf16) == (dtype, flash)


def _cfg(**ray):
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["ray"].update(ray)
    return parse_config(d)


def test_the_device_kind_comes_from_the_granted_device():
    assert granted_device_kind(_cfg(), {"CPU": 2.0}) == (
        "cpu", "CPU trials (ray.gpus_per_trial = 0)")
    gpu = _cfg(gpus_per_trial=0.5)
    kind, src = granted_device_kind(gpu, {"CPU": 8.0, "GPU": 1.0,
                                          "accelerator_type:H100": 1.0})
    assert kind == "h100" and "accelerator_type:H100" in src
    assert granted_device_kind(gpu, {"GPU": 2.0, "accelerator_type:A10G": 1.0,
                                     "accelerator_type:T4": 1.0})[0] == "a10g,t4"
    assert granted_device_kind(gpu, {"GPU": 1.0})[0] == "cuda"
    named = _cfg(gpus_per_trial=1, device_kind="A100")
    assert granted_device_kind(named, {"accelerator_type:H100": 1.0})[0] == "a100"
    assert with_granted_device(gpu, {"accelerator_type:H100": 1.0}).ray.device_kind == "h100"
    assert with_granted_device(named, {}) is named


def test_gpu_fractions_and_money_budgets_are_checked_in_the_config():
    with config_error("ray.gpus_per_trial", "1.5", "above 1 it must be a whole number"):
        _cfg(gpus_per_trial=1.5)
    assert _cfg(gpus_per_trial=2).ray.gpus_per_trial == 2
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["ray"]["gpus_per_trial"] = 1
    d["budget"] = {"money": 10.0}
    with config_error("budget.money", "10.0", "with GPU trials needs a price"):
        parse_config(d)
    d["ray"]["device_kind"] = "h100"
    assert parse_config(d).budget.price_per_hour == DEFAULT_DEVICES["h100"].on_demand


SWEEP_ON_DECLARED_GPUS = r"""
import json, logging, sys
sys.path.insert(0, "tests")
import ray
from conftest import make_tiny_config
import mutune
from mutune.config import parse_config

ray.init(address="local", num_cpus=2, num_gpus=1, resources={"accelerator_type:H100": 1.0},
         include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
d = make_tiny_config().model_dump(mode="json")
d["ray"]["gpus_per_trial"] = 0.5
d["transfer"]["confirm_replicates"] = 0
res = mutune.run(parse_config(d), db=sys.argv[1], out_dir=sys.argv[2], progress=False)
from mutune.services.store import Store
with Store.open(sys.argv[1]) as store:
    rows = store.sweep_rows(res.sweep_id)
print("RESULT " + json.dumps({"cost": res.report["cost"],
                              "device_kind": res.report["device_kind"],
                              "trials": [{"devices": t["devices"],
                                          "device_kind": t["device_kind"]}
                                         for t in rows["trials"]]}))
ray.shutdown()
"""


@pytest.mark.slow
def test_a_sweep_on_a_cluster_that_declares_gpus_packs_and_bills_fractions(tmp_path):
    """Ray told of 1 GPU (an H100 by its accelerator type) on this CPU machine: trials ask
    for half a GPU each, so two share the card; each is billed 0.5 GPU, the sweep holds 1
    GPU, and the whole sweep is priced as an H100."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-c", SWEEP_ON_DECLARED_GPUS,
                           f"sqlite:///{tmp_path / 'g.db'}", str(tmp_path / "out")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(line[len("RESULT "):])
    c = got["cost"]
    assert got["device_kind"] == "h100" == c["device_kind"]
    assert {t["devices"] for t in got["trials"]} == {0.5}
    assert {t["device_kind"] for t in got["trials"]} == {"h100"}
    assert c["held_devices"] == 1.0                  # 2 slots × 0.5 GPU, not 2 CPUs
    assert c["price_per_hour"] == DEFAULT_DEVICES["h100"].on_demand
    assert c["trial_ettr"] == c["ettr"] and 0 < c["sweep_ettr"] < 1
    assert c["idle_breakdown_check"]["relative_gap"] < 0.01


def test_a_one_process_cpu_target_holds_every_cpu_the_sweep_holds(tiny_config):
    """On a local CPU cluster the target trains on every CPU the sweep holds (slots ×
    cpus_per_trial), so none idles under it; a cluster address, GPU trials, a concurrency
    cap and ``target.cpus`` change that."""
    from mutune.pipeline.target_devices import target_cpus

    def cpus(target=None, **ray):
        d = tiny_config.model_dump(mode="json")
        d["ray"].update(ray)
        d["target"].update(target or {})
        return target_cpus(type(tiny_config).model_validate(d))

    assert cpus(num_cpus=2, cpus_per_trial=1) == 2
    assert cpus(num_cpus=5, cpus_per_trial=2) == 4          # 2 slots of 2 CPUs
    assert cpus(num_cpus=4, cpus_per_trial=1, max_concurrent_trials=3) == 3
    assert cpus(num_cpus=2, cpus_per_trial=1, address="127.0.0.1:6379") == 1
    assert cpus(num_cpus=2, cpus_per_trial=1, gpus_per_trial=1) == 1
    assert cpus({"cpus": 1}, num_cpus=2, cpus_per_trial=1) == 1
