"""The sweep config's sections about how it runs: search and scheduler, training, the target
run, transfer, Ray, budget and tracking. Each validator's error names field, value and rule."""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, StrictInt, model_validator

from mutune.config.base import FieldRuleError, StrictModel
from mutune.config.spaces import CATEGORICAL, SEARCHABLE, VALID_RANGES, Distribution
from mutune.config.suggest import did_you_mean

__all__ = ["SchedulerConfig", "SearchConfig", "TrainConfig", "TargetConfig", "TransferConfig",
           "BudgetConfig", "TrackingConfig"]


class SchedulerConfig(StrictModel):
    """ASHA or asynchronous Hyperband over training steps (docs/architecture.md §4).

    Raises (on validation): ``max_t`` below ``grace_period``."""
    kind: Literal["asha", "hyperband"] = Field(
        default="asha", description="`asha` (Li et al. 2020): one bracket; `hyperband` (Li et "
        "al. 2018): brackets with grace periods r·η^s")
    variant: Literal["stopping", "promotion"] = Field(
        default="stopping", description="`stopping` ends weak trials at a rung; `promotion` "
        "pauses every trial at each rung and resumes one in the top ⌊n/η⌋ of its rung's n "
        "trials from its checkpoint when a slot frees (Li et al. 2020, Alg. 2); either way a "
        "trial that reaches max_t is completed, never stopped")
    grace_period: int = Field(
        default=20, ge=1, description="steps to the first rung; rungs at grace_period·η^k ≤ "
        "max_t")
    reduction_factor: int = Field(
        default=3, ge=2, description="η: each rung keeps the top 1/η of its trials")
    max_t: int = Field(
        default=200, ge=1, description="max_t: the most steps a proxy trial trains; trials "
        "surviving the last rung train on to it but are compared at the rung")

    @model_validator(mode="after")
    def _budget(self) -> "SchedulerConfig":
        if self.max_t < self.grace_period:
            raise FieldRuleError("max_t", self.max_t,
                                 f"max_t ({self.max_t}) must be >= grace_period "
                                 f"({self.grace_period})")
        return self


#: metrics that are losses (lower is better): searched with ``mode: min`` only
LOSS_METRICS = ("val_loss",)


