"""The one driver loop every backend uses, its shared words, and :func:`catch_up` for a resume."""
from mutune.search.driver.catch_up import catch_up
from mutune.search.driver.loop import SweepDriver
from mutune.search.driver.types import (EXECUTOR_STATUSES, STATUS_OF, Action, ActionKind,
                                        Admission, Group, Outcome, TrialState)

__all__ = ["SweepDriver", "Group", "Action", "ActionKind", "Outcome", "Admission", "catch_up",
           "TrialState", "EXECUTOR_STATUSES", "STATUS_OF"]
