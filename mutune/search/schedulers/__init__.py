"""Scheduler cores: they decide which trial goes on, pauses, is promoted or stops."""
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.contract import TERMINAL, Decision, Judgement, Scheduler
from mutune.search.schedulers.factory import KINDS, VARIANTS, make_scheduler, scheduler_from_state
from mutune.search.schedulers.hyperband import Hyperband, bracket_sizes
from mutune.search.schedulers.planned_steps import DEFAULT_TRIAL_OVERHEAD_S, planned_trial_steps
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.schedulers.rungs import bracket_count, rung_milestones

__all__ = ["Scheduler", "Decision", "Judgement", "TERMINAL", "ASHA", "PromotionASHA",
           "Hyperband", "bracket_sizes", "make_scheduler", "scheduler_from_state", "KINDS",
           "VARIANTS", "rung_milestones", "bracket_count", "planned_trial_steps",
           "DEFAULT_TRIAL_OVERHEAD_S"]
