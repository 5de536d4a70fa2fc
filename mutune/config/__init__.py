"""The sweep config: pydantic v2 models of the YAML file a user writes (DESIGN.md §1–§2).

Every model forbids unknown keys. :func:`load_config` turns pydantic's errors into one
:class:`~mutune.errors.ConfigError` whose lines each name the field (dotted path), the value and
the rule it broke, e.g. ``search.scheduler.max_t = 10: must be >= grace_period (20)``.
"""
from __future__ import annotations

import importlib.resources
import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError,
                      field_validator, model_validator)

from mutune.errors import ConfigError

__all__ = [
    "SweepConfig", "ModelSpec", "MLPModel", "GPTModel", "DigitsData", "TextData", "TokenData",
    "LogUniform", "Uniform", "Choice", "SearchConfig", "SchedulerConfig", "TrainConfig",
    "TargetConfig", "TransferConfig", "RayConfig", "BudgetConfig", "TrackingConfig",
    "CostConfig", "DeviceSpec", "DEFAULT_DEVICES",
    "load_config", "parse_config", "default_config_path", "SEARCHABLE", "LEASE_FACTOR",
]

#: Hyperparameters a search space may name. All but ``lr`` are μP multipliers (TP V Table 1:
#: they transfer across width): input/embedding multiplier, output (readout) multiplier,
#: attention-logit multiplier, and the init standard deviation scale.
SEARCHABLE = ("lr", "output_mult", "input_mult", "attn_mult", "init_std")

#: A trial's lease must be at least this many heartbeat intervals (a live trial may miss two).
LEASE_FACTOR = 3.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogUniform(_Strict):
    """Log-uniform distribution on [low, high]; both > 0."""
    type: Literal["loguniform"]
    low: float = Field(gt=0)
    high: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> "LogUniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Uniform(_Strict):
    """Uniform distribution on [low, high]."""
    type: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> "Uniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Choice(_Strict):
    """A uniform choice among listed values."""
    type: Literal["choice"]
    values: list[float] = Field(min_length=1)


Distribution = Annotated[Union[LogUniform, Uniform, Choice], Field(discriminator="type")]


class ModelSpec(_Strict):
    """The ``model`` section every model family shares. ``family`` names a model plugin
    (entry-point group ``mutune.models``, :mod:`mutune.proxies.plugins`); the plugin's own subclass
    adds its options. ``base_width``: the width at which μP equals SP (width multiplier 1)."""
    family: str = Field(min_length=1)
    parametrization: Literal["mup", "sp"] = "mup"
    depth: int = Field(default=2, ge=1, le=64)
    base_width: int = Field(default=64, ge=1)

    def build_options(self) -> dict[str, Any]:
        """The fields handed to the family's ``build`` (``depth`` and the plugin's own)."""
        return self.model_dump(exclude={"family", "parametrization", "base_width"})


class MLPModel(ModelSpec):
    """μP MLP (``mutune.proxies.mlp``, plugin ``mlp``): ``depth`` hidden layers of size width."""
    family: Literal["mlp"]


class GPTModel(ModelSpec):
    """μP byte-level GPT-style pre-LN decoder (``mutune.proxies.gpt``, plugin ``gpt``)."""
    family: Literal["gpt"]
    base_width: int = Field(default=32, ge=1)
    d_head: int = Field(default=16, ge=1)
    ffn_ratio: int = Field(default=4, ge=1)
    seq_len: int = Field(default=64, ge=2)
    vocab: int = Field(default=256, ge=2, le=65536)
    positions: Literal["learned", "rotary"] = "learned"
    tied: bool = False


class DigitsData(_Strict):
    """scikit-learn's bundled handwritten digits (1,797 images of 8×8 pixels, 10 classes)."""
    kind: Literal["digits"]
    val_fraction: float = Field(default=0.2, gt=0, lt=1)


