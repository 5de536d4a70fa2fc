"""The whole sweep config, :class:`SweepConfig`, and the rules that tie its sections together."""
from __future__ import annotations

import math

from typing import Annotated, Any, Union

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from mutune.config.base import FieldRuleError, StrictModel
from mutune.config.cost import CostConfig
from mutune.config.model import (DigitsDataConfig, GPTModel, ModelSpec, TextDataConfig,
                                 TokenDataConfig, model_spec_class)
from mutune.config.ray_section import RayConfig
from mutune.config.sections import (BudgetConfig, SearchConfig, TargetConfig,
                                    TrackingConfig, TrainConfig, TransferConfig)
from mutune.errors import ConfigError

__all__ = ["SweepConfig", "with_ladder_depth"]


def with_ladder_depth(data: Any) -> Any:
    """Raw config data with, when ``depths`` is given and the model section has no
    ``depth``, ``model.depth`` set to the smallest proxy depth (the model section describes
    the smallest proxy); anything else unchanged."""
    if isinstance(data, dict):
        depths, model = data.get("depths"), data.get("model")
        if (isinstance(depths, list) and depths and isinstance(depths[0], int)
                and isinstance(model, dict) and "depth" not in model):
            data = {**data, "model": {**model, "depth": depths[0]}}
    return data


