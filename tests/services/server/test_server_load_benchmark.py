"""benchmarks/server_load.py runs end to end (short and small) and prints its contract."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.services.conftest import REPO

pytestmark = pytest.mark.slow


def test_server_load_benchmark_prints_its_figures():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "server_load.py"),
                          "--duration", "1", "--concurrency", "5", "--submissions", "5",
                          "--procs", "2", "--timeout", "120"],
                         capture_output=True, text=True, timeout=180, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line["benchmark"] == "server_load" and line["concurrency"] == 5
    assert line["submissions"] == 5 and line["lost"] == 0 and line["non_2xx"] == 0
    for key in ("rps", "p50_ms", "p99_ms", "bare_rps", "bare_p99_ms"):
        assert line[key] > 0, key