class TextData(_Strict):
    """Byte-level text. ``path`` None: the running Python's standard library (DESIGN.md §2);
    otherwise any text file or folder."""
    kind: Literal["text"]
    path: str | None = None


class TokenData(_Strict):
    """A nanoGPT-style ``uint16`` token file, or a folder with ``train.bin`` and ``val.bin``;
    the model's ``vocab`` must cover every token id."""
    kind: Literal["tokens"]
    path: str = Field(min_length=1)


class SchedulerConfig(_Strict):
    """ASHA (Li et al. 2020) or asynchronous Hyperband (Li et al. 2018; brackets with grace
    periods r·η^s): rungs at grace_period·η^k ≤ max_t, fidelity = training steps.

    ``variant``: ``stopping`` ends weak trials at a rung; ``promotion`` pauses every trial at
    each rung, frees its resources, and resumes the best (top 1/η) from their checkpoints when
    a slot frees (Li et al. 2020, Algorithm 2)."""
    kind: Literal["asha", "hyperband"] = "asha"
    variant: Literal["stopping", "promotion"] = "stopping"
    grace_period: int = Field(default=20, ge=1)
    reduction_factor: int = Field(default=3, ge=2)
    max_t: int = Field(default=200, ge=1)

    @model_validator(mode="after")
    def _budget(self) -> "SchedulerConfig":
        if self.max_t < self.grace_period:
            raise ValueError(f"max_t ({self.max_t}) must be >= grace_period "
                             f"({self.grace_period})")
        return self


class SearchConfig(_Strict):
    """What is searched per proxy width and how trials are ranked.

    ``searcher`` proposes the points (the scheduler only decides): ``random`` (seeded
    independent draws, the same at every width), ``grid`` (``grid_points`` values per
    continuous dimension, log-spaced for loguniform; choice values as listed; cycled to
    num_samples) or ``tpe`` (Optuna's TPE sampler, seeded, told every report).
    ``best_scope``: which value of each trial picks the best at the chosen rung (the highest
    holding ≥ 3 trials): ``last`` — the value judged there; ``best-so-far`` — the trial's best
    report up to it (DESIGN.md §4)."""
    num_samples: int = Field(default=16, ge=1)
    #: seeds trained per trial in lockstep (same hyperparameters); the trial reports their
    #: mean validation loss, averaging out seed noise without a start-up cost per seed
    replicates: int = Field(default=1, ge=1, le=16)
    space: dict[str, Distribution]
    fixed: dict[str, float] = Field(default_factory=dict)
    metric: Literal["val_loss"] = "val_loss"
    mode: Literal["min", "max"] = "min"
    scheduler: SchedulerConfig = SchedulerConfig()
    searcher: Literal["random", "grid", "tpe"] = "random"
    grid_points: int = Field(default=5, ge=2, le=1000)
    best_scope: Literal["last", "best-so-far"] = "last"

    @model_validator(mode="after")
    def _names(self) -> "SearchConfig":
        for name in list(self.space) + list(self.fixed):
            if name not in SEARCHABLE:
                raise ValueError(f"unknown hyperparameter {name!r}; searchable: "
                                 f"{', '.join(SEARCHABLE)}")
        if "lr" not in self.space:
            raise ValueError("space must search 'lr' (the transfer rule is fitted on it)")
        both = set(self.space) & set(self.fixed)
        if both:
            raise ValueError(f"{sorted(both)} both searched and fixed")
        for name, value in self.fixed.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"fixed {name} = {value} must be a finite number > 0")
        return self