class SearchConfig(StrictModel):
    """What is searched per proxy width and how trials are ranked.

    Raises (on validation): a name in ``space`` or ``fixed`` outside :data:`SEARCHABLE` (with
    the closest searchable names), no ``lr`` in ``space``, a name both searched and fixed, or
    a fixed value that is not a finite number > 0, a categorical knob
    (:data:`~mutune.config.spaces.CATEGORICAL`) searched other than as a choice among its
    names, names in another knob's choice, ``mode: max`` for a loss metric
    (:data:`LOSS_METRICS`)."""
    num_samples: int = Field(default=16, ge=1, description="trials per proxy width")
    replicates: int = Field(
        default=1, ge=1, le=16, description="seeds trained per trial in lockstep (same "
        "hyperparameters); the trial reports their mean, for proxies whose single-seed losses "
        "are too noisy to place an optimum")
    space: dict[str, Distribution] = Field(
        description="searched hyperparameters, each `loguniform`, `uniform` or `choice`: `lr` "
        "(required); the μP multipliers `input_mult`, `output_mult`, `attn_mult`, `init_std`; "
        "`dropout`; the recipe's `beta1`, `beta2`, `eps`, `weight_decay`, `grad_clip`, "
        "`warmup_fraction`, `lr_schedule` (only as a choice among its names); a trial's recipe "
        "knobs replace `train.*` for it. Weight decay and dropout are not transferred (the "
        "widest proxy's optimum), a choice is compared per width (docs/transfer.md §8)")
    fixed: dict[str, float] = Field(
        default_factory=dict, description="searchable hyperparameters held at a value "
        "(finite, > 0) instead of searched")
    metric: str = Field(
        default="val_loss", pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$", max_length=100,
        description="the report key trials are ranked by: `val_loss` (mutune's evaluation) or "
        "any key a training-loop plugin reports")
    metric_kind: Literal["loss", "score"] | None = Field(
        default=None, description="`loss` (lower is better, `mode: min`) or `score` (higher is "
        "better, `mode: max`); inferred as `loss` for names ending in `loss`. The loss law and "
        "the target's watch run for losses only")
    mode: Literal["min", "max"] = Field(
        default="min", description="`min` for a loss, `max` for a score; the other is refused "
        "(it would pick the worst trials)")
    scheduler: SchedulerConfig = Field(
        default=SchedulerConfig(), description="the rung scheduler (`search.scheduler.*`)")
    searcher: Literal["random", "grid", "tpe"] = Field(
        default="random", description="who proposes points: `random` (seeded draws, the same "
        "at every width), `grid` (`grid_points` per continuous dimension, cycled to "
        "num_samples) or `tpe` (Optuna's TPE, seeded, told every report)")
    grid_points: int = Field(
        default=5, ge=2, le=1000, description="grid values per continuous dimension "
        "(log-spaced for loguniform)")
    best_scope: Literal["last", "best-so-far"] = Field(
        default="last", description="the value that picks each width's best trial at the "
        "highest rung holding ≥ 3 trials: `last`, the one judged there; `best-so-far`, the "
        "trial's best report up to it")

    @model_validator(mode="after")
    def _names(self) -> "SearchConfig":
        for name in list(self.space) + list(self.fixed):
            if name not in SEARCHABLE:
                hint = did_you_mean(name, SEARCHABLE)
                where = "space" if name in self.space else "fixed"
                raise FieldRuleError(f"{where}.{name}", getattr(self, where)[name],
                                     f"unknown hyperparameter {name!r}; searchable: "
                                     f"{', '.join(SEARCHABLE)}" + (f"; {hint}" if hint else ""))
        if "lr" not in self.space:
            raise FieldRuleError("space", sorted(self.space),
                                 "space must search 'lr' (the transfer rule is fitted on it)")
        both = set(self.space) & set(self.fixed)
        if both:
            raise FieldRuleError("fixed", sorted(both),
                                 f"{sorted(both)} both searched and fixed")
        for name, value in self.fixed.items():
            if not (math.isfinite(value) and value > 0):
                raise FieldRuleError(f"fixed.{name}", value,
                                     f"fixed {name} = {value} must be a finite number > 0")
            _in_valid_range(f"fixed.{name}", name, [value])
        for name in self.fixed:
            if name in CATEGORICAL:
                raise FieldRuleError(f"fixed.{name}", self.fixed[name],
                                     f"fixed {name}: a name, not a number; set train.{name} "
                                     "instead (or search it as a choice)")
        for name, dist in self.space.items():
            _categorical_ok(name, dist)
            if getattr(dist, "categorical", False):
                continue
            bounds = getattr(dist, "values", None) or [dist.low, dist.high]
            _in_valid_range(f"space.{name}", name, [float(b) for b in bounds])
        kind = self.metric_kind
        if kind is None:
            if not (self.metric in LOSS_METRICS or self.metric.endswith("loss")):
                raise FieldRuleError("metric_kind", self.metric_kind,
                                     f"say whether {self.metric!r} is a 'loss' (lower is "
                                     "better) or a 'score' (higher is better)")
            kind = "loss"
        elif kind == "score" and self.metric in LOSS_METRICS:
            raise FieldRuleError("metric_kind", self.metric_kind,
                                 f"metric {self.metric!r} is a loss (lower is better), so its "
                                 "kind is 'loss'")
        if kind == "loss" and self.mode != "min":
            raise FieldRuleError("mode", self.mode,
                                 f"metric {self.metric!r} is a loss (lower is better), so "
                                 "mode must be 'min'; 'max' would pick the worst trials")
        if kind == "score" and self.mode != "max":
            raise FieldRuleError("mode", self.mode,
                                 f"metric {self.metric!r} is a score (higher is better), so "
                                 "mode must be 'max'; 'min' would pick the worst trials (a "
                                 "metric where lower is better is a loss: metric_kind: loss)")
        return self

    @property
    def kind_of_metric(self) -> str:
        """``loss`` or ``score``: ``metric_kind``, or ``loss`` when it was inferred from the
        metric's name (validation refuses any other metric without a kind)."""
        return self.metric_kind or "loss"


