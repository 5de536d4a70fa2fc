"""The import boundaries of DESIGN.md §3, checked on the source and in fresh interpreters."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "mutune"


def _imports(folder: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for py in folder.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        out[str(py.relative_to(PKG))] = names
    return out


@pytest.mark.parametrize("folder, forbidden", [
    ("proxies", ("mutune.search", "mutune.scaling", "mutune.services", "mutune.pipeline",
                 "ray", "sqlalchemy", "fastapi")),
    ("scaling", ("torch", "ray", "mup", "mutune.search", "mutune.proxies",
                 "mutune.services", "sqlalchemy")),
    ("search", ("mutune.services", "mutune.pipeline", "sqlalchemy", "fastapi")),
])
def test_stage_imports(folder, forbidden):
    for path, names in _imports(PKG / folder).items():
        bad = {n for n in names for f in forbidden if n == f or n.startswith(f + ".")}
        assert not bad, f"mutune/{path} imports {sorted(bad)}"


def test_pipeline_does_not_import_services_and_only_services_import_sqlalchemy():
    names = _imports(PKG)
    for face_free in ("pipeline.py", "resume.py"):
        assert not {n for n in names[face_free] if n.startswith("mutune.services")}, face_free
    for path, ns in names.items():
        if not path.startswith("services"):
            assert not {n for n in ns if n.startswith(("sqlalchemy", "alembic", "fastapi"))}, \
                path


@pytest.mark.parametrize("module, absent", [
    ("mutune", ("ray", "sqlalchemy", "torch", "fastapi", "httpx", "uvicorn")),
    ("mutune.proxies", ("ray", "sqlalchemy", "fastapi")),
    ("mutune.scaling", ("torch", "ray")),
    ("mutune.config", ("torch", "ray", "sqlalchemy")),
])
def test_import_pulls_in_nothing_heavy(module, absent):
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in {absent!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"