class TrainConfig(_Strict):
    """Training of every trial: MuAdamW (decoupled weight decay, DESIGN.md §5).

    Trials checkpoint (atomically) every ``checkpoint_every`` steps when > 0 (rounded up to
    the next evaluation), on SIGTERM, and under promotion ASHA at every rung milestone; a
    retried, promoted or resumed trial continues from its last checkpoint (without one, from
    step 0).

    Retention: each trial keeps its ``checkpoint_keep`` best checkpoints by the sweep's
    metric plus, always, its latest (Ray Tune's checkpoint manager, ``num_to_keep`` with a
    score); a trial the scheduler stopped or that diverged loses all of its checkpoints as
    soon as it ends (its rung closed on it: nothing will resume it), so disk use stays
    bounded by the live trials. The report gives the bytes written and kept."""
    batch_size: int = Field(default=64, ge=1)
    eval_every: int = Field(default=10, ge=1)
    eval_windows: int = Field(default=64, ge=1)
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = Field(default=0.0, ge=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.999, ge=0, lt=1)
    checkpoint_every: int = Field(default=0, ge=0)
    checkpoint_keep: int = Field(default=1, ge=1)


class TargetConfig(_Strict):
    """The one full-size run trained with the transferred hyperparameters; ``steps`` and
    ``batch_size`` default to the proxies' max_t and batch size."""
    width: int = Field(ge=1)
    steps: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)


