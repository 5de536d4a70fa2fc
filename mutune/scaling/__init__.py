"""Transfer fitting and cost arithmetic on plain arrays (numpy/scipy only; no torch, no ray)."""
from mutune.scaling.cost import NaiveEstimate, ettr, gpu_hours, naive_sweep_estimate
from mutune.scaling.horizon import HorizonFit, fit_horizon
from mutune.scaling.laws import LossLaw, fit_loss_law
from mutune.scaling.optimum import Optimum, Neighbourhood, estimate_optimum
from mutune.scaling.published import (AdamWTimescale, adamw_timescale, adamw_weight_decay_for,
                                      scale_lr_for_batch, scale_lr_for_tokens)
from mutune.scaling.rules import TransferRule, fit_transfer_rule
from mutune.scaling.verdict import VERDICTS, Verdict, rule_verdict

__all__ = ["TransferRule", "fit_transfer_rule", "Optimum", "Neighbourhood", "estimate_optimum",
           "Verdict",
           "VERDICTS", "rule_verdict", "HorizonFit", "fit_horizon", "LossLaw", "fit_loss_law",
           "scale_lr_for_batch", "scale_lr_for_tokens", "AdamWTimescale", "adamw_timescale",
           "adamw_weight_decay_for", "NaiveEstimate", "naive_sweep_estimate", "gpu_hours",
           "ettr"]