def _categorical_ok(name: str, dist: object) -> None:
    """Raises FieldRuleError unless a :data:`CATEGORICAL` knob is a choice among its own names
    and every other knob's choice holds numbers."""
    names = getattr(dist, "values", None)
    is_names = bool(names) and isinstance(names[0], str)
    field = f"space.{name}"
    if name in CATEGORICAL:
        allowed = CATEGORICAL[name]
        if not is_names:
            kind = getattr(dist, "type", dist)
            raise FieldRuleError(field, names if names is not None else kind,
                                 f"a name, searched as a choice among {', '.join(allowed)} "
                                 f"(e.g. {{type: choice, values: [{allowed[1]}, "
                                 f"{allowed[-1]}]}}), not as {kind!r}")
        bad = [v for v in names if v not in allowed]
        if bad:
            raise FieldRuleError(field, names, f"{bad[0]!r} is not one of {', '.join(allowed)}")
        if len(set(names)) != len(names):
            raise FieldRuleError(field, names, "lists a value twice")
    elif is_names:
        raise FieldRuleError(field, names, f"choice values must be numbers, got {names[0]!r} "
                             f"(only {', '.join(CATEGORICAL)} take names)")


def _in_valid_range(field: str, name: str, values: list[float]) -> None:
    """Refuse values outside ``name``'s :data:`~mutune.config.spaces.VALID_RANGES` [lo, hi)
    (β1, β2, dropout and the warmup fraction below 1; weight decay ≥ 0)."""
    if name not in VALID_RANGES:
        return
    lo, hi = VALID_RANGES[name]
    bad = [v for v in values if not lo <= v < hi]
    if bad:
        raise FieldRuleError(field, bad[0], f"{bad[0]} is outside [{lo:g}, {hi:g}), where {name} "
                             "is defined")


class TrainConfig(StrictModel):
    """Training of every trial: MuAdamW with decoupled weight decay and its recipe
    (docs/architecture.md §5)."""
    batch_size: int = Field(default=64, ge=1, description="samples per step")
    eval_every: int = Field(
        default=10, ge=1, description="steps between evaluations; must divide every rung "
        "milestone (grace_period·η^k) and max_t, or the config is refused with a value that does")
    eval_windows: int = Field(
        default=320, ge=1, description="fixed windows of `seq_len` tokens a text evaluation "
        "averages; its standard error is reported beside each loss as `val_loss_se`")
    optimizer: Literal["adamw", "adam", "sgd"] = Field(
        default="adamw", description="the μP optimizer (mup's MuAdamW, MuAdam or MuSGD)")
    weight_decay: float = Field(default=0.0, ge=0, description="decoupled weight decay λ")
    beta1: float = Field(default=0.9, ge=0, lt=1, description="Adam's β1")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="Adam's β2")
    eps: float = Field(default=1e-8, gt=0, description="Adam's ε")
    lr_schedule: Literal["constant", "cosine", "linear", "wsd"] = Field(
        default="constant", description="the rate of every μP parameter group relative to its "
        "own starting rate, over each run's own steps (max_t for a proxy, the target's steps "
        "for the target); `wsd`: warmup-stable-decay")
    warmup_steps: int = Field(default=0, ge=0, description="steps of linear warmup")
    warmup_fraction: float | None = Field(
        default=None, ge=0, lt=1, description="warmup as a fraction of each run's own steps "
        "(replaces `warmup_steps` when set; the searchable form)")
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="final rate ÷ starting rate")
    decay_fraction: float = Field(
        default=0.2, gt=0, le=1, description="`wsd`'s decaying share of the steps")
    grad_clip: float | None = Field(
        default=None, gt=0, description="the gradients' global L2 norm is clipped to this "
        "before each update (None: off)")
    micro_batches: int = Field(
        default=1, ge=1, description="micro-batches per step whose gradients are accumulated "
        "(one update per step); must divide `batch_size`")
    checkpoint_every: int | Literal["auto"] = Field(
        default=0, description="steps between checkpoints (0: off; rounded up to the next "
        "evaluation), or `auto`: Young's interval √(2·C·M) s from the measured checkpoint time "
        "C and `cost.spot.mtbp_s` M. Trials also checkpoint on a preemption notice and, under "
        "promotion, at every rung; a retried, promoted or resumed trial continues from its last")
    checkpoint_keep: int = Field(
        default=1, ge=1, description="checkpoints kept per trial: the best this many by the "
        "metric plus always the latest; a stopped or diverged trial's are deleted when it ends")
    loop: str | None = Field(
        default=None, min_length=1, max_length=200, description="a training-loop plugin's "
        "name (entry-point group `mutune.loops`) that runs every trial and the target; None: "
        "mutune's loop")

    @model_validator(mode="after")
    def _micro_batches(self) -> "TrainConfig":
        if self.checkpoint_every != "auto" and self.checkpoint_every < 0:
            raise FieldRuleError("checkpoint_every", self.checkpoint_every,
                                 "steps >= 0, or 'auto' (Young's interval from "
                                 "cost.spot.mtbp_s)")
        if self.batch_size % self.micro_batches:
            raise FieldRuleError("micro_batches", self.micro_batches,
                                 f"micro_batches ({self.micro_batches}) must divide batch_size "
                                 f"({self.batch_size}): every micro-batch holds the same share")
        return self


