"""The code's prose states what a mechanism does and why; measurements, dates and issue
numbers belong in benchmarks/results/ (docstrings and comments of ``mutune/``)."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: an issue number, an ISO date, or the machine a figure was measured on
NOTEBOOK = re.compile(r"\bissue \d+|\b20\d\d-\d\d-\d\d\b|this machine|this project's|"
                      r"\b\d-(CPU|core)\b", re.IGNORECASE)


def _prose(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string) for tok in
           tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


def test_no_docstring_or_comment_reads_as_a_lab_notebook():
    found = [f"{p.relative_to(ROOT)}:{line}: {NOTEBOOK.search(text).group(0)!r}"
             for p in sorted((ROOT / "mutune").rglob("*.py")) if "migrations" not in p.parts
             for line, text in _prose(p) if NOTEBOOK.search(text)]
    assert not found, "move these figures to benchmarks/results/:\n" + "\n".join(found)


def test_the_architecture_map_names_every_module():
    """docs/architecture.md §2.2 is the map of the rooms: every module of ``mutune/`` is named
    there (by its file name without ``.py``; a package by its folder)."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = doc[doc.index("### 2.2 Rooms"):doc.index("### 2.3")]
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", rooms))
    missing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "mutune").rglob("*.py"))
               if "migrations" not in p.parts
               and (p.parent.name if p.stem == "__init__" else p.stem) not in named]
    assert not missing, "name these in docs/architecture.md §2.2: " + ", ".join(missing)
