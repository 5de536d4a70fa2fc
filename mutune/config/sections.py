"""The sweep config's sections about how it runs: search and scheduler, training, the target
run, transfer, Ray, budget and tracking. Each validator's error names field, value and rule."""
from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from mutune.config.base import FieldRuleError, StrictModel
from mutune.config.spaces import CATEGORICAL, SEARCHABLE, VALID_RANGES, Distribution
from mutune.config.suggest import did_you_mean

__all__ = ["SchedulerConfig", "SearchConfig", "TrainConfig", "TargetConfig", "TransferConfig",
           "BudgetConfig", "TrackingConfig"]


class SchedulerConfig(StrictModel):
    """ASHA (Li et al. 2020) or asynchronous Hyperband (Li et al. 2018; brackets with grace
    periods r·η^s): rungs at grace_period·η^k ≤ max_t, fidelity = training steps
    (docs/architecture.md §4).

    ``variant``: ``stopping`` ends weak trials at a rung; ``promotion`` pauses every trial at
    each rung, frees its resources, and resumes the best (top 1/η) from their checkpoints when
    a slot frees (Li et al. 2020, Algorithm 2).

    Raises (on validation): ``max_t`` below ``grace_period``."""
    kind: Literal["asha", "hyperband"] = "asha"
    variant: Literal["stopping", "promotion"] = "stopping"
    grace_period: int = Field(default=20, ge=1)
    reduction_factor: int = Field(default=3, ge=2)
    max_t: int = Field(default=200, ge=1)

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

    ``searcher`` proposes the points (the scheduler only decides): ``random`` (seeded
    independent draws, the same at every width), ``grid`` (``grid_points`` values per
    continuous dimension, log-spaced for loguniform; choice values as listed; cycled to
    num_samples) or ``tpe`` (Optuna's TPE sampler, seeded, told every report).
    ``best_scope``: which value of each trial picks the best at the chosen rung (the highest
    holding ≥ 3 trials): ``last`` — the value judged there; ``best-so-far`` — the trial's best
    report up to it (docs/architecture.md §4).

    Raises (on validation): a name in ``space`` or ``fixed`` outside :data:`SEARCHABLE` (with
    the closest searchable names), no ``lr`` in ``space``, a name both searched and fixed, or
    a fixed value that is not a finite number > 0, a categorical knob
    (:data:`~mutune.config.spaces.CATEGORICAL`) searched other than as a choice among its
    names, names in another knob's choice, ``mode: max`` for a loss metric
    (:data:`LOSS_METRICS`).

    ``metric``: the report key trials are ranked by — ``val_loss`` (mutune's own evaluation)
    or any key a training-loop plugin reports (``train.loop``); ``metric_kind``: ``loss``
    (lower is better: ``mode: min`` only) or ``score`` (higher is better: ``mode: max``
    only), inferred as ``loss`` for names ending in ``loss``. The loss law and the target's
    watch against its proxies run for losses; for a score the report says they were
    skipped."""
    num_samples: int = Field(default=16, ge=1)
    #: seeds trained per trial in lockstep (same hyperparameters); the trial reports their
    #: mean validation loss, averaging out seed noise without a start-up cost per seed
    replicates: int = Field(default=1, ge=1, le=16)
    space: dict[str, Distribution]
    fixed: dict[str, float] = Field(default_factory=dict)
    metric: str = Field(default="val_loss", pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$",
                        max_length=100)
    metric_kind: Literal["loss", "score"] | None = None
    mode: Literal["min", "max"] = "min"
    scheduler: SchedulerConfig = SchedulerConfig()
    searcher: Literal["random", "grid", "tpe"] = "random"
    grid_points: int = Field(default=5, ge=2, le=1000)
    best_scope: Literal["last", "best-so-far"] = "last"

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
            _in_valid_range(f"fixed {name}", name, [value])
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
            _in_valid_range(f"space {name}", name, [float(b) for b in bounds])
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
    """Raises ValueError unless a :data:`CATEGORICAL` knob is a choice among its own names and
    every other knob's choice holds numbers."""
    names = getattr(dist, "values", None)
    is_names = bool(names) and isinstance(names[0], str)
    if name in CATEGORICAL:
        allowed = CATEGORICAL[name]
        if not is_names:
            raise ValueError(f"space {name}: a name, searched as a choice among "
                             f"{', '.join(allowed)} (e.g. {{type: choice, values: "
                             f"[{allowed[1]}, {allowed[-1]}]}}), not as "
                             f"{getattr(dist, 'type', dist)!r}")
        bad = [v for v in names if v not in allowed]
        if bad:
            raise ValueError(f"space {name}: {bad[0]!r} is not one of {', '.join(allowed)}")
        if len(set(names)) != len(names):
            raise ValueError(f"space {name}: {names} lists a value twice")
    elif is_names:
        raise ValueError(f"space {name}: choice values must be numbers, got {names[0]!r} "
                         f"(only {', '.join(CATEGORICAL)} take names)")


def _in_valid_range(what: str, name: str, values: list[float]) -> None:
    """Refuse values outside ``name``'s :data:`~mutune.config.spaces.VALID_RANGES` [lo, hi)
    (β1, β2, dropout and the warmup fraction below 1; weight decay ≥ 0)."""
    if name not in VALID_RANGES:
        return
    lo, hi = VALID_RANGES[name]
    bad = [v for v in values if not lo <= v < hi]
    if bad:
        raise ValueError(f"{what}: {bad[0]} is outside [{lo:g}, {hi:g}), where {name} is "
                         "defined")


class TrainConfig(StrictModel):
    """Training of every trial: MuAdamW (decoupled weight decay, docs/architecture.md §5).

    ``eval_windows``: fixed windows of ``seq_len`` tokens a text evaluation averages (default
    320, i.e. 20 batches of 16 × 64: its standard error, reported beside each loss as
    ``val_loss_se``, is then small against the differences a sweep ranks).

    Trials checkpoint (atomically) every ``checkpoint_every`` steps when > 0 (rounded up to
    the next evaluation) — with ``auto``, at the first evaluation at least Young's interval
    √(2·C·M) seconds after the last checkpoint (C measured, M ``cost.spot.mtbp_s``,
    :mod:`mutune.scaling.spot`) — on a preemption notice, and under promotion ASHA at every
    rung milestone; a
    retried, promoted or resumed trial continues from its last checkpoint (without one, from
    step 0).

    Retention: each trial keeps its ``checkpoint_keep`` best checkpoints by the sweep's
    metric plus, always, its latest (Ray Tune's checkpoint manager, ``num_to_keep`` with a
    score); a trial the scheduler stopped or that diverged loses all of its checkpoints as
    soon as it ends (its rung closed on it: nothing will resume it), so disk use stays
    bounded by the live trials. The report gives the bytes written and kept.

    Recipe (:mod:`mutune.training.schedule`): ``lr_schedule`` ``constant`` (default),
    ``cosine``, ``linear`` or ``wsd`` (warmup-stable-decay, the last ``decay_fraction`` of the
    steps decaying) after ``warmup_steps`` of linear warmup, down to ``min_lr_ratio`` × each
    μP parameter group's own starting rate, over each run's own steps (max_t for a proxy
    trial, the target's steps for the target); ``grad_clip``: the gradients' global L2 norm
    is clipped to it before each update (None: off); ``micro_batches``: each step's
    ``batch_size`` samples are split into this many micro-batches whose gradients are
    accumulated (one update per step; the ledger counts the whole batch); ``eps``: Adam's ε.

    ``loop``: a training-loop plugin (entry-point group ``mutune.loops``) that runs every
    trial's and the target's steps in the user's own code (:mod:`mutune.training.context`);
    None: mutune's loop."""
    batch_size: int = Field(default=64, ge=1)
    eval_every: int = Field(default=10, ge=1)
    eval_windows: int = Field(default=320, ge=1)
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = Field(default=0.0, ge=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.999, ge=0, lt=1)
    eps: float = Field(default=1e-8, gt=0)
    lr_schedule: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    warmup_steps: int = Field(default=0, ge=0)
    #: warmup as a fraction of each run's own steps (replaces ``warmup_steps`` when set; the
    #: searchable form, ``search.space.warmup_fraction``)
    warmup_fraction: float | None = Field(default=None, ge=0, lt=1)
    min_lr_ratio: float = Field(default=0.0, ge=0, le=1)
    decay_fraction: float = Field(default=0.2, gt=0, le=1)
    grad_clip: float | None = Field(default=None, gt=0)
    micro_batches: int = Field(default=1, ge=1)
    #: steps between checkpoints (0: off), or ``auto``: Young's interval √(2·C·M) in seconds
    #: from the measured checkpoint time C and ``cost.spot.mtbp_s`` M
    checkpoint_every: int | Literal["auto"] = Field(default=0)
    checkpoint_keep: int = Field(default=1, ge=1)
    loop: str | None = Field(default=None, min_length=1, max_length=200)

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
    """The one full-size run trained with the transferred hyperparameters; ``steps`` and
    ``batch_size`` default to the proxies' max_t and batch size. ``checkpoint_every``: the
    target checkpoints every this many steps (rounded up to the next evaluation) so an
    interrupted sweep resumes it from there; None (default) = about ten checkpoints over the
    run (``SweepConfig.target_checkpoint_every``), each held back until the seconds since
    the last one are at least the mean checkpoint's seconds ÷ ``checkpoint_max_share``
    (default 0.05: periodic checkpoints take at most about 5 % of the run; a large model's
    checkpoints are written less often); 0 = only its final model (always kept). An explicit
    ``checkpoint_every`` is kept exactly (``checkpoint_max_share`` then does not apply).
    ``num_workers``: data-parallel workers (devices, each with one trial's resources) the
    target trains on; None (default) = every slot the sweep holds when trials get GPUs, 1 on
    CPUs (``mutune.pipeline.target_devices.target_workers``). Two or more run one Ray Train
    ``TorchTrainer`` with DDP (:mod:`mutune.search.backends.ray_train`); one trains as a
    single Ray Tune trial, without a worker group's start-up.
    ``parallelism``: ``ddp`` (every worker holds the whole model); ``fsdp`` is refused before
    anything trains, naming the parameters whose μP width metadata FSDP would drop
    (microsoft/mup#59).
    ``depth``: the target's depth (None: the proxies' one depth, ``model.depth``); it is
    required with a depth ladder (``depths`` with ≥ 2 entries), and without one it may only
    repeat the proxies' depth (a rule across depth needs ≥ 2 proxy depths).
    ``cpus``: CPUs (and torch threads) of a target that trains as one process on CPUs; None
    (default) = every CPU the sweep holds on a local cluster, so none idles while the target
    trains, else ``ray.cpus_per_trial`` (``mutune.pipeline.target_devices.target_cpus``)."""
    width: int = Field(ge=1)
    depth: int | None = Field(default=None, ge=1, le=64)
    steps: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    checkpoint_every: int | None = Field(default=None, ge=0)
    checkpoint_max_share: float = Field(default=0.05, gt=0.0, le=1.0)
    num_workers: int | None = Field(default=None, ge=1)
    parallelism: Literal["ddp", "fsdp"] = "ddp"
    cpus: int | None = Field(default=None, ge=1)


class TransferConfig(StrictModel):
    """How optima become transfer rules (mutune.pipeline.transfer_stage, mutune.scaling).

    ``tolerance``: |width exponent| a μP rule may show and still be ``stable``.
    ``mup_flat``: under μP, when the width exponent's 95 % interval contains 0 (the data do
    not reject width-independence, TP V §3), transfer the widest proxy's optimum instead of
    extrapolating a slope the data cannot pin down; an exponent the data do resolve is used.
    ``horizon``: ``highest_rung`` fits rules on each width's highest-rung optimum;
    ``extrapolate`` uses LR*(steps) fitted across rungs, extrapolated to the target's steps
    (short-horizon bias, Wu et al. 2018). ``lr_batch_rule``: how lr moves when the target's
    batch differs (``auto``: square root for Adam, Malladi et al. 2022; linear for SGD, Goyal
    et al. 2017). ``token_beta``: apply LR* ∝ D^-β (Bjorck et al. 2025) when the target trains
    on more samples than the proxies' max_t budget (None: off). ``weight_decay_rule``:
    ``timescale`` keeps the AdamW timescale τ = B/(η·λ·D) (Wang & Aitchison 2024).

    Full horizon (docs/transfer.md): after each width's sweep, a design of configurations
    around its best one is retrained to max_t with ``confirm_replicates`` seeds per point
    and ``confirm_center_replicates`` at its centre (``confirm_step`` octaves between levels)
    and the optimum is fitted to those values;
    ``confirm_replicates`` 0 fits at the highest rung instead (the report says which).

    The gate before the target run: ``widen`` (default) acts for up to ``gate_rounds``
    rounds — an optimum at the edge of what was searched re-centres that width's design
    ``widen_octaves`` further out; a ``noisy`` rule trains every design again with fresh
    seeds — and stops before the target run if a rule is still ``edge`` or ``noisy``;
    ``proceed`` acts the same way but then trains the target with a warning; ``stop`` does not
    act and stops at once."""
    tolerance: float = Field(default=0.1, gt=0)
    mup_flat: bool = True
    n_boot: int = Field(default=1000, ge=50)
    n_boot_optimum: int = Field(default=300, ge=50)
    horizon: Literal["highest_rung", "extrapolate"] = "highest_rung"
    lr_batch_rule: Literal["auto", "sqrt", "linear", "none"] = "auto"
    token_beta: float | None = Field(default=None, gt=0)
    weight_decay_rule: Literal["timescale", "none"] = "timescale"
    confirm_replicates: int = Field(default=1, ge=0, le=32)
    confirm_center_replicates: int = Field(default=3, ge=1, le=32)
    confirm_step: float = Field(default=1.0, gt=0, le=4)
    gate: Literal["widen", "stop", "proceed"] = "widen"
    gate_rounds: int = Field(default=1, ge=0, le=8)
    widen_octaves: float = Field(default=3.0, gt=0, le=16)


class BudgetConfig(StrictModel):
    """What the sweep may spend, enforced while it runs (and priced by ``--dry-run``).

    ``gpu_hours``: device-hours (allocated seconds × devices / 3600, docs/architecture.md §6)
    of every trial and the target run together. ``money``: the same at ``price_per_hour`` per
    device-hour (default: the ``cost`` table's price of ``ray.device_kind``; the sweep config
    refuses a money budget with neither). No new trial starts once the spent hours plus what
    the running trials need to reach their next rung plus the new trial's first rung would
    exceed the budget; running trials finish their rung and the sweep ends
    ``budget_exhausted`` with what it has.
    """
    gpu_hours: float | None = Field(default=None, gt=0)
    money: float | None = Field(default=None, gt=0)
    #: None: the ``cost`` table's price of ``ray.device_kind`` under ``cost.pricing``
    price_per_hour: float | None = Field(default=None, gt=0)

    @property
    def limit_gpu_hours(self) -> float | None:
        """The tighter of ``gpu_hours`` and ``money / price_per_hour``; None: no limit."""
        caps = [c for c in (self.gpu_hours, self.money / self.price_per_hour
                            if self.money is not None and self.price_per_hour else None)
                if c is not None]
        return min(caps) if caps else None


class TrackingConfig(StrictModel):
    """Optional logging of every trial through Ray Tune's logger callbacks (off by default;
    the results database records everything either way). ``tensorboard``: event files under
    each trial's folder in ``OUT/ray/`` (needs the ``tensorboard`` extra, tensorboardX).
    ``mlflow_uri``: an MLflow tracking URI, one MLflow run per trial in experiment
    ``mlflow_experiment`` (default: the sweep's name; needs the ``mlflow`` extra)."""
    tensorboard: bool = False
    mlflow_uri: str | None = Field(default=None, min_length=1)
    mlflow_experiment: str | None = Field(default=None, min_length=1)
