"""The built-in model plugins ``mlp`` and ``gpt`` (entry-point group ``mutune.models``)."""
from __future__ import annotations

from typing import Any

from torch import nn

from mutune.config import GPTModel, MLPModel
from mutune.proxies.family import ModelFamily
from mutune.proxies.gpt import MuGPT
from mutune.proxies.mlp import MuMLP

__all__ = ["MLP", "GPT"]


def _build_mlp(width: int, *, d_in: int, n_classes: int, **options: Any) -> nn.Module:
    """:class:`MuMLP` ``d_in → width (× depth) → n_classes`` (no base shapes yet)."""
    return MuMLP.from_options(d_in, width, n_classes, **options)


def _build_gpt(width: int, **options: Any) -> nn.Module:
    """:class:`MuGPT` of d_model ``width`` (no base shapes yet)."""
    return MuGPT.from_options(width, **options)


#: μP MLP classifier on scikit-learn's digits.
MLP = ModelFamily(name="mlp", spec=MLPModel, build=_build_mlp, data_kinds=("digits",),
                  hparams=("input_mult", "output_mult", "init_std", "dropout"))

#: μP byte/token-level GPT decoder; a batch row is ``seq_len`` tokens. Its LayerNorm gains
#: are trainable, as in the reference it is checked against, and its transfer is measured
#: with them (docs/transfer.md §7).
GPT = ModelFamily(name="gpt", spec=GPTModel, build=_build_gpt, data_kinds=("text", "tokens"),
                  hparams=("input_mult", "output_mult", "attn_mult", "init_std"),
                  norm_gains_checked=True)
