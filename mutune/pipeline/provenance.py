"""What ran: package versions, hardware, code revision and dataset fingerprint
(docs/architecture.md §7), so a rerun can say where its environment differs."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from typing import Any

__all__ = ["collect_provenance", "provenance_differences"]

_PACKAGES = ("mutune", "torch", "mup", "ray", "numpy", "optuna", "sqlalchemy")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision(cwd: str) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def collect_provenance(dataset: dict[str, Any] | None = None) -> dict[str, Any]:
    """Package versions, Python, OS, CPU, git revision (None outside a repository) and
    ``dataset``."""
    return {"packages": {p: _version(p) for p in _PACKAGES},
            "python": sys.version.split()[0], "platform": platform.platform(),
            "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
            "git_revision": _git_revision(os.getcwd()), "dataset": dataset or {}}


def provenance_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a sweep's recorded provenance and this environment's, as warnings."""
    out = []
    rp, cp = recorded.get("packages", {}), current.get("packages", {})
    for name in sorted(set(rp) | set(cp)):
        if rp.get(name) != cp.get(name):
            out.append(f"package {name}: recorded {rp.get(name)}, now {cp.get(name)}")
    for key, label in (("python", "Python"), ("cpu_model", "CPU model"),
                       ("cpu_count", "CPU count")):
        if recorded.get(key) != current.get(key):
            out.append(f"{label}: recorded {recorded.get(key)}, now {current.get(key)}")
    if "base_shapes" in recorded and recorded.get("base_shapes") != current.get("base_shapes"):
        out.append("μP base shapes differ from the recorded .bsh")
    rd, cd = recorded.get("dataset", {}), current.get("dataset", {})
    for key in ("fingerprint", "size_bytes"):
        if rd.get(key) != cd.get(key):
            out.append(f"dataset {key}: recorded {rd.get(key)}, now {cd.get(key)}")
    return out
