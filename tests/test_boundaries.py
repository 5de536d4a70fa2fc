"""The house rules of docs/architecture.md §2, checked on the source and in fresh interpreters:
which room may import which, no import circle, no private name imported across modules, small
modules, and no file naming a design document users do not have."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mutune"


def _module_name(py: Path) -> str:
    parts = list(py.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(py: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = _module_name(py).split(".")
    if py.name != "__init__.py":
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _sources() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for py in sorted(PKG.rglob("*.py")):
        if "migrations" in py.parts:
            continue
        out[_module_name(py)] = (py, ast.parse(py.read_text(encoding="utf-8")))
    return out


SOURCES = _sources()


def _imports(tree: ast.Module, py: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(py, node)
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in SOURCES}
            names.update(subs)        # ``from pkg import module`` names the module only
            if len(subs) < len(node.names):
                names.add(mod)
    return names


ROOMS = {
    "mutune.proxies": ("mutune.search", "mutune.scaling", "mutune.services", "mutune.pipeline",
                       "ray", "sqlalchemy", "fastapi"),
    "mutune.scaling": ("torch", "ray", "mup", "mutune.search", "mutune.proxies",
                       "mutune.services", "mutune.pipeline", "sqlalchemy"),
    "mutune.search": ("mutune.services", "mutune.pipeline", "sqlalchemy", "fastapi"),
    "mutune.search.schedulers": ("ray", "torch", "optuna", "mutune.search.backends"),
    "mutune.search.searchers": ("ray", "torch", "mutune.search.backends"),
    "mutune.search.driver": ("ray", "torch", "optuna", "mutune.search.backends"),
    "mutune.search.backends.simulated": ("ray", "torch"),
    "mutune.search.backends.replay": ("ray", "torch"),
    "mutune.pipeline": ("mutune.services", "sqlalchemy", "alembic", "fastapi"),
    "mutune.config": ("mutune.search", "mutune.pipeline", "mutune.services", "mutune.scaling",
                      "torch", "ray", "sqlalchemy"),
}


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_import_only_what_they_may(room):
    forbidden = ROOMS[room]
    for name, (py, tree) in SOURCES.items():
        if name != room and not name.startswith(room + "."):
            continue
        bad = {n for n in _imports(tree, py) for f in forbidden
               if n == f or n.startswith(f + ".")}
        assert not bad, f"{py.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_services_touch_the_database_and_the_web():
    for name, (py, tree) in SOURCES.items():
        if not name.startswith("mutune.services"):
            bad = {n for n in _imports(tree, py)
                   if n.startswith(("sqlalchemy", "alembic", "fastapi", "uvicorn"))}
            assert not bad, f"{py.relative_to(ROOT)} imports {sorted(bad)}"


def _graph() -> dict[str, set[str]]:
    return {name: {n for n in _imports(tree, py) if n in SOURCES and n != name}
            for name, (py, tree) in SOURCES.items()}


def test_no_import_circle():
    """No module reaches itself through imports (at module level or inside functions)."""
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import circle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_private_name_is_imported_across_modules():
    for py, tree in SOURCES.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                mod = _resolve(py, node)   # a package's own private modules are fine
                private = [a.name for a in node.names if a.name.startswith("_")
                           and f"{mod}.{a.name}" not in SOURCES]
                assert not private, (f"{py.relative_to(ROOT)}:{node.lineno} imports private "
                                     f"{private} from {_resolve(py, node)}")


#: Modules allowed past 400 lines, and why (docs/architecture.md §2 lists them too).
LONG = {"mutune.services.store._store": "the Recorder's writes, one method per row kind"}


def test_modules_are_small():
    for name, (py, _) in SOURCES.items():
        n = len(py.read_text(encoding="utf-8").splitlines())
        limit = 460 if name in LONG else 400
        assert n <= limit, f"{py.relative_to(ROOT)} has {n} lines (> {limit})"


def test_no_file_names_a_design_document_users_do_not_have():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    hits = []
    for rel in tracked:
        p = ROOT / rel
        if p.suffix in {".png", ".bsh"} or not p.is_file():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if "DESIGN" + ".md" in text:
            hits.append(rel)
    assert not hits, f"these files name a design file that is not in the repository: {hits}"


@pytest.mark.parametrize("module, absent", [
    ("mutune", ("ray", "sqlalchemy", "torch", "fastapi", "httpx", "uvicorn")),
    ("mutune.proxies", ("ray", "sqlalchemy", "fastapi")),
    ("mutune.scaling", ("torch", "ray")),
    ("mutune.config", ("torch", "ray", "sqlalchemy")),
    ("mutune.search", ("torch", "ray", "sqlalchemy", "optuna")),
    ("mutune.pipeline", ("torch", "ray", "sqlalchemy")),
])
def test_import_pulls_in_nothing_heavy(module, absent):
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in {absent!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"
