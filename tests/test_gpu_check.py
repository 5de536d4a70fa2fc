"""benchmarks/gpu_check.py (issue 18, point 6): the width it picks from probe memory, and both
parts run end to end on the CPU at tiny sizes (``--cpu-smoke``); on a GPU the same code runs
at full size."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module():
    path = REPO / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_width_is_the_widest_whose_fitted_memory_fits():
    mod = _module()

    def n_params(w: int) -> int:          # a depth-2 GPT: 12·L·w² plus the embeddings
        return 24 * w * w + 512 * w

    def peak(w: int) -> float:            # 20 B per parameter, 4 MiB of activations per unit width
        return 20 * n_params(w) + 4 * 2**20 * w + 3 * 2**30

    probes = {w: peak(w) for w in (1024, 2048, 3072)}
    width, fit = mod.pick_width(n_params, probes, 100 * 2**30, step=1024, cap=32768)
    assert fit["alpha"] == pytest.approx(20, rel=1e-6)
    assert fit["beta"] == pytest.approx(4 * 2**20, rel=1e-6)
    assert fit["gamma"] == pytest.approx(3 * 2**30, rel=1e-6)
    assert peak(width) <= 100 * 2**30 < peak(width + 1024)
    assert mod.pick_width(n_params, probes, 2**30, step=1024, cap=32768)[0] is None


def test_a_fit_below_the_optimizer_floor_is_refitted_at_sixteen_bytes_per_parameter():
    mod = _module()

    def n_params(w: int) -> int:
        return 24 * w * w

    probes = {w: 8 * n_params(w) + 2**20 * w for w in (1024, 2048, 3072)}
    _, fit = mod.pick_width(n_params, probes, 50 * 2**30, step=1024, cap=8192)
    assert fit["alpha"] == 16
    with pytest.raises(ValueError, match="three or more widths"):
        mod.pick_width(n_params, {1024: 1, 2048: 2}, 2**30, step=1024, cap=8192)


def test_tokens_too_many_for_any_width_under_the_index_limit_are_refused():
    """2^28 tokens × ffn_ratio 4 leave no width under 2^31 activation elements: the run stops
    before building anything, naming the flag and the limit."""
    mod = _module()
    with pytest.raises(SystemExit, match=r"--tokens-per-step 268435456: .* under 2\^31"):
        mod.main(["--cpu-smoke", "--part", "target", "--tokens-per-step", str(2 ** 28),
                  "--width-step", "32"])


@pytest.mark.slow
def test_both_parts_run_on_the_cpu_and_print_their_figures(tmp_path):
    out_file = tmp_path / "gpu_check.jsonl"
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--cpu-smoke",
         "--tokens-per-step", "256", "--width-step", "32", "--warmup", "1", "--steps", "2",
         "--proxies", "2", "--proxy-steps", "3", "--out", str(out_file)],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    target, proxies = (json.loads(line) for line in out.stdout.strip().splitlines())
    assert [json.loads(line) for line in out_file.read_text().splitlines()] == [target, proxies]
    assert target["part"] == "target" and target["device_kind"] == "cpu"
    assert target["width"] == 64 and target["depth"] == 2 and target["finite"]
    assert target["tokens_per_step"] == 256 and target["n_params"] > 0
    assert target["ms_per_step"] > 0 and target["tflops_per_s"] > 0
    assert target["mfu"] is None                      # no datasheet peak for a CPU
    assert proxies["part"] == "proxies" and proxies["processes"] == 2
    assert proxies["width"] == 128 and proxies["samples_per_step"] == 16 * 64
    assert proxies["alone_samples_per_s"] > 0 and proxies["total_samples_per_s"] > 0
    assert proxies["speedup"] == pytest.approx(
        proxies["total_samples_per_s"] / proxies["alone_samples_per_s"])
    lo, hi = proxies["per_process_samples_per_s_range"]
    assert lo <= proxies["per_process_samples_per_s"] <= hi
    assert proxies["nvml_util_pct"] is None and proxies["nvml_error"]   # no NVML here
