"""A proxy task: how to build, feed and evaluate one model family from a sweep config."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch
import torch.nn.functional as F

from mutune.config import ModelSpec, SweepConfig, TrainConfig
from mutune.proxies.family import ModelFamily
from mutune.proxies.plugins import load_family, load_loop
from mutune.proxies.device import model_device
from mutune.proxies.data import (ClassificationData, TextData, classification_batch,
                                 lm_batch, lm_eval_windows, load_digits_data, load_text_data)
from mutune.errors import ProxyError
from mutune.proxies.parametrization import build_parametrized, count_parameters, make_optimizer
from mutune.proxies.tokens import TokenData, load_token_data

__all__ = ["ProxyTask", "load_task_data", "TaskData", "loss_summary"]

TaskData = Union[ClassificationData, TextData, TokenData]


def load_task_data(config: SweepConfig) -> TaskData:
    """Load the config's dataset once (in the driver; trials receive it through Ray)."""
    if config.data.kind == "digits":
        d = config.data
        return load_digits_data(val_fraction=d.val_fraction, seed=d.split_seed,
                                test_fraction=d.test_fraction)
    if config.data.kind == "tokens":
        return load_token_data(config.data.path, vocab=config.model.vocab,
                               dtype=config.data.dtype)
    return load_text_data(config.data.path)


def _tensor(a: Any, device: torch.device | None = None) -> torch.Tensor:
    if not isinstance(a, torch.Tensor):
        a = np.ascontiguousarray(a)
        a = torch.from_numpy(a if a.flags.writeable else a.copy())
    return a if device is None else a.to(device, non_blocking=True)


def _one(loss: Any, device: torch.device) -> torch.Tensor:
    """A family's scalar loss (tensor or float) as a one-element float64 tensor on ``device``."""
    return torch.as_tensor(loss, dtype=torch.float64, device=device).detach().reshape(1)