class TargetConfig(StrictModel):
    """The one full-size run trained with the transferred hyperparameters."""
    width: int = Field(ge=1, description="the target's width")
    depth: int | None = Field(
        default=None, ge=1, le=64, description="the target's depth (None: the proxies' one "
        "depth); required with a depth ladder (≥ 2 `depths`), else it may only repeat it")
    steps: int | None = Field(
        default=None, ge=1, description="training steps (None: the proxies' max_t)")
    batch_size: int | None = Field(
        default=None, ge=1, description="samples per step (None: `train.batch_size`)")
    checkpoint_every: int | None = Field(
        default=None, ge=0, description="steps between checkpoints, so `mutune resume` "
        "continues from the last (rounded up to the next evaluation, kept exactly); None: about "
        "ten over the run, each held back by `checkpoint_max_share`; 0: only the final model, "
        "which is always kept")
    checkpoint_max_share: float = Field(
        default=0.05, gt=0.0, le=1.0, description="with the default `checkpoint_every`, each "
        "checkpoint waits until the seconds since the last are at least the mean checkpoint's "
        "seconds ÷ this share, so periodic checkpoints take at most about this share of the run")
    num_workers: int | None = Field(
        default=None, ge=1, description="data-parallel workers: 2 or more train one Ray Train "
        "TorchTrainer run with DDP (gloo on CPU, NCCL on GPU), 1 one Ray Tune trial; None: "
        "every slot the sweep holds when trials get GPUs, 1 on CPUs")
    parallelism: Literal["ddp", "fsdp"] = Field(
        default="ddp", description="`ddp`: every worker holds the whole model; `fsdp` is "
        "refused before anything trains, naming the parameters whose μP width metadata FSDP "
        "would drop")
    cpus: int | None = Field(
        default=None, ge=1, description="CPUs and torch threads of a target that trains as one "
        "process on CPUs; None: every CPU the sweep holds on a local cluster, else "
        "`ray.cpus_per_trial`")