class SweepConfig(StrictModel):
    """A whole mutune sweep: proxies at several widths (and, with ``depths``, at every width ×
    depth) → transfer → one target run (docs/architecture.md §1–§2, docs/transfer.md §10).

    Raises (on validation), besides each section's own rules: data of a kind the model family
    does not read; a searched hyperparameter the family does not take; widths not positive and
    strictly increasing; ``model.base_width`` above the smallest width; a target no wider than
    the widest proxy; GPT widths not multiples of ``d_head`` (or an odd ``d_head`` with rotary
    positions, or a vocab other than 256 on byte-level text); ``cpus_per_trial`` above
    ``num_cpus``; a money budget with no price; with ``depths``: depths not strictly
    increasing, ``model.depth`` other than the smallest, ``model.base_depth`` above the
    smallest, and with ≥ 2 depths a missing or shallower ``target.depth``; a ``target.depth``
    that differs from the only proxy depth."""
    name: str = Field(min_length=1, max_length=200, description="the sweep's name")
    seed: int = Field(default=0, ge=0, description="seeds every draw of the sweep")
    model: SerializeAsAny[ModelSpec] = Field(
        description="the proxy family and its options (`model.*`; a plugin adds its own)")
    data: Annotated[Union[DigitsDataConfig, TextDataConfig, TokenDataConfig],
                    Field(discriminator="kind")] = Field(
        description="what the proxies and the target train on (`data.kind`: `digits`, "
        "`text`, `tokens`)")
    widths: list[int] = Field(
        min_length=2, description="proxy widths, strictly increasing; the smallest at least "
        "`model.base_width`")
    depths: list[int] | None = Field(
        default=None, min_length=1, description="proxy depths, strictly increasing (None: "
        "the one `model.depth`): a width × depth ladder whose rules are fitted over width and "
        "depth (docs/transfer.md §10)")
    search: SearchConfig = Field(description="what is searched and how (`search.*`)")
    train: TrainConfig = Field(
        default=TrainConfig(), description="every trial's training (`train.*`)")
    target: TargetConfig = Field(description="the one full-size run (`target.*`)")
    transfer: TransferConfig = Field(
        default=TransferConfig(), description="rules and the gate (`transfer.*`)")
    ray: RayConfig = Field(default=RayConfig(), description="execution on Ray (`ray.*`)")
    cost: CostConfig = Field(
        default=CostConfig(), description="prices and attribution (`cost.*`)")
    budget: BudgetConfig = Field(
        default=BudgetConfig(), description="spend limits (`budget.*`)")
    tracking: TrackingConfig = Field(
        default=TrackingConfig(), description="TensorBoard / MLflow logging (`tracking.*`)")

    @model_validator(mode="before")
    @classmethod
    def _ladder_depth(cls, data: Any) -> Any:
        return with_ladder_depth(data)

    @field_validator("model", mode="before")
    @classmethod
    def _plugin(cls, value: Any) -> Any:
        """Validate the section with the spec of the plugin ``family`` names."""
        if isinstance(value, ModelSpec):
            return value
        return model_spec_class(value).model_validate(value)

    @field_validator("widths")
    @classmethod
    def _widths(cls, w: list[int]) -> list[int]:
        """Proxy widths: positive and strictly increasing (the error names the field)."""
        if any(b <= a for a, b in zip(w, w[1:])) or w[0] < 1:
            raise ValueError(f"widths {w} must be positive and strictly increasing")
        return w

    @field_validator("depths")
    @classmethod
    def _depths(cls, d: list[int] | None) -> list[int] | None:
        """Proxy depths: positive and strictly increasing (the error names the field)."""
        if d is not None and (any(b <= a for a, b in zip(d, d[1:])) or d[0] < 1 or d[-1] > 64):
            raise ValueError(f"depths {d} must be strictly increasing, each from 1 to 64")
        return d

    @model_validator(mode="after")
    def _cross(self) -> "SweepConfig":
        self._check_family()
        self._check_depths()
        self._check_widths()
        self._check_rungs()
        self._check_data_and_loop()
        self._check_resources()
        self._price_budget()
        return self

    def _check_family(self) -> None:
        from mutune.proxies.plugins import MODEL_HPARAMS, load_family

        family = load_family(self.model.family)
        if self.data.kind not in family.data_kinds:
            raise FieldRuleError("data.kind", self.data.kind,
                                 f"a {self.model.family} model needs data.kind: "
                                 f"{' or '.join(family.data_kinds)} (got {self.data.kind!r})")
        for name in [*self.search.space, *self.search.fixed]:
            if name in MODEL_HPARAMS and name not in family.hparams:
                where = "space" if name in self.search.space else "fixed"
                raise FieldRuleError(f"search.{where}.{name}", getattr(self.search, where)[name],
                                     f"search names {name!r}, which model.family "
                                     f"{self.model.family!r} does not take (it takes: lr"
                                     + "".join(f", {h}" for h in family.hparams) + ")")

    def _check_widths(self) -> None:
        w = self.widths
        if self.model.base_width > w[0]:
            raise FieldRuleError("model.base_width", self.model.base_width,
                                 f"model.base_width ({self.model.base_width}) must be <= the "
                                 f"smallest width ({w[0]})")
        if self.target.width <= w[-1]:
            raise FieldRuleError("target.width", self.target.width,
                                 f"target.width ({self.target.width}) must be > the largest "
                                 f"proxy width ({w[-1]})")
        depth_p = getattr(self.model, "depth_parametrization", "none")
        if depth_p != "none" and self.train.optimizer == "sgd":
            raise FieldRuleError("model.depth_parametrization", depth_p,
                                 "its per-group learning-rate and ε factors are Adam's (Dey "
                                 "et al. 2025, Table 1), and train.optimizer is 'sgd': use "
                                 "adam or adamw")
        if isinstance(self.model, GPTModel):
            for width in [*w, self.target.width, self.model.base_width,
                          2 * self.model.base_width]:
                if width % self.model.d_head:
                    raise FieldRuleError("model.d_head", self.model.d_head,
                                         f"width {width} must be a multiple of model.d_head "
                                         f"({self.model.d_head})")
            if isinstance(self.data, TextDataConfig) and self.model.vocab != 256:
                raise FieldRuleError("model.vocab", self.model.vocab,
                                     f"model.vocab ({self.model.vocab}) must be 256 for byte-level "
                                     "text data")
            if self.model.positions == "rotary" and self.model.d_head % 2:
                raise FieldRuleError("model.d_head", self.model.d_head,
                                     f"rotary positions need an even model.d_head "
                                     f"({self.model.d_head})")

    def _check_rungs(self) -> None:
        sched, every = self.search.scheduler, self.train.eval_every
        milestones, m = [], sched.grace_period
        while m <= sched.max_t:           # ASHA's rungs; every Hyperband bracket's are among them
            milestones.append(m)
            m *= sched.reduction_factor
        missed = [m for m in dict.fromkeys([*milestones, sched.max_t]) if m % every]
        if missed:
            fit = math.gcd(*milestones, sched.max_t)
            raise FieldRuleError(
                "train.eval_every", every,
                f"train.eval_every ({every}) does not divide the rung milestones {missed} "
                f"(grace_period·η^k and max_t, steps): no evaluation lands on them, so a rung "
                f"would judge a later step; make eval_every divide every milestone (a divisor "
                f"of {fit}, e.g. eval_every: {fit})")

    def _check_data_and_loop(self) -> None:
        vocab = getattr(self.model, "vocab", None)
        if (getattr(self.data, "kind", None) == "tokens" and self.data.dtype == "uint16"
                and vocab is not None and vocab > 1 << 16):
            raise FieldRuleError("data.dtype", self.data.dtype,
                                 f"model.vocab ({vocab}) > 65,536 with data.dtype uint16: token "
                                 "ids above 65,535 do not fit in 16 bits; write the token files "
                                 "as uint32 and set data.dtype: uint32")
        if self.search.metric != "val_loss" and self.train.loop is None:
            raise FieldRuleError("search.metric", self.search.metric,
                                 "mutune's own loop reports val_loss (and val_loss_se, "
                                 "test_loss); any other metric comes from a training-loop "
                                 "plugin (train.loop) that reports it")
        if self.train.loop is not None:
            from mutune.proxies.plugins import load_loop

            try:
                load_loop(self.train.loop)    # names the installed loops when it is missing
            except ConfigError as err:
                raise FieldRuleError("train.loop", self.train.loop, str(err).removeprefix(
                    f"train.loop = {self.train.loop!r}: ")) from None
            if self.search.replicates > 1:
                raise FieldRuleError("search.replicates", self.search.replicates,
                                     f"search.replicates ({self.search.replicates}) with "
                                     f"train.loop {self.train.loop!r}: a training-loop plugin "
                                     "trains one model per trial; use replicates: 1 (seeds "
                                     "are then separate trials)")

    def _check_resources(self) -> None:
        if self.train.checkpoint_every == "auto" and self.cost.spot.mtbp_s is None:
            raise FieldRuleError("train.checkpoint_every", self.train.checkpoint_every,
                                 "train.checkpoint_every = 'auto' needs cost.spot.mtbp_s (the mean "
                                 "time between preemptions, seconds) for Young's interval "
                                 "√(2·C·M)")
        if self.ray.cpus_per_trial > self.ray.num_cpus:
            raise FieldRuleError("ray.cpus_per_trial", self.ray.cpus_per_trial,
                                 f"ray.cpus_per_trial ({self.ray.cpus_per_trial}) must be <= "
                                 f"ray.num_cpus ({self.ray.num_cpus})")
        nw, tb = self.target.num_workers, self.target.batch_size or self.train.batch_size
        if nw and tb % nw:
            raise FieldRuleError("target.num_workers", nw,
                                 f"target.num_workers ({nw}) must divide the target's batch size "
                                 f"({tb}, target.batch_size or train.batch_size): each worker "
                                 "trains an equal share of every batch")

    def _price_budget(self) -> None:
        if self.budget.money is not None and self.budget.price_per_hour is None:
            kind = self.ray.priced_kind
            if kind is None:
                raise FieldRuleError("budget.money", self.budget.money,
                                     f"budget.money ({self.budget.money}) with GPU trials needs a "
                                     "price before the cluster is seen: set budget.price_per_hour, "
                                     "or ray.device_kind (e.g. h100) to price from cost.devices")
            price = self.cost.price_per_hour(kind)
            if price is None or price <= 0:
                raise FieldRuleError("budget.money", self.budget.money,
                                     f"budget.money ({self.budget.money}) needs a price: set "
                                     f"budget.price_per_hour, or a {self.cost.pricing} price for "
                                     f"device kind {kind!r} in cost.devices")
            # the model is frozen: the validator fills the price in once, as it is built
            object.__setattr__(self, "budget",
                               self.budget.model_copy(update={"price_per_hour": price}))

    def _check_depths(self) -> None:
        """The depth ladder's rules; with ≥ 2 depths an unset ``model.base_depth`` becomes the
        smallest depth (the depth parametrization's multipliers are 1 there)."""
        depths, model, tdepth = self.depths, self.model, self.target.depth
        if depths is None:
            if tdepth is not None and tdepth != model.depth:
                raise FieldRuleError(
                    "target.depth", tdepth,
                    f"target.depth ({tdepth}) differs from the only proxy depth, model.depth "
                    f"({model.depth}): a rule across depth needs at least 2 proxy depths; "
                    f"list them in depths (e.g. depths: [{model.depth}, {2 * model.depth}]) "
                    "or leave target.depth out")
            return
        if model.depth != depths[0]:
            raise FieldRuleError("model.depth", model.depth,
                                 f"model.depth ({model.depth}) differs from the smallest proxy "
                                 f"depth in depths ({depths[0]}): with depths the model section "
                                 "describes the smallest proxy; leave model.depth out or set it "
                                 f"to {depths[0]}")
        base = getattr(model, "base_depth", None)
        if base is not None and base > depths[0]:
            raise FieldRuleError("model.base_depth", base,
                                 f"model.base_depth ({base}) must be <= the smallest depth "
                                 f"({depths[0]}): the base depth is where the depth "
                                 "parametrization's multipliers are 1")
        if len(depths) == 1:
            if tdepth is not None and tdepth != depths[0]:
                raise FieldRuleError(
                    "target.depth", tdepth,
                    f"target.depth ({tdepth}) differs from the only proxy depth ({depths[0]}, "
                    "depths): a rule across depth needs at least 2 proxy depths")
        else:
            if tdepth is None:
                raise FieldRuleError("target.depth", tdepth,
                                     f"target.depth is required with a depth ladder (depths: "
                                     f"{depths}): the depth the target run trains at")
            if tdepth < depths[-1]:
                raise FieldRuleError("target.depth", tdepth,
                                     f"target.depth ({tdepth}) must be >= the deepest proxy depth "
                                     f"({depths[-1]}): the ladder transfers upwards")
        if hasattr(model, "base_depth") and base is None and len(depths) > 1:
            # the model is frozen: the validator sets the base depth once, as it is built
            object.__setattr__(self, "model", model.model_copy(update={"base_depth": depths[0]}))

    @property
    def proxy_depths(self) -> list[int]:
        """The proxies' depths: ``depths``, or the one ``model.depth``."""
        return list(self.depths) if self.depths else [self.model.depth]

    @property
    def depth_ladder(self) -> bool:
        """Whether the proxies span ≥ 2 depths (a rule across depth is fitted)."""
        return len(self.proxy_depths) >= 2

    @property
    def target_depth(self) -> int:
        """The target run's depth: ``target.depth``, else the proxies' one depth."""
        return self.target.depth or self.proxy_depths[-1]

    @property
    def target_steps(self) -> int:
        """Training steps of the target run: ``target.steps`` or the proxies' max_t."""
        return self.target.steps or self.search.scheduler.max_t

    @property
    def target_checkpoint_every(self) -> int:
        """The target run's checkpoint interval in steps: ``target.checkpoint_every``, or by
        default a tenth of its steps rounded up to a multiple of ``train.eval_every`` (the
        checkpoints are written at evaluations): at most about ten checkpoints, and a resume
        repeats at most one interval."""
        if self.target.checkpoint_every is not None:
            return self.target.checkpoint_every
        every = self.train.eval_every
        return max(every, -(-self.target_steps // 10 // every) * every)

    @property
    def target_checkpoint_max_share(self) -> float | None:
        """The largest share of the target run its periodic checkpoints may take
        (``target.checkpoint_max_share``), or None when ``target.checkpoint_every`` is given
        (then every interval is kept exactly)."""
        if self.target.checkpoint_every is not None:
            return None
        return self.target.checkpoint_max_share
