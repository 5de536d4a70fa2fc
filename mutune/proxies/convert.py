"""Converting a plain PyTorch model for μP: its output layer becomes a ``mup.MuReadout``.

A user's model built from ``nn.Linear`` layers is μP-ready once its readout divides its input
by the width multiplier and starts at zero (TP V Table 3); hidden layers need nothing under
``MuAdamW`` (mup scales their learning rate by parameter shape).

References:
    Yang et al. 2022, Tensor Programs V, Table 3 and Appendix B; mup 1.0.0 ``MuReadout``.
"""
from __future__ import annotations

import mup
from torch import nn

from mutune.errors import ProxyError

__all__ = ["swap_readout"]


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
