"""The README and docs/ stay true: short, quoting a real report, linking real files, using
public names only, and free of issue numbers and dates."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import mutune

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: an issue number, an ISO date, or the machine a figure was measured on
NOTEBOOK = re.compile(r"\bissue \d+|\b20\d\d-\d\d-\d\d\b|this machine", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _prose_docs() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8")) <= 12_000


def test_the_report_excerpt_is_a_real_report():
    """Each block of the excerpt (blocks split at a line holding only …) appears verbatim in
    the committed report of a real run."""
    report = (ROOT / "docs" / "example-report.txt").read_text(encoding="utf-8")
    excerpt = _code_blocks(README.read_text(encoding="utf-8"), "text")[-1]
    blocks = [b.strip("\n") for b in re.split(r"^…$", excerpt, flags=re.MULTILINE)]
    assert len(blocks) >= 2
    missing = [b.splitlines()[0] for b in blocks if b not in report]
    assert not missing, f"not in docs/example-report.txt: {missing}"


def test_every_relative_link_resolves():
    broken = [f"{doc.relative_to(ROOT)}: {target}" for doc in _prose_docs()
              for target in LINK.findall(doc.read_text(encoding="utf-8"))
              if "://" not in target and not (doc.parent / target).exists()]
    assert not broken, "links to missing files: " + ", ".join(broken)


def test_the_python_example_uses_public_names_only():
    (code,) = _code_blocks(README.read_text(encoding="utf-8"), "python")
    tree = ast.parse(code)
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "mutune"}
    assert used and used <= set(mutune.__all__), used - set(mutune.__all__)
    for name in used:
        assert getattr(mutune, name) is not None


def test_no_doc_reads_as_a_lab_notebook():
    found = [f"{doc.relative_to(ROOT)}:{n}: {m.group(0)!r}" for doc in _prose_docs()
             for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
             for m in [NOTEBOOK.search(line)] if m]
    assert not found, "move these figures to benchmarks/results/README.md:\n" + "\n".join(found)


def test_the_repository_stands_alone():
    for doc in _prose_docs():
        text = doc.read_text(encoding="utf-8")
        assert "../shared/" not in text and "DESIGN" + ".md" not in text, doc
