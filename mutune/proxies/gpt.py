"""μP byte-level GPT-style pre-LN decoder (the GPT proxy family); heads and FFN grow with width.

Yang et al. 2022, Tensor Programs V, Table 3 and Appendix D.2; Radford et al. 2019 (GPT-2);
mup 1.0.0 ``examples/Transformer``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mup
import torch
import torch.nn.functional as F
from torch import nn

from mutune.errors import ProxyError
from mutune.proxies.parametrization import (build_parametrized, check_count, check_positive,
                                            split_options)

__all__ = ["GPTShape", "MuGPT", "build_gpt"]


@dataclass(frozen=True)
class GPTShape:
    """A :class:`MuGPT`'s architecture apart from its width (d_model).

    ``vocab`` and ``seq_len`` in tokens; ``depth`` blocks; ``d_head`` fixed (heads grow with
    width); ``ffn_ratio`` the MLP's hidden size over d_model; ``positions`` "learned" or
    "rotary" (Su et al. 2021); ``tied`` readout shares the token embedding; ``sp_style`` SP's
    1/√d_head attention scale and init; ``readout_zero_init``; ``branch_mult`` multiplies each
    residual branch (depth scaling, :mod:`mutune.proxies.depth`)."""

    vocab: int = 256
    seq_len: int = 64
    depth: int = 2
    d_head: int = 16
    ffn_ratio: int = 4
    positions: str = "learned"
    tied: bool = False
    sp_style: bool = False
    readout_zero_init: bool = False
    branch_mult: float = 1.0


def _normal_(weight: torch.Tensor, std: float) -> None:
    """N(0, std²) on vector-like weights; ``mup.init.normal_`` (∝ 1/fan_in) on matrix-like."""
    if hasattr(weight, "infshape"):
        mup.init.normal_(weight, mean=0.0, std=std)
    else:
        nn.init.normal_(weight, mean=0.0, std=std)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (B, H, T, d_head), NeoX layout (Su et al. 2021, RoFormer, §3.4.2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _rotary_tables(t: int, d_head: int, device: torch.device) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    """cos and sin tables of shape (T, d_head/2) with base 10000 (RoFormer eq. 15)."""
    inv = 1.0 / (10000 ** (torch.arange(0, d_head, 2, device=device, dtype=torch.float32)
                           / d_head))
    ang = torch.outer(torch.arange(t, device=device, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


class _Block(nn.Module):
    """Pre-LN block: x + Attn(LN(x)), then x + MLP(LN(x)); shapes (B, T, width) → same."""

    def __init__(self, width: int, d_head: int, ffn_ratio: int, attn_scale: float,
                 rotary: bool = False, branch_mult: float = 1.0):
        super().__init__()
        self.n_heads, self.d_head, self.attn_scale = width // d_head, d_head, attn_scale
        self.rotary, self.branch_mult = rotary, branch_mult
        self.ln_1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, ffn_ratio * width)
        self.fc_out = nn.Linear(ffn_ratio * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, self.d_head).transpose(1, 2) for z in (q, k, v))
        if self.rotary:
            cos, sin = _rotary_tables(t, self.d_head, x.device)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        # μP: logits attn_mult·q·k / d_head (not / √d_head), TP V Appendix D.2; SP style:
        # attn_mult·q·k / √d_head (Vaswani et al. 2017).
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.attn_scale)
        # CompleteP / Depth-μP: each branch × (L/L₀)^-α (1 without a depth parametrization)
        x = x + self.branch_mult * self.proj(y.transpose(1, 2).reshape(b, t, w))
        return x + self.branch_mult * self.fc_out(F.gelu(self.fc(self.ln_2(x))))


def _check_shape(width: int, s: GPTShape) -> None:
    if s.positions not in ("learned", "rotary"):
        raise ProxyError(f"positions = {s.positions!r}: use 'learned' or 'rotary'")
    if s.positions == "rotary" and s.d_head % 2:
        raise ProxyError(f"rotary positions need an even d_head, got {s.d_head}")
    for name, value in (("width", width), ("vocab", s.vocab), ("seq_len", s.seq_len),
                        ("depth", s.depth), ("d_head", s.d_head), ("ffn_ratio", s.ffn_ratio)):
        check_count(name, value)
    if width % s.d_head != 0:
        raise ProxyError(f"width must be a multiple of d_head, got width={width}, "
                         f"d_head={s.d_head} (heads grow with width; d_head is fixed)")


class MuGPT(nn.Module):
    """Byte-level causal decoder: learned or rotary positions, untied or tied μP readout.

    ``forward(idx)``: LongTensor (B, T), T <= seq_len → logits (B, T, vocab) in nats.
    ``attn_mult`` None: 8 in μP style (8/d_head equals SP's 1/√d_head at d_head 64, TP V App. D.2),
    1 in SP style; ``init_std`` None keeps PyTorch's init (already 1/fan_in on hidden matrices);
    rotary positions: Su et al. 2021.

    Raises:
        ProxyError: width % d_head != 0, a count < 1, a multiplier not finite > 0, unknown
            positions, rotary with an odd d_head; in ``forward``: idx not (B, T) or T > seq_len."""

    def __init__(self, width: int, shape: GPTShape | None = None, *, input_mult: float = 1.0,
                 output_mult: float = 1.0, attn_mult: float | None = None,
                 init_std: float | None = None):
        super().__init__()
        s = shape or GPTShape()
        if attn_mult is None:
            attn_mult = 1.0 if s.sp_style else 8.0
        _check_shape(width, s)
        for name, value in (("input_mult", input_mult), ("output_mult", output_mult),
                            ("attn_mult", attn_mult), ("branch_mult", s.branch_mult)):
            check_positive(name, value)
        if init_std is not None:
            check_positive("init_std", init_std)
        self.width, self.vocab, self.seq_len = width, s.vocab, s.seq_len
        self.depth, self.d_head, self.n_heads = s.depth, s.d_head, width // s.d_head
        self.ffn_ratio, self.input_mult, self.output_mult = s.ffn_ratio, input_mult, output_mult
        self.attn_mult, self.init_std = attn_mult, init_std
        self.positions, self.tied, self.sp_style = s.positions, s.tied, s.sp_style
        self.readout_zero_init, self.branch_mult = s.readout_zero_init, s.branch_mult
        scale = attn_mult / (s.d_head ** 0.5 if s.sp_style else s.d_head)
        self.tok_emb = nn.Embedding(s.vocab, width)
        self.pos_emb = nn.Embedding(s.seq_len, width) if s.positions == "learned" else None
        self.blocks = nn.ModuleList(_Block(width, s.d_head, s.ffn_ratio, scale,
                                           rotary=s.positions == "rotary",
                                           branch_mult=s.branch_mult)
                                    for _ in range(s.depth))
        self.ln_f = nn.LayerNorm(width)
        self.readout = (mup.MuSharedReadout(self.tok_emb.weight, bias=False,
                                            output_mult=output_mult) if s.tied else
                        mup.MuReadout(width, s.vocab, bias=True, output_mult=output_mult))
        self.reset_parameters()

    @classmethod
    def from_options(cls, width: int, **options: Any) -> MuGPT:
        """A MuGPT from flat keyword options: :class:`GPTShape`'s fields and the multipliers.

        Raises:
            ProxyError: as the constructor; TypeError: an option neither names."""
        shape, mults = split_options(GPTShape, options)
        return cls(width, shape, **mults)

    def reset_parameters(self) -> None:
        """PyTorch's init when ``init_std`` is None; else N(0, init_std²) with μP fan-in scaling."""
        layers = [m for b in self.blocks for m in (b.qkv, b.proj, b.fc, b.fc_out)]
        if self.init_std is None:
            for m in (self.tok_emb, self.pos_emb, *layers):
                if m is not None:
                    m.reset_parameters()
            if not self.tied:
                self.readout.reset_parameters()
        else:
            _normal_(self.tok_emb.weight, self.init_std)
            if self.pos_emb is not None:
                _normal_(self.pos_emb.weight, self.init_std)
            for layer in layers:
                _normal_(layer.weight, self.init_std)
                nn.init.zeros_(layer.bias)
        for block in self.blocks:
            if not self.sp_style:
                with torch.no_grad():
                    block.qkv.weight[: self.width].zero_()
            for ln in (block.ln_1, block.ln_2):
                nn.init.ones_(ln.weight)
                nn.init.zeros_(ln.bias)
        nn.init.ones_(self.ln_f.weight)
        nn.init.zeros_(self.ln_f.bias)
        if self.readout.bias is not None:
            nn.init.zeros_(self.readout.bias)
        if not self.tied:                        # a tied readout keeps the embedding's init
            if self.readout_zero_init:
                nn.init.zeros_(self.readout.weight)
            elif self.init_std is not None:     # constant stored std: effective ∝ 1/fan_in
                nn.init.normal_(self.readout.weight, mean=0.0, std=self.init_std)
            elif hasattr(self.readout.weight, "infshape"):
                # PyTorch's U(±1/√fan_in) times √width_mult: what mup's
                # MuReadout._rescale_parameters does in set_base_shapes
                with torch.no_grad():
                    self.readout.weight.mul_(self.readout.width_mult() ** 0.5)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) for token ids idx (B, T), T <= seq_len."""
        if idx.dim() != 2:
            raise ProxyError(f"MuGPT expects token ids of shape (B, T), got {tuple(idx.shape)}")
        t = idx.shape[1]
        if t > self.seq_len or t < 1:
            raise ProxyError(f"sequence length T={t} must be in [1, seq_len={self.seq_len}]")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(t, device=idx.device))
        x = x * self.input_mult
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln_f(x))

    def depth_groups(self) -> dict[str, str]:
        """Parameter name → layer group (:mod:`mutune.proxies.depth`)."""
        out = {}
        for name, p in self.named_parameters():
            if name.startswith(("tok_emb.", "pos_emb.")):
                out[name] = "embedding"
            elif name.startswith("blocks."):
                out[name] = "hidden_weight" if p.dim() == 2 else "hidden_vector"
            else:
                out[name] = "output"
        return out


def build_gpt(width: int, *, base_width: int, parametrization: str,
              base_shapes: str | None = None, sp_style: bool | None = None,
              **model: Any) -> nn.Module:
    """A :class:`MuGPT` of d_model ``width`` in μP (base ``base_width``) or SP.

    ``sp_style`` None follows ``parametrization``; False for SP gives the exact SP twin.

    Raises:
        ProxyError: as :class:`MuGPT` and :func:`build_parametrized`."""
    def factory(w: int) -> nn.Module:
        return MuGPT.from_options(
            w, sp_style=(parametrization == "sp") if sp_style is None else sp_style, **model)

    return build_parametrized(factory, width, base_width, parametrization, base_shapes)
