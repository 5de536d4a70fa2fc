"""A proxy task: how to build, feed and evaluate one model family from a sweep config.

This is the one place that maps the config's model and data sections onto
:mod:`mutune.proxies.mlp`, :mod:`mutune.proxies.gpt` and :mod:`mutune.proxies.data`, so the
trainer (:mod:`mutune.search.trainable`) stays family-agnostic.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

import numpy as np
import torch
import torch.nn.functional as F

from mutune.config import GPTModel, MLPModel, SweepConfig, TrainConfig
from mutune.errors import ProxyError
from mutune.proxies.data import (ClassificationData, TextData, classification_batch,
                                 lm_batch, lm_eval_windows, load_digits_data, load_text_data)
from mutune.proxies.gpt import build_gpt
from mutune.proxies.mlp import build_mlp
from mutune.proxies.parametrization import make_optimizer
from mutune.proxies.tokens import TokenData, load_token_data

__all__ = ["ProxyTask", "load_task_data", "TaskData"]

TaskData = Union[ClassificationData, TextData, TokenData]
_LM_DATA = (TextData, TokenData)

_MODEL_HPARAMS = ("input_mult", "output_mult", "attn_mult", "init_std")


def load_task_data(config: SweepConfig) -> TaskData:
    """Load the config's dataset once (in the driver; trials receive it through Ray)."""
    if config.data.kind == "digits":
        return load_digits_data(val_fraction=config.data.val_fraction, seed=config.seed)
    if config.data.kind == "tokens":
        return load_token_data(config.data.path, vocab=config.model.vocab)
    return load_text_data(config.data.path)


@dataclass(frozen=True)
class ProxyTask:
    """Build / batch / loss / evaluate for one model family.

    Attributes:
        model: the config's model section (MLP or GPT).
        train: the config's training section.
        data: the loaded dataset.
    """
    model: Union[MLPModel, GPTModel]
    train: TrainConfig
    data: TaskData
    base_shapes: str | None = None

    def with_base_shapes(self) -> "ProxyTask":
        """This task with its μP base shapes computed once (mup .bsh text), so every model
        built from it — proxies, target, a rerun — shares one base. SP tasks are returned
        unchanged."""
        if self.model.parametrization != "mup" or self.base_shapes is not None:
            return self
        from mutune.proxies.parametrization import base_shapes_text
        return dataclasses.replace(self, base_shapes=base_shapes_text(
            lambda w: self._build_raw(w, {}), self.model.base_width))

    def _build_raw(self, width: int, hparams: Mapping[str, float]) -> torch.nn.Module:
        """The bare module (no base shapes) at ``width``: for making base shapes."""
        from mutune.proxies.gpt import MuGPT
        from mutune.proxies.mlp import MuMLP
        kw = {k: float(v) for k, v in hparams.items() if k in _MODEL_HPARAMS}
        m = self.model
        if isinstance(m, MLPModel):
            kw.pop("attn_mult", None)
            return MuMLP(self.data.d_in, width, self.data.n_classes, depth=m.depth, **kw)
        return MuGPT(width, vocab=m.vocab, seq_len=m.seq_len, depth=m.depth, d_head=m.d_head,
                     ffn_ratio=m.ffn_ratio, positions=m.positions, tied=m.tied, **kw)

    def build(self, width: int, hparams: Mapping[str, float]) -> torch.nn.Module:
        """The model at ``width`` with base shapes set (μP or SP per the config), from the
        task's saved base shapes when it has them.

        Raises:
            ProxyError: the family does not match the data, or a μP guard fails.
        """
        kw = {k: float(v) for k, v in hparams.items() if k in _MODEL_HPARAMS}
        kw["base_shapes"] = self.base_shapes
        m = self.model
        if isinstance(m, MLPModel):
            if not isinstance(self.data, ClassificationData):
                raise ProxyError("an mlp model needs classification data (digits)")
            kw.pop("attn_mult", None)
            return build_mlp(width, d_in=self.data.d_in, n_classes=self.data.n_classes,
                             depth=m.depth, base_width=m.base_width,
                             parametrization=m.parametrization, **kw)
        if not isinstance(self.data, _LM_DATA):
            raise ProxyError("a gpt model needs text or token data")
        return build_gpt(width, vocab=m.vocab, seq_len=m.seq_len, depth=m.depth,
                         d_head=m.d_head, ffn_ratio=m.ffn_ratio, base_width=m.base_width,
                         parametrization=m.parametrization, positions=m.positions,
                         tied=m.tied, **kw)

    def optimizer(self, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
        """The μP optimizer (MuAdamW by default) at learning rate ``lr`` (per step)."""
        t = self.train
        return make_optimizer(model, lr=lr, weight_decay=t.weight_decay,
                              betas=(t.beta1, t.beta2), kind=t.optimizer)

    @property
    def samples_per_step(self) -> int:
        """Samples (MLP) or tokens (GPT) consumed by one training step."""
        b = self.train.batch_size
        return b * self.model.seq_len if isinstance(self.model, GPTModel) else b

    def batch(self, seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training batch number ``step`` for ``seed`` (a pure function of both)."""
        if isinstance(self.data, ClassificationData):
            x, y = classification_batch(self.data, self.train.batch_size, seed, step)
        else:
            x, y = lm_batch(self.data.train, self.train.batch_size, self.model.seq_len,
                            seed, step)
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(
            np.ascontiguousarray(y))

    @staticmethod
    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy in nats; logits (B, C) or (B, T, C), targets (B,) or (B, T)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def val_loss(self, model: torch.nn.Module) -> float:
        """Validation cross-entropy in nats (whole digits validation split, or
        ``train.eval_windows`` fixed windows of the text validation split)."""
        was_training = model.training
        model.eval()
        with torch.no_grad():
            if isinstance(self.data, ClassificationData):
                x = torch.from_numpy(self.data.val_x)
                y = torch.from_numpy(self.data.val_y)
                out = float(self.loss(model(x), y))
            else:
                x, y = lm_eval_windows(self.data.val, self.model.seq_len,
                                       self.train.eval_windows)
                total, bs = 0.0, max(self.train.batch_size, 1)
                for i in range(0, len(x), bs):
                    xb = torch.from_numpy(np.ascontiguousarray(x[i:i + bs]))
                    yb = torch.from_numpy(np.ascontiguousarray(y[i:i + bs]))
                    total += float(self.loss(model(xb), yb)) * len(xb)
                out = total / len(x)
        model.train(was_training)
        return out
