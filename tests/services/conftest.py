"""Fixtures for the store tests (the database URLs live in tests/conftest.py)."""
from __future__ import annotations

import pytest


@pytest.fixture
def store(store_url: str):
    """A migrated :class:`mutune.services.store.Store` on ``store_url``, closed afterwards."""
    from mutune.services.store import Store

    with Store.open(store_url) as opened:
        yield opened
