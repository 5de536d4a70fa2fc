"""Converting a plain PyTorch model for μP: its output layer becomes a ``mup.MuReadout`` and
its attention logits are scaled by attn_mult/d_head.

A user's model built from ``nn.Linear`` layers is μP-ready once its readout divides its input
by the width multiplier and starts at zero, and its attention scales logits by 1/d_head instead
of 1/√d_head (TP V Table 3, §4); hidden layers need nothing under ``MuAdamW`` (mup scales their
learning rate by parameter shape).

References:
    Yang et al. 2022, Tensor Programs V, Table 3 and Appendix B; mup 1.0.0 ``MuReadout``.
"""
from __future__ import annotations

import mup
from torch import nn

from mutune.errors import ProxyError

__all__ = ["swap_readout", "set_attention_scale"]


def swap_readout(model: nn.Module, path: str, *, output_mult: float = 1.0) -> nn.Module:
    """Replace the ``nn.Linear`` at attribute path ``path`` (e.g. ``"head"`` or
    ``"classifier.2"``) by a zero-initialised ``mup.MuReadout`` of the same shape
    (in_features → out_features, bias kept if present) and ``output_mult``; in place.

    Returns:
        ``model``.
    Raises:
        ProxyError: no module at ``path``, or it is not an ``nn.Linear`` (a ``MuReadout``
            already is one: then nothing is swapped twice — it is refused).
    """
    *parents, leaf = path.split(".")
    owner = model
    try:
        for part in parents:
            owner = owner.get_submodule(part) if not part.isdigit() else owner[int(part)]
        old = owner[int(leaf)] if leaf.isdigit() else getattr(owner, leaf)
    except (AttributeError, IndexError, TypeError) as exc:
        raise ProxyError(f"{type(model).__name__} has no module at {path!r} to turn into a "
                         f"MuReadout: {exc}") from exc
    if isinstance(old, mup.MuReadout) or not isinstance(old, nn.Linear):
        raise ProxyError(f"{type(model).__name__}.{path} is a {type(old).__name__}, not a "
                         "plain nn.Linear: declare readout=None when the model already "
                         "uses mup.MuReadout")
    new = mup.MuReadout(old.in_features, old.out_features, bias=old.bias is not None,
                        output_mult=output_mult, readout_zero_init=True)
    if leaf.isdigit():
        owner[int(leaf)] = new
    else:
        setattr(owner, leaf, new)
    return model


def set_attention_scale(model: nn.Module, attr: str, *, attn_mult: float = 1.0,
                        head_dim_attr: str = "head_dim") -> int:
    """Give every attention module of ``model`` the μP logit scale: on each submodule that has
    both ``attr`` (the scale its forward multiplies q·k by, e.g. passed to
    ``F.scaled_dot_product_attention(..., scale=self.scale)``) and ``head_dim_attr`` (d_head),
    set ``attr = attn_mult / d_head``.

    Returns:
        How many modules were set.
    Raises:
        ProxyError: no submodule has both attributes, or a d_head that is not a positive int.
    References:
        Yang et al. 2022, Tensor Programs V, §4 and Table 3 (attention logit 1/d scaling).
    """
    count = 0
    for name, module in model.named_modules():
        if hasattr(module, attr) and hasattr(module, head_dim_attr):
            d = getattr(module, head_dim_attr)
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ProxyError(f"{name or type(model).__name__}.{head_dim_attr} = {d!r}: "
                                 "must be a positive int (the head dimension)")
            setattr(module, attr, attn_mult / d)
            count += 1
    if count == 0:
        raise ProxyError(f"{type(model).__name__} has no module with both {attr!r} and "
                         f"{head_dim_attr!r}: nothing to give the μP attention scale")
    return count
