"""Best trial at equal budget: the highest rung holding at least 3 trials."""
import math

import pytest

from mutune.errors import SearchError
from mutune.search.best import best_at_rung


def test_uses_highest_rung_with_three_trials_not_the_top_or_first():
    rungs = {10: {"a": 1.0, "b": 0.9, "c": 1.2, "d": 0.5},
             30: {"a": 0.6, "b": 0.4, "c": 0.8},
             90: {"a": 0.1}}                      # top rung: one trial, by arrival order
    best = best_at_rung(rungs, mode="min")
    assert (best.trial, best.milestone, best.value, best.n_trials) == ("b", 30, 0.4, 3)


def test_nan_never_best_and_mode_max():
    rungs = {10: {"a": math.nan, "b": 0.3, "c": 0.2}}
    assert best_at_rung(rungs, mode="min").trial == "c"
    assert best_at_rung(rungs, mode="max").trial == "b"


def test_falls_back_to_fullest_rung_and_rejects_empty():
    assert best_at_rung({10: {"a": 2.0, "b": 1.0}, 30: {"a": 0.5}}).milestone == 10
    with pytest.raises(SearchError, match="no rung holds a finite value"):
        best_at_rung({10: {"a": math.nan}})
