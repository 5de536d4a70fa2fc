"""docs/config.md is generated from the config models, and every field is described."""
from __future__ import annotations

from pathlib import Path

from mutune.config.reference import _roots, render, sections

ROOT = Path(__file__).resolve().parents[2]


def test_docs_config_md_is_up_to_date():
    committed = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == render(), ("docs/config.md is stale: run "
                                   "python -m mutune.config.reference > docs/config.md")


def test_every_config_field_has_a_description():
    missing = [f"{heading}.{name}" for prefix, root in _roots()
               for heading, model in sections(root, prefix)
               for name, field in model.model_fields.items() if not field.description]
    assert not missing, "add Field(description=...) to: " + ", ".join(missing)


def test_the_reference_names_known_keys():
    text = render()
    for key in ("`max_t`", "`grace_period`", "`reduction_factor`", "`gpus_per_trial`"):
        assert key in text