class TransferConfig(_Strict):
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
    ``timescale`` keeps the AdamW timescale τ = B/(η·λ·D) (Wang & Aitchison 2024)."""
    tolerance: float = Field(default=0.1, gt=0)
    mup_flat: bool = True
    n_boot: int = Field(default=1000, ge=50)
    n_boot_optimum: int = Field(default=300, ge=50)
    horizon: Literal["highest_rung", "extrapolate"] = "highest_rung"
    lr_batch_rule: Literal["auto", "sqrt", "linear", "none"] = "auto"
    token_beta: float | None = Field(default=None, gt=0)
    weight_decay_rule: Literal["timescale", "none"] = "timescale"


class RayConfig(_Strict):
    """Execution on Ray: a local cluster of ``num_cpus`` or an existing cluster at ``address``.

    ``gpus_per_trial`` > 0 trains each trial on its CUDA device (bf16 autocast, flash
    attention) and bills GPUs in the ledger; 0 trains on CPU threads and bills CPUs.
    ``max_concurrent_trials`` caps trials running at once (1 makes the report order, and so
    ASHA's asynchronous decisions, reproducible); None lets the granted CPUs decide.
    ``max_failures``: retries of a failed trial (e.g. its worker was killed), each resuming
    from the trial's last checkpoint. ``heartbeat_s``: how often the driver beats for each
    running trial; ``lease_s``: how old a running trial's last beat may be before a resume
    treats it as stale (at least ``LEASE_FACTOR`` × heartbeat_s)."""
    address: str | None = None
    num_cpus: int = Field(default=2, ge=1)
    cpus_per_trial: float = Field(default=1, gt=0)
    gpus_per_trial: float = Field(default=0, ge=0)
    max_concurrent_trials: int | None = Field(default=None, ge=1)
    device_kind: str = "cpu"
    max_failures: int = Field(default=1, ge=0)
    heartbeat_s: float = Field(default=10.0, gt=0)
    lease_s: float = Field(default=60.0, gt=0)
    #: a running trial with no report for this many seconds is a zombie: flagged, its worker
    #: killed and not retried (None: never); set it well above a trial's start-up (a fresh Ray
    #: worker imports torch: seconds) and its slowest evaluation interval
    zombie_timeout_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _lease(self) -> "RayConfig":
        if not self.lease_s >= LEASE_FACTOR * self.heartbeat_s:
            raise ValueError(f"ray.lease_s = {self.lease_s}: must be >= {LEASE_FACTOR:g} × "
                             f"ray.heartbeat_s ({self.heartbeat_s}) = "
                             f"{LEASE_FACTOR * self.heartbeat_s:g}, so a live trial that "
                             "misses a beat or two is never reaped as stale")
        return self


class DeviceSpec(_Strict):
    """One device kind in the cost table: peak FLOP/s per device (dense bf16 for GPUs, the
    figure MFU divides by) and prices per device-hour in ``CostConfig.currency``."""
    peak_flops: float | None = Field(default=None, gt=0)
    on_demand: float | None = Field(default=None, ge=0)
    spot: float | None = Field(default=None, ge=0)


#: Defaults of the device table. Peak: vendor datasheets, dense bf16 tensor-core FLOP/s per
#: device (fp16 for V100/T4); ``cpu`` peak None means "measured at run time" (one thread's
#: float32 matmul rate × CPUs granted). Prices: representative 2026 cloud list prices in USD
#: per device-hour (per vCPU-hour for ``cpu``), on-demand and spot — set your own in the
#: config's ``cost.devices``; an entry there replaces the default entry of that kind.
DEFAULT_DEVICES: dict[str, DeviceSpec] = {
    "cpu": DeviceSpec(peak_flops=None, on_demand=0.04, spot=0.015),
    "t4": DeviceSpec(peak_flops=65e12, on_demand=0.53, spot=0.16),
    "v100": DeviceSpec(peak_flops=125e12, on_demand=3.06, spot=0.92),
    "a10g": DeviceSpec(peak_flops=125e12, on_demand=1.01, spot=0.40),
    "l4": DeviceSpec(peak_flops=121e12, on_demand=0.80, spot=0.30),
    "a100": DeviceSpec(peak_flops=312e12, on_demand=3.67, spot=1.50),
    "h100": DeviceSpec(peak_flops=989e12, on_demand=6.88, spot=2.50),
    "h200": DeviceSpec(peak_flops=989e12, on_demand=7.91, spot=3.00),
    "b200": DeviceSpec(peak_flops=2250e12, on_demand=14.24, spot=5.50),
}


class CostConfig(_Strict):
    """How the ledger prices and attributes the sweep (DESIGN.md §6): the device table
    (peak FLOP/s and prices per device kind, over :data:`DEFAULT_DEVICES`), which price
    applies, and who pays (``project`` groups sweeps in ``mutune report --by project``)."""
    project: str | None = Field(default=None, min_length=1, max_length=200)
    owner: str | None = Field(default=None, min_length=1, max_length=200)
    currency: str = Field(default="USD", min_length=1, max_length=8)
    pricing: Literal["on_demand", "spot"] = "on_demand"
    devices: dict[str, DeviceSpec] = Field(default_factory=dict)

    def device(self, kind: str) -> DeviceSpec:
        """The table entry of ``kind`` (case-insensitive): the config's, else the default,
        else an entry with no peak and no price."""
        k = kind.lower()
        table = {**DEFAULT_DEVICES, **{n.lower(): v for n, v in self.devices.items()}}
        return table.get(k, DeviceSpec())

    def price_per_hour(self, kind: str) -> float | None:
        """Price per device-hour of ``kind`` under ``pricing`` (None: not in the table)."""
        return getattr(self.device(kind), self.pricing)


class BudgetConfig(_Strict):
    """What the sweep may spend, enforced while it runs (and priced by ``--dry-run``).

    ``gpu_hours``: device-hours (allocated seconds × devices / 3600, DESIGN.md §6) of every
    trial and the target run together. ``money``: the same at ``price_per_hour`` per device-hour
    (default: the ``cost`` table's price of ``ray.device_kind``; the sweep config refuses a
    money budget with neither). No new trial starts once the spent hours plus what the running trials need to
    reach their next rung plus the new trial's first rung would exceed the budget; running
    trials finish their rung and the sweep ends ``budget_exhausted`` with what it has.
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


class TrackingConfig(_Strict):
    """Optional logging of every trial through Ray Tune's logger callbacks (off by default;
    the results database records everything either way). ``tensorboard``: event files under
    each trial's folder in ``OUT/ray/`` (needs the ``tensorboard`` extra, tensorboardX).
    ``mlflow_uri``: an MLflow tracking URI, one MLflow run per trial in experiment
    ``mlflow_experiment`` (default: the sweep's name; needs the ``mlflow`` extra)."""
    tensorboard: bool = False
    mlflow_uri: str | None = Field(default=None, min_length=1)
    mlflow_experiment: str | None = Field(default=None, min_length=1)


class SweepConfig(_Strict):
    """A whole mutune sweep: proxies at several widths → transfer → one target run."""
    name: str = Field(min_length=1, max_length=200)
    seed: int = Field(default=0, ge=0)
    model: SerializeAsAny[ModelSpec]
    data: Annotated[Union[DigitsData, TextData, TokenData], Field(discriminator="kind")]
    widths: list[int] = Field(min_length=2)
    search: SearchConfig
    train: TrainConfig = TrainConfig()
    target: TargetConfig
    transfer: TransferConfig = TransferConfig()
    ray: RayConfig = RayConfig()
    cost: CostConfig = CostConfig()
    budget: BudgetConfig = BudgetConfig()
    tracking: TrackingConfig = TrackingConfig()

    @field_validator("model", mode="before")
    @classmethod
    def _plugin(cls, value: Any) -> Any:
        """Validate the section with the spec of the plugin ``family`` names."""
        if isinstance(value, ModelSpec):
            return value
        return _model_spec(value).model_validate(value)

    @model_validator(mode="after")
    def _cross(self) -> "SweepConfig":
        from mutune.proxies.plugins import MODEL_HPARAMS, load_family

        family = load_family(self.model.family)
        if self.data.kind not in family.data_kinds:
            raise ValueError(f"a {self.model.family} model needs data.kind: "
                             f"{' or '.join(family.data_kinds)} (got {self.data.kind!r})")
        for name in [*self.search.space, *self.search.fixed]:
            if name in MODEL_HPARAMS and name not in family.hparams:
                raise ValueError(f"search names {name!r}, which model.family "
                                 f"{self.model.family!r} does not take (it takes: lr"
                                 + "".join(f", {h}" for h in family.hparams) + ")")
        w = self.widths
        if any(b <= a for a, b in zip(w, w[1:])) or w[0] < 1:
            raise ValueError(f"widths {w} must be positive and strictly increasing")
        if self.model.base_width > w[0]:
            raise ValueError(f"model.base_width ({self.model.base_width}) must be <= the "
                             f"smallest width ({w[0]})")
        if self.target.width <= w[-1]:
            raise ValueError(f"target.width ({self.target.width}) must be > the largest "
                             f"proxy width ({w[-1]})")
        if isinstance(self.model, GPTModel):
            for width in [*w, self.target.width, self.model.base_width,
                          2 * self.model.base_width]:
                if width % self.model.d_head:
                    raise ValueError(f"width {width} must be a multiple of model.d_head "
                                     f"({self.model.d_head})")
            if isinstance(self.data, TextData) and self.model.vocab != 256:
                raise ValueError(f"model.vocab ({self.model.vocab}) must be 256 for byte-level "
                                 "text data")
            if self.model.positions == "rotary" and self.model.d_head % 2:
                raise ValueError(f"rotary positions need an even model.d_head "
                                 f"({self.model.d_head})")
        if self.ray.cpus_per_trial > self.ray.num_cpus:
            raise ValueError(f"ray.cpus_per_trial ({self.ray.cpus_per_trial}) must be <= "
                             f"ray.num_cpus ({self.ray.num_cpus})")
        if self.budget.money is not None and self.budget.price_per_hour is None:
            price = self.cost.price_per_hour(self.ray.device_kind)
            if price is None or price <= 0:
                raise ValueError(f"budget.money ({self.budget.money}) needs a price: set "
                                 f"budget.price_per_hour, or a {self.cost.pricing} price for "
                                 f"device kind {self.ray.device_kind!r} in cost.devices")
            self.budget = self.budget.model_copy(update={"price_per_hour": price})
        return self

    @property
    def target_steps(self) -> int:
        """Training steps of the target run: ``target.steps`` or the proxies' max_t."""
        return self.target.steps or self.search.scheduler.max_t


def _model_spec(value: Any) -> type[ModelSpec]:
    """The spec class of the plugin ``value["family"]`` names (ValueError if none)."""
    from mutune.proxies.plugins import load_family

    if not isinstance(value, dict) or not isinstance(value.get("family"), str):
        raise ValueError("model must be a mapping with a 'family' naming a model plugin")
    spec = load_family(value["family"]).spec
    if not (isinstance(spec, type) and issubclass(spec, ModelSpec)):
        raise ValueError(f"model plugin {value['family']!r}: its spec is not a "
                         "mutune.config.ModelSpec subclass")
    return spec


def _errors(err: ValidationError, prefix: str = "") -> list[dict[str, str]]:
    """Each broken rule as {"field": dotted path, "value": repr, "rule": text}."""
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        # pydantic puts union tags in the path; they are not user fields
        loc = ".".join(p for p in (prefix + loc).split(".") if p not in
                       {"DigitsData", "TextData", "digits", "text", "tokens", "loguniform",
                        "uniform", "choice"}) or "(root)"
        rule = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        shown = repr(value) if not isinstance(value, dict) else "{…}"
        if e["type"] == "extra_forbidden":
            rule = "unknown key (not allowed)"
        out.append({"field": loc, "value": shown, "rule": rule})
    return out


def _message(source: str, errors: list[dict[str, str]]) -> str:
    return "\n".join([f"invalid sweep config {source}:"] +
                     [f"  {e['field']} = {e['value']}: {e['rule']}" for e in errors])


def parse_config(data: Any, *, source: str = "<dict>") -> SweepConfig:
    """Validate already-parsed config data (a mapping) into a :class:`SweepConfig`.

    The ``model`` section is validated first, with the spec of the model plugin its
    ``family`` names (:mod:`mutune.proxies.plugins`), so its errors name ``model.<field>``.

    Raises:
        ConfigError: one line per broken rule, each naming the field, the value and the rule
            (also as data in ``ConfigError.errors``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid sweep config {source}: top level must be a mapping, got "
                          f"{type(data).__name__}",
                          [{"field": "(root)", "value": type(data).__name__,
                            "rule": "top level must be a mapping"}])
    errors: list[dict[str, str]] = []
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("family"), str):
        try:
            spec = _model_spec(model)
            data = {**data, "model": spec.model_validate(model)}
        except ConfigError as err:
            raise ConfigError(f"invalid sweep config {source}:\n  {err}",
                              [{"field": "model.family", "value": repr(model["family"]),
                                "rule": str(err)}]) from None
        except ValidationError as err:
            errors += _errors(err, prefix="model.")
            data = {k: v for k, v in data.items() if k != "model"}
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as err:
        more = _errors(err)
        if errors:   # the model section failed: the rest cannot be cross-checked
            more = [e for e in more if e["field"] != "model"]
        errors += more
        raise ConfigError(_message(source, errors), errors) from None
    if errors:
        raise ConfigError(_message(source, errors), errors)
    return cfg


def default_config_path() -> Path:
    """Path of the quickstart config shipped inside the package (``mutune/configs``)."""
    return Path(str(importlib.resources.files("mutune") / "configs" / "quickstart.yaml"))


def load_config(path: str | os.PathLike[str] | None = None) -> SweepConfig:
    """Read and validate a YAML sweep config; ``None`` loads the embedded quickstart config.

    Raises:
        ConfigError: the file is missing, is not YAML, or breaks a rule (field, value, rule).
    """
    p = Path(path) if path is not None else default_config_path()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read sweep config {p}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"sweep config {p} is not valid YAML: {err}") from None
    return parse_config(data, source=str(p))
