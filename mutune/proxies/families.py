"""The built-in model plugins ``mlp`` and ``gpt`` (entry-point group ``mutune.models``)."""
from __future__ import annotations

from torch import nn

from mutune.config import GPTModel, MLPModel
from mutune.proxies.family import ModelFamily
from mutune.proxies.gpt import MuGPT
from mutune.proxies.mlp import MuMLP

__all__ = ["MLP", "GPT"]


def _build_mlp(width: int, *, depth: int, d_in: int, n_classes: int,
               **hparams: float) -> nn.Module:
    """:class:`MuMLP` ``d_in → width (× depth) → n_classes`` (no base shapes yet)."""
    return MuMLP(d_in, width, n_classes, depth=depth, **hparams)


def _build_gpt(width: int, *, depth: int, vocab: int, seq_len: int, d_head: int,
               ffn_ratio: int, positions: str, tied: bool, sp_style: bool = False,
               readout_zero_init: bool = False, **hparams: float) -> nn.Module:
    """:class:`MuGPT` of d_model ``width`` (no base shapes yet)."""
    return MuGPT(width, vocab=vocab, seq_len=seq_len, depth=depth, d_head=d_head,
                 ffn_ratio=ffn_ratio, positions=positions, tied=tied, sp_style=sp_style,
                 readout_zero_init=readout_zero_init, **hparams)


#: μP MLP classifier on scikit-learn's digits.
MLP = ModelFamily(name="mlp", spec=MLPModel, build=_build_mlp, data_kinds=("digits",),
                  hparams=("input_mult", "output_mult", "init_std", "dropout"))

#: μP byte/token-level GPT decoder; a batch row is ``seq_len`` tokens.
GPT = ModelFamily(name="gpt", spec=GPTModel, build=_build_gpt, data_kinds=("text", "tokens"),
                  hparams=("input_mult", "output_mult", "attn_mult", "init_std"))