class TransferConfig(StrictModel):
    """How optima become transfer rules, and the gate before the target run
    (docs/transfer.md)."""
    tolerance: float = Field(
        default=0.1, gt=0, description="|width exponent| a μP rule may show and still be "
        "`stable` where no fitted loss surface prices its uncertainty")
    loss_tolerance: float = Field(
        default=0.005, gt=0, lt=1, description="the share of the loss a rule's uncertainty may "
        "cost at the target and still be `stable`: the loss increase across the transferred "
        "value's interval on a proxy's fitted loss surface (docs/transfer.md §3)")
    mup_flat: bool = Field(
        default=True, description="under μP, when the width exponent's 95 % interval contains "
        "0, transfer the widest proxy's optimum instead of extrapolating the slope")
    n_boot: int = Field(
        default=1000, ge=50, description="bootstrap resamples of a rule's interval")
    n_boot_optimum: int = Field(
        default=300, ge=50, description="bootstrap resamples of each width's optimum")
    horizon: Literal["highest_rung", "extrapolate"] = Field(
        default="highest_rung", description="`highest_rung`: fit rules on each width's "
        "highest-rung optimum; `extrapolate`: LR*(steps) fitted across rungs, extrapolated to "
        "the target's steps (short-horizon bias, Wu et al. 2018)")
    lr_batch_rule: Literal["auto", "sqrt", "linear", "none"] = Field(
        default="auto", description="how lr moves when the target's batch differs; `auto`: "
        "square root for Adam (Malladi et al. 2022), linear for SGD (Goyal et al. 2017)")
    token_beta: float | None = Field(
        default=None, gt=0, description="apply LR* ∝ D^-β (Bjorck et al. 2025) when the target "
        "trains on more samples than the proxies' max_t budget; None: off")
    weight_decay_rule: Literal["timescale", "none"] = Field(
        default="timescale", description="`timescale` keeps the AdamW timescale τ = B/(η·λ·D) "
        "(Wang & Aitchison 2024)")
    confirm_replicates: int = Field(
        default=1, ge=0, le=32, description="seeds per point of the design retrained to max_t "
        "around each width's best configuration; 0: fit at the highest rung instead")
    confirm_center_replicates: int = Field(
        default=3, ge=1, le=32, description="seeds at the design's centre")
    confirm_step: float = Field(
        default=1.0, gt=0, le=4, description="octaves between the design's levels")
    confirm_widths: Annotated[StrictInt, Field(ge=1, le=64)] | Literal["all"] = Field(
        default="all", description="how many of the narrowest proxy widths retrain a "
        "confirmation "
        "design (at every depth on a depth ladder); each wider width takes its sweep's optimum "
        "at the common rung, moved to max_t by the shift the widest designed width measured "
        "between that rung and max_t (docs/transfer.md §2); `all`: a design at every width")
    gate: Literal["widen", "stop", "proceed"] = Field(
        default="widen", description="the health gate: `widen` re-centres a design beyond an "
        "optimum at the edge and reseeds a `noisy` rule for up to `gate_rounds`, then stops if "
        "a rule is still unhealthy; `proceed` acts the same, then trains the target with a "
        "warning; `stop` stops at once")
    gate_rounds: int = Field(default=1, ge=0, le=8, description="rounds the gate may act")
    widen_octaves: float = Field(
        default=3.0, gt=0, le=16, description="octaves a widened design moves out")


class BudgetConfig(StrictModel):
    """What the sweep may spend, enforced while it runs (and priced by ``--dry-run``): no new
    trial starts once the spent hours, what running trials need to reach their next rung and
    the new trial's first rung would exceed it; the sweep then ends ``budget_exhausted``."""
    gpu_hours: float | None = Field(
        default=None, gt=0, description="device-hours of every trial and the target together "
        "(docs/architecture.md §6)")
    money: float | None = Field(
        default=None, gt=0, description="the same at `price_per_hour`; the tighter limit "
        "applies")
    price_per_hour: float | None = Field(
        default=None, gt=0, description="price per device-hour; None: the `cost` table's "
        "price of `ray.device_kind` under `cost.pricing`")

    @property
    def limit_gpu_hours(self) -> float | None:
        """The tighter of ``gpu_hours`` and ``money / price_per_hour``; None: no limit."""
        caps = [c for c in (self.gpu_hours, self.money / self.price_per_hour
                            if self.money is not None and self.price_per_hour else None)
                if c is not None]
        return min(caps) if caps else None


class TrackingConfig(StrictModel):
    """Optional logging of every trial through Ray Tune's logger callbacks; the results
    database records everything either way."""
    tensorboard: bool = Field(
        default=False, description="event files under each trial's folder in `OUT/ray/` "
        "(extra `mutune[tensorboard]`)")
    mlflow_uri: str | None = Field(
        default=None, min_length=1, description="an MLflow tracking URI: one MLflow run per "
        "trial (extra `mutune[mlflow]`)")
    mlflow_experiment: str | None = Field(
        default=None, min_length=1, description="the MLflow experiment (None: the sweep's "
        "name)")
