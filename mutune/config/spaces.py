"""What a search space may hold: the searchable hyperparameters and their distributions."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from mutune.config.base import StrictModel

__all__ = ["SEARCHABLE", "LogUniform", "Uniform", "Choice", "Distribution"]

#: Hyperparameters a search space may name. All but ``lr`` are μP multipliers (TP V Table 1:
#: they transfer across width): input/embedding multiplier, output (readout) multiplier,
#: attention-logit multiplier, and the init standard deviation scale.
SEARCHABLE = ("lr", "output_mult", "input_mult", "attn_mult", "init_std")


class LogUniform(StrictModel):
    """Log-uniform distribution on [low, high]; both > 0.

    Raises (on validation): ``high`` not above ``low``."""
    type: Literal["loguniform"]
    low: float = Field(gt=0)
    high: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> "LogUniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Uniform(StrictModel):
    """Uniform distribution on [low, high].

    Raises (on validation): ``high`` not above ``low``."""
    type: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> "Uniform":
        if not self.high > self.low:
            raise ValueError(f"high ({self.high}) must be > low ({self.low})")
        return self


class Choice(StrictModel):
    """A uniform choice among the listed values (at least one)."""
    type: Literal["choice"]
    values: list[float] = Field(min_length=1)


#: One dimension of a search space, told apart by its ``type`` key.
Distribution = Annotated[Union[LogUniform, Uniform, Choice], Field(discriminator="type")]
