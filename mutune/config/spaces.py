"""What a search space may hold: the searchable hyperparameters and their distributions."""
from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from mutune.config.base import StrictModel

__all__ = ["SEARCHABLE", "RECIPE_HPARAMS", "NOT_TRANSFERRED", "VALID_RANGES", "CATEGORICAL",
           "clip_valid", "is_categorical", "as_value", "fmt_value", "LogUniform", "Uniform",
           "Choice", "Distribution"]

#: Hyperparameters a search space may name: the learning rate; the μP multipliers
#: (input/embedding, output/readout, attention logit, init std scale) and ``dropout``, which a
#: model family takes when it declares them; and the training recipe's knobs
#: (:data:`RECIPE_HPARAMS`), which override ``train.*`` per trial.
SEARCHABLE = ("lr", "output_mult", "input_mult", "attn_mult", "init_std", "dropout",
              "beta1", "beta2", "eps", "weight_decay", "grad_clip", "warmup_fraction",
              "lr_schedule")

#: Searchable knobs of the training recipe: Adam's β1, β2 and ε, decoupled weight decay, the
#: gradient-clipping norm, and the warmup as a fraction of each run's own steps (so a proxy's
#: max_t and the target's steps get the same shape). A trial's value replaces the config's
#: ``train.*`` field of the same name (``warmup_fraction`` replaces ``warmup_steps``).
RECIPE_HPARAMS = ("beta1", "beta2", "eps", "weight_decay", "grad_clip", "warmup_fraction",
                  "lr_schedule")

#: Knobs whose values are names, searched only as a ``choice`` of these; compared per choice and
#: width, never fitted, not a dimension of the optimum's quadratic (docs/transfer.md §8).
CATEGORICAL = {"lr_schedule": ("constant", "cosine", "linear", "wsd")}

#: Not transferred across width (Tensor Programs V, Table 1: regularisation — dropout and
#: weight decay — is not μTransferable): no rule is fitted; the target takes the widest
#: proxy's optimum, and weight decay follows the AdamW timescale rule when
#: ``transfer.weight_decay_rule`` asks (mutune.pipeline.transfer_stage).
NOT_TRANSFERRED = ("weight_decay", "dropout")

#: Where a knob is defined: [low, high) — a searched range must lie inside it, and a value
#: mutune derives (a confirmation design's level, a widened centre, a transferred value) is
#: clipped into it (:func:`clip_valid`). Every other searchable name must be > 0.
VALID_RANGES = {"beta1": (0.0, 1.0), "beta2": (0.0, 1.0), "dropout": (0.0, 1.0),
                "warmup_fraction": (0.0, 1.0), "weight_decay": (0.0, math.inf)}


def clip_valid(name: str, value: float) -> float:
    """``value`` clipped into ``name``'s :data:`VALID_RANGES` (its open upper end kept 1e-6
    inside: β2 = 1 is no Adam); names without a range are returned unchanged."""
    if name not in VALID_RANGES:
        return value
    lo, hi = VALID_RANGES[name]
    top = hi - 1e-6 if math.isfinite(hi) else hi
    return min(max(value, lo), top)


def as_value(value: object) -> float | str:
    """A hyperparameter's value as mutune carries it: a name (a :data:`CATEGORICAL` knob's
    choice) unchanged, anything else as a float."""
    return value if isinstance(value, str) else float(value)  # type: ignore[arg-type]


def fmt_value(value: object, spec: str = ".4g") -> str:
    """Text of a hyperparameter's value: a name as it is, a number with ``spec``."""
    return value if isinstance(value, str) else format(value, spec)


class LogUniform(StrictModel):
    """Log-uniform distribution on [low, high]; both > 0.

    Raises (on validation): ``high`` not above ``low``."""
    type: Literal["loguniform"] = Field(description="`loguniform`")
    low: float = Field(gt=0, description="lower end")
    high: float = Field(gt=0, description="upper end")

    @model_validator(mode="after")
    def _ordered(self) -> "LogUniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Uniform(StrictModel):
    """Uniform distribution on [low, high].

    Raises (on validation): ``high`` not above ``low``."""
    type: Literal["uniform"] = Field(description="`uniform`")
    low: float = Field(description="lower end")
    high: float = Field(description="upper end")

    @model_validator(mode="after")
    def _ordered(self) -> "Uniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Choice(StrictModel):
    """A uniform choice among the listed values (at least one): numbers, or — for a
    :data:`CATEGORICAL` knob — names. A list mixing the two is refused."""
    type: Literal["choice"] = Field(description="`choice`")
    values: list[float] | list[str] = Field(
        min_length=1, description="the values, numbers or (a categorical knob's) names")

    @property
    def categorical(self) -> bool:
        """True when the values are names (strings), not numbers."""
        return isinstance(self.values[0], str)


def is_categorical(dist: object) -> bool:
    """True for a ``choice`` among names: a dimension compared per choice, never fitted and
    never cast to a number."""
    return isinstance(dist, Choice) and dist.categorical


#: One dimension of a search space, told apart by its ``type`` key.
Distribution = Annotated[Union[LogUniform, Uniform, Choice], Field(discriminator="type")]