@dataclass(frozen=True)
class ProxyTask:
    """Build / batch / loss / evaluate for one model family."""
    model: ModelSpec
    train: TrainConfig
    data: TaskData
    base_shapes: str | None = None
    family: ModelFamily | None = None
    loop: Callable[..., Any] | None = None
    #: model hyperparameters → the constant-std weights (:meth:`constant_init_weights`);
    #: travels with the task to Ray workers, dropped by ``dataclasses.replace``
    _init_rules: dict = dataclasses.field(default_factory=dict, init=False, repr=False,
                                          compare=False)

    def __post_init__(self) -> None:
        if self.family is None:
            object.__setattr__(self, "family", load_family(self.model.family))
        if self.loop is None and self.train.loop is not None:
            object.__setattr__(self, "loop", load_loop(self.train.loop))

    def with_base_shapes(self) -> "ProxyTask":
        """This task with its μP base shapes computed once (SP tasks unchanged)."""
        if self.model.parametrization != "mup" or self.base_shapes is not None:
            return self
        from mutune.proxies.parametrization import base_shapes_text
        done = dataclasses.replace(self, base_shapes=base_shapes_text(
            self.factory({}), self.model.base_width))
        done._init_rules.update(self._init_rules)       # the same model: the same decision
        return done

    def constant_init_weights(self, hparams: Mapping[str, float] | None = None
                              ) -> tuple[str, ...]:
        """The plain model's constant-std hidden weights, which every build rescales with fan-in.

        Raises:
            ProxyError: as :func:`~mutune.proxies.convert.constant_std_weights`."""
        return self._constant_init(self._build_kwargs(hparams or {})[0])

    def _build_kwargs(self, hparams: Mapping[str, float]
                      ) -> tuple[dict[str, float], float | None, float | None]:
        """(build kwargs, output_mult, attn_mult); the multipliers None where unconverted."""
        fam = self.family
        kw = {k: float(v) for k, v in hparams.items() if k in fam.hparams}
        out_mult = kw.pop("output_mult", 1.0) if fam.readout is not None else None
        attn_mult = kw.pop("attn_mult", 1.0) if fam.attention_scale is not None else None
        return kw, out_mult, attn_mult

    def _constant_init(self, kw: dict[str, float]) -> tuple[str, ...]:
        from mutune.proxies.convert import constant_std_weights

        fam = self.family
        key = tuple(sorted(kw.items()))
        if key not in self._init_rules:
            if fam.readout is None and fam.attention_scale is None:
                self._init_rules[key] = ()
            else:
                options = {**self.model.build_options(), **self._data_shape()}
                width = int(self.model.base_width)
                # on the CPU, its generator alone seeded and restored: a GPU's RNG untouched
                with torch.random.fork_rng(devices=[]), torch.device("cpu"):
                    torch.random.default_generator.manual_seed(0)
                    base = fam.build(width, **options, **kw)
                    probe = fam.build(2 * width, **options, **kw)
                skip = (fam.readout + ".",) if fam.readout else ()
                self._init_rules[key] = tuple(constant_std_weights(probe, base, skip=skip))
        return self._init_rules[key]

    def for_point(self, hparams: Mapping[str, Any]) -> "ProxyTask":
        """This task with the ``train`` recipe fields
        (:data:`~mutune.config.spaces.RECIPE_HPARAMS`) a
        trial's point sets."""
        from mutune.config.spaces import RECIPE_HPARAMS, as_value

        update = {k: as_value(hparams[k]) for k in RECIPE_HPARAMS if k in hparams}
        if not update:
            return self
        done = dataclasses.replace(self, train=self.train.model_copy(update=update))
        done._init_rules.update(self._init_rules)       # the same model: the same decision
        return done

    def _data_shape(self) -> dict[str, int]:
        if isinstance(self.data, ClassificationData):
            return {"d_in": self.data.d_in, "n_classes": self.data.n_classes}
        return {}

    def factory(self, hparams: Mapping[str, float]) -> Callable[[int], torch.nn.Module]:
        """``width -> nn.Module`` without base shapes; a plain model is converted for μP."""
        from mutune.proxies.convert import (attention_head_dims, rescale_constant_std_init,
                                            set_attention_scale, swap_readout)

        fam = self.family
        kw, out_mult, attn_mult = self._build_kwargs(hparams)
        options = {**self.model.build_options(), **self._data_shape()}
        base_width = int(self.model.base_width)
        plain = fam.readout is not None or fam.attention_scale is not None
        bases: list[torch.nn.Module] = []     # the base-width model, built once per factory

        def factory(width: int) -> torch.nn.Module:
            model = fam.build(width, **options, **kw)
            if not (plain and isinstance(model, torch.nn.Module)):
                return model
            base = model
            if width != base_width:      # the same family at the base width, RNG untouched
                if not bases or any(p.is_meta for p in bases[0].parameters()):
                    with torch.random.fork_rng(devices=[]):
                        bases[:] = [fam.build(base_width, **options, **kw)]
                base = bases[0]
                if not any(p.is_meta for p in model.parameters()):
                    rescale_constant_std_init(
                        model, base, skip=((fam.readout + ".",) if fam.readout else ()),
                        names=self._constant_init(kw))
            if fam.readout is not None:
                swap_readout(model, fam.readout, output_mult=out_mult)
            if fam.attention_scale is not None:
                set_attention_scale(model, fam.attention_scale, attn_mult=attn_mult,
                                    base_head_dims=attention_head_dims(base,
                                                                       fam.attention_scale))
            return model
        return factory

    def build(self, width: int, hparams: Mapping[str, float]) -> torch.nn.Module:
        """The model at ``width`` with base shapes set (μP or SP per the config).

        Raises:
            ProxyError: the factory does not return a module, or a μP guard fails."""
        return build_parametrized(self.factory(hparams), width, self.model.base_width,
                                  self.model.parametrization, self.base_shapes)

    def n_params(self, width: int, hparams: Mapping[str, float]) -> int:
        """Parameter count of the model at ``width``, built on the meta device (no memory, no init).

        Raises:
            ProxyError: the family's factory cannot build on the meta device."""
        from mutune.proxies.meta_init import SkipInitOnMeta

        try:     # initializers are no-ops on meta tensors: skipped (no torch._dynamo import)
            with torch.device("meta"), SkipInitOnMeta():
                model = self.factory(hparams)(width)
        except (RuntimeError, NotImplementedError, TypeError) as exc:
            raise ProxyError(
                f"model family {self.model.family!r} cannot be built on the meta device at "
                f"width {width} ({type(exc).__name__}: {exc}); mutune counts parameters there "
                "so that the driver never materialises the target — create tensors without an "
                "explicit device in the factory") from exc
        if not isinstance(model, torch.nn.Module):
            raise ProxyError(f"model family {self.model.family!r}: factory returned "
                             f"{type(model).__name__}, not a torch.nn.Module")
        return count_parameters(model)

    def optimizer(self, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
        """The μP optimizer at ``lr`` (per step), with the depth parametrization's group factors."""
        t = self.train
        scaling = getattr(self.model, "depth_scaling", None)
        return make_optimizer(model, lr=lr, weight_decay=t.weight_decay,
                              betas=(t.beta1, t.beta2), eps=t.eps, kind=t.optimizer,
                              depth=scaling() if callable(scaling) else None)

    @property
    def samples_per_step(self) -> int:
        """Samples (classification) or tokens (``seq_len`` per row) consumed by one step."""
        return self.train.batch_size * int(getattr(self.model, "seq_len", 1) or 1)

    def batch(self, seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training batch ``step`` for ``seed`` (pure): the family's loader or mutune's."""
        if self.family.batch is not None:
            x, y = self.family.batch(self.data, self.train.batch_size, seed, step)
        elif isinstance(self.data, ClassificationData):
            x, y = classification_batch(self.data, self.train.batch_size, seed, step)
        else:
            x, y = lm_batch(self.data.train, self.train.batch_size, self.model.seq_len,
                            seed, step)
        return _tensor(x), _tensor(y)

    @staticmethod
    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy in nats; logits (B, C) or (B, T, C), targets (B,) or (B, T)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def step_loss(self, model: torch.nn.Module, x: torch.Tensor,
                  y: torch.Tensor) -> torch.Tensor:
        """One batch's scalar loss (nats): the family's ``forward_loss``, else cross-entropy."""
        if self.family.forward_loss is not None:
            return self.family.forward_loss(model, x, y)
        return self.loss(model(x), y)

    def val_loss(self, model: torch.nn.Module) -> float:
        """Validation cross-entropy in nats (:meth:`evaluate` on ``"val"``, its mean)."""
        return self.evaluate(model, "val")[0]

    def has_split(self, split: str) -> bool:
        """Whether the data hold ``split`` (``"val"`` always; ``"test"`` when loaded)."""
        if split == "val":
            return True
        if isinstance(self.data, ClassificationData):
            return self.data.test_y is not None and len(self.data.test_y) > 0
        test = getattr(self.data, "test", None)
        return test is not None and len(test) > self.model.seq_len

    def evaluate(self, model: torch.nn.Module, split: str = "val") -> tuple[float, float]:
        """Mean cross-entropy (nats) on ``split`` and its standard error.

        Raises:
            ProxyError: the data have no such split."""
        per = self._unit_losses(model, split, 0, 1)
        se = float(per.std() / math.sqrt(len(per))) if len(per) > 1 else math.nan
        return float(per.mean()), se

    @property
    def eval_splits_into_parts(self) -> bool:
        """Whether :meth:`eval_moments` can evaluate part of a split (not a family's loss)."""
        return self.family.forward_loss is None

    def eval_moments(self, model: torch.nn.Module, split: str = "val", *, rank: int = 0,
                     world: int = 1) -> tuple[float, float, float]:
        """(n, Σ loss, Σ loss²) in nats over units rank, rank + world, … of ``split``.

        Raises:
            ProxyError: no such split, a part that is not 0 ≤ rank < world, or a part of a
                family's own loss."""
        if not 0 <= rank < world:
            raise ProxyError(f"evaluation part {rank} of {world}: needs 0 ≤ rank < world")
        if world > 1 and not self.eval_splits_into_parts:
            raise ProxyError("a family's own loss (forward_loss) gives one value per batch: "
                             "its evaluation cannot be split among workers")
        per = self._unit_losses(model, split, rank, world)
        return float(len(per)), float(per.sum()), float((per * per).sum())

    def _unit_losses(self, model: torch.nn.Module, split: str, rank: int,
                     world: int) -> torch.Tensor:
        """Per-unit float64 losses (nats) of units rank, rank + world, … of ``split``."""
        if split not in ("val", "test") or not self.has_split(split):
            raise ProxyError(f"split {split!r}: the data hold no such split (val always; "
                             "test for digits, text, and token folders with test.bin)")
        was_training, dev = model.training, model_device(model)
        model.eval()
        with torch.no_grad():
            if isinstance(self.data, ClassificationData):
                xs = self.data.val_x if split == "val" else self.data.test_x
                ys = self.data.val_y if split == "val" else self.data.test_y
                x, y = _tensor(xs[rank::world], dev), _tensor(ys[rank::world], dev)
                if self.family.forward_loss is not None:
                    per = _one(self.step_loss(model, x, y), dev)
                else:
                    per = F.cross_entropy(model(x), y, reduction="none")
            else:
                tokens = self.data.val if split == "val" else self.data.test
                n = min(self.train.eval_windows, len(tokens) - self.model.seq_len)
                x, y = lm_eval_windows(tokens, self.model.seq_len, n)
                x, y = x[rank::world], y[rank::world]
                parts, bs = [], max(self.train.batch_size, 1)
                for i in range(0, len(x), bs):
                    xb, yb = _tensor(x[i:i + bs], dev), _tensor(y[i:i + bs], dev)
                    if self.family.forward_loss is not None:
                        # a family's own loss gives one value per batch: the units of the
                        # standard error are then the batches
                        parts.append(_one(self.step_loss(model, xb, yb), dev))
                    else:
                        logits = model(xb)
                        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             yb.reshape(-1), reduction="none")
                        parts.append(ce.reshape(len(xb), -1).mean(dim=1))
                per = torch.cat(parts)
        model.train(was_training)
        return per.double()


def loss_summary(n: float, total: float, squares: float) -> tuple[float, float]:
    """(mean, standard error) in nats from :meth:`ProxyTask.eval_moments` summed over the
    parts: mean = Σl / n, se = √((Σl² − n·mean²) / (n − 1)) / √n (NaN for n < 2)."""
    if n < 1:
        return math.nan, math.nan
    mean = total / n
    if n < 2:
        return mean, math.nan
    var = max(squares - n * mean * mean, 0.0) / (n - 1)
    return mean, math.sqrt(var / n)
