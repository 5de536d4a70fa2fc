"""A trial's ``start_s``: from Ray's grant to the trial function's start on its worker (its
first report's ``began_at``, epoch seconds), bounded by what the trial held."""
from __future__ import annotations

import time

import pytest

from mutune.search.backends.trial_record import TrialRecord, close_record


def _closed(reports, granted_at, held_s):
    rec = TrialRecord("k", 1, {}, time.monotonic(), reports=reports, held_s=held_s,
                      granted_at=granted_at)
    return close_record(rec, "completed", None, devices=1.0, device_kind="cpu")


def test_start_is_the_grant_to_the_function_start():
    t = _closed([{"step": 3, "began_at": 103.5, "productive_s": 1.0, "eval_s": 0.1},
                 {"step": 6, "began_at": 103.5, "productive_s": 2.0, "eval_s": 0.2}],
                granted_at=100.0, held_s=10.0)
    assert t["start_s"] == pytest.approx(3.5)


def test_start_is_bounded_and_zero_when_the_report_does_not_say():
    assert _closed([{"step": 3, "began_at": 99.0}], granted_at=100.0,
                   held_s=5.0)["start_s"] == 0.0                 # clocks a little apart
    assert _closed([{"step": 3, "began_at": 190.0}], granted_at=100.0,
                   held_s=5.0)["start_s"] == pytest.approx(5.0)   # never above what it held
    assert _closed([{"step": 3}], granted_at=100.0, held_s=5.0)["start_s"] == 0.0
    assert _closed([], granted_at=100.0, held_s=5.0)["start_s"] == 0.0
