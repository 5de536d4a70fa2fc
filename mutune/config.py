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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mutune.errors import ConfigError

__all__ = [
    "SweepConfig", "MLPModel", "GPTModel", "DigitsData", "TextData", "TokenData", "LogUniform",
    "Uniform", "Choice", "SearchConfig", "SchedulerConfig", "TrainConfig", "TargetConfig", "TransferConfig",
    "RayConfig",
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


class MLPModel(_Strict):
    """μP MLP (``mutune.proxies.mlp``): ``depth`` hidden layers of size width."""
    family: Literal["mlp"]
    parametrization: Literal["mup", "sp"] = "mup"
    depth: int = Field(default=2, ge=1, le=64)
    base_width: int = Field(default=64, ge=1)


class GPTModel(_Strict):
    """μP byte-level GPT-style pre-LN decoder (``mutune.proxies.gpt``)."""
    family: Literal["gpt"]
    parametrization: Literal["mup", "sp"] = "mup"
    depth: int = Field(default=2, ge=1, le=64)
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
    step 0)."""
    batch_size: int = Field(default=64, ge=1)
    eval_every: int = Field(default=10, ge=1)
    eval_windows: int = Field(default=64, ge=1)
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = Field(default=0.0, ge=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.999, ge=0, lt=1)
    checkpoint_every: int = Field(default=0, ge=0)


class TargetConfig(_Strict):
    """The one full-size run trained with the transferred hyperparameters; ``steps`` and
    ``batch_size`` default to the proxies' max_t and batch size."""
    width: int = Field(ge=1)
    steps: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)


class TransferConfig(_Strict):
    """How optima become transfer rules (mutune.transfer, mutune.scaling).

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

    @model_validator(mode="after")
    def _lease(self) -> "RayConfig":
        if not self.lease_s >= LEASE_FACTOR * self.heartbeat_s:
            raise ValueError(f"ray.lease_s = {self.lease_s}: must be >= {LEASE_FACTOR:g} × "
                             f"ray.heartbeat_s ({self.heartbeat_s}) = "
                             f"{LEASE_FACTOR * self.heartbeat_s:g}, so a live trial that "
                             "misses a beat or two is never reaped as stale")
        return self


class SweepConfig(_Strict):
    """A whole mutune sweep: proxies at several widths → transfer → one target run."""
    name: str = Field(min_length=1, max_length=200)
    seed: int = Field(default=0, ge=0)
    model: Annotated[Union[MLPModel, GPTModel], Field(discriminator="family")]
    data: Annotated[Union[DigitsData, TextData, TokenData], Field(discriminator="kind")]
    widths: list[int] = Field(min_length=2)
    search: SearchConfig
    train: TrainConfig = TrainConfig()
    target: TargetConfig
    transfer: TransferConfig = TransferConfig()
    ray: RayConfig = RayConfig()

    @model_validator(mode="after")
    def _cross(self) -> "SweepConfig":
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
            if isinstance(self.data, DigitsData):
                raise ValueError("a gpt model needs data.kind: text or tokens")
            if isinstance(self.data, TextData) and self.model.vocab != 256:
                raise ValueError(f"model.vocab ({self.model.vocab}) must be 256 for byte-level "
                                 "text data")
            if self.model.positions == "rotary" and self.model.d_head % 2:
                raise ValueError(f"rotary positions need an even model.d_head "
                                 f"({self.model.d_head})")
        elif not isinstance(self.data, DigitsData):
            raise ValueError("an mlp model needs data.kind: digits")
        if self.ray.cpus_per_trial > self.ray.num_cpus:
            raise ValueError(f"ray.cpus_per_trial ({self.ray.cpus_per_trial}) must be <= "
                             f"ray.num_cpus ({self.ray.num_cpus})")
        return self

    @property
    def target_steps(self) -> int:
        """Training steps of the target run: ``target.steps`` or the proxies' max_t."""
        return self.target.steps or self.search.scheduler.max_t


def _format_errors(err: ValidationError, source: str) -> str:
    lines = [f"invalid sweep config {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        # pydantic puts union tags in the path; they are not user fields
        loc = ".".join(p for p in loc.split(".") if p not in
                       {"MLPModel", "GPTModel", "DigitsData", "TextData", "mlp", "gpt",
                        "digits", "text", "loguniform", "uniform", "choice"}) or "(root)"
        rule = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        shown = repr(value) if not isinstance(value, dict) else "{…}"
        if e["type"] == "extra_forbidden":
            rule = "unknown key (not allowed)"
        lines.append(f"  {loc} = {shown}: {rule}")
    return "\n".join(lines)


def parse_config(data: Any, *, source: str = "<dict>") -> SweepConfig:
    """Validate already-parsed config data (a mapping) into a :class:`SweepConfig`.

    Raises:
        ConfigError: one line per broken rule, each naming the field, the value and the rule.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid sweep config {source}: top level must be a mapping, got "
                          f"{type(data).__name__}")
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err, source)) from None


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
