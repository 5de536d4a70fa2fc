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
