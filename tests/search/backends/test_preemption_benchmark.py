"""benchmarks/preemption.py runs end to end (a small sweep) and prints its contract: graceful
notices lose no step, a hard kill loses at most the checkpoint interval, no report is lost and
the scheduler decides as it did without preemptions (one trial at a time)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
KEYS = {"benchmark", "preemptions", "graceful", "hard", "lost_steps_graceful",
        "lost_steps_per_hard_kill", "checkpoint_interval_steps", "recovery_s_per_preemption",
        "reports_lost", "same_decisions", "ettr", "ettr_without_preemption"}


def test_preemption_benchmark_prints_its_figures():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "preemption.py"),
                          "--samples", "6", "--fraction", "0.5", "--hard-fraction", "0.34"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    fig = json.loads(out.stdout.strip().splitlines()[-1])
    assert KEYS <= fig.keys() and fig["benchmark"] == "preemption"
    assert fig["graceful"] == 2 and fig["hard"] == 1 and fig["preemptions"] == 3
    assert fig["preemptions"] >= 0.25 * fig["trials"]
    assert fig["lost_steps_graceful"] == 0
    assert fig["lost_steps_per_hard_kill"] <= fig["checkpoint_interval_steps"]
    assert fig["reports_lost"] == 0 and fig["same_decisions"] is True
    assert 0 < fig["ettr"] <= 1 and 0 < fig["ettr_without_preemption"] <= 1
