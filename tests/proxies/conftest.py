"""Fixtures shared by the proxy-model tests."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """torch on one thread for the test (restored after): the models' arithmetic does not
    depend on how many threads share a matmul."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
