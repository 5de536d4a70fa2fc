"""Converting a plain PyTorch model for μP: a ``MuReadout``, 1/d_head attention, fan-in init.

Yang et al. 2022, Tensor Programs V, Table 3, §4 and Appendix B; mup 1.0.0 ``MuReadout``."""
from __future__ import annotations

from collections.abc import Sequence

import mup
from torch import nn

from mutune.errors import ProxyError

__all__ = ["swap_readout", "set_attention_scale", "rescale_constant_std_init",
           "constant_std_weights", "attention_head_dims"]


def swap_readout(model: nn.Module, path: str, *, output_mult: float = 1.0) -> nn.Module:
    """Replace the ``nn.Linear`` at attribute path ``path`` by a zero-initialised ``mup.MuReadout``.

    Raises:
        ProxyError: no module at ``path``, or it is not an ``nn.Linear`` (nor already a readout)."""
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
    tied = next((m for m in model.modules()
                 if isinstance(m, nn.Embedding) and m.weight is old.weight), None)
    if tied is not None:      # an lm_head tied to the embedding stays tied (its init is the
        new = mup.MuSharedReadout(tied.weight, bias=old.bias is not None,   # embedding's)
                                  output_mult=output_mult)
        if new.bias is not None:
            nn.init.zeros_(new.bias)
    else:
        new = mup.MuReadout(old.in_features, old.out_features, bias=old.bias is not None,
                            output_mult=output_mult, readout_zero_init=True)
    if leaf.isdigit():
        owner[int(leaf)] = new
    else:
        setattr(owner, leaf, new)
    return model


def attention_head_dims(model: nn.Module, attr: str,
                        head_dim_attr: str = "head_dim") -> dict[str, int]:
    """{module name: d_head} of every submodule holding both ``attr`` and ``head_dim_attr``."""
    return {name: getattr(m, head_dim_attr) for name, m in model.named_modules()
            if hasattr(m, attr) and hasattr(m, head_dim_attr)}


def set_attention_scale(model: nn.Module, attr: str, *, attn_mult: float = 1.0,
                        head_dim_attr: str = "head_dim",
                        base_head_dims: dict[str, int] | None = None) -> int:
    """Set ``attr = attn_mult · √d_base / d_head`` (or ``attn_mult / d_head``) on attention modules.

    TP V §4 and Table 3. Given ``base_head_dims``, the base width keeps the model's own 1/√d_head.

    Returns:
        How many modules were set.
    Raises:
        ProxyError: no submodule has both attributes, or a d_head that is not a positive int."""
    count = 0
    for name, module in model.named_modules():
        if hasattr(module, attr) and hasattr(module, head_dim_attr):
            d = getattr(module, head_dim_attr)
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ProxyError(f"{name or type(model).__name__}.{head_dim_attr} = {d!r}: "
                                 "must be a positive int (the head dimension)")
            base = (base_head_dims or {}).get(name)
            setattr(module, attr, attn_mult * (base ** 0.5 if base else 1.0) / d)
            count += 1
    if count == 0:
        raise ProxyError(f"{type(model).__name__} has no module with both {attr!r} and "
                         f"{head_dim_attr!r}: nothing to give the μP attention scale")
    return count


#: a hidden weight's std at width w over its std at the base width: a constant-std init keeps
#: 1, a 1/√fan_in one falls to √(base fan-in / fan-in). Each sample std of n elements has a
#: log standard error ≈ 1/√(2n); a weight takes the nearer rule, and one further than this
#: many standard errors from both is refused (two-sided 5.7e-7 per weight for a fresh draw)
_MIN_ELEMENTS = 64
_Z = 5.0


def _hidden_pairs(model: nn.Module, base: nn.Module, skip: tuple[str, ...]):
    """(name, weight, base weight) for every hidden weight whose fan-in grew from ``base``."""
    base_params = dict(base.named_parameters())
    # an embedding's (vocab, width) weight has the vocabulary as its fan-in, whatever its
    # shape says (mup: vector-like), so it keeps its std — as does a readout tied to it
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    for name, p in model.named_parameters():
        b = base_params.get(name)
        if (b is None or p.dim() < 2 or id(p) in embeddings
                or any(name.startswith(k) for k in skip)
                or p.shape[1:] == b.shape[1:] or p.numel() < _MIN_ELEMENTS
                or b.numel() < _MIN_ELEMENTS):
            continue
        yield name, p, b


def constant_std_weights(model: nn.Module, base: nn.Module, *,
                         skip: tuple[str, ...] = ()) -> list[str]:
    """The hidden weights whose init kept the base width's std (GPT-2's ``normal(0, 0.02)``).

    Raises:
        ProxyError: a hidden weight whose std ratio is more than five standard errors of the
            sample stds from both rules: names it, with both ratios, and the fix (initialise
            it with PyTorch's default or ``mup.init``, or a constant std)."""
    import math

    import torch

    names = []
    for name, p, b in _hidden_pairs(model, base, skip):
        with torch.no_grad():
            s, s_base = float(p.float().std()), float(b.float().std())
        if s_base == 0.0 or s == 0.0:          # zero init: nothing to rescale
            continue
        ratio = s / s_base
        mup_ratio = math.sqrt(math.prod(b.shape[1:]) / math.prod(p.shape[1:]))
        band = _Z * math.sqrt(1 / (2 * p.numel()) + 1 / (2 * b.numel()))
        off_mup, off_constant = abs(math.log(ratio / mup_ratio)), abs(math.log(ratio))
        if min(off_mup, off_constant) > band:
            raise ProxyError(
                f"{type(model).__name__}.{name}: its init std is {ratio:.3g}× the base width's "
                f"where a constant init gives 1 and μP's 1/√fan_in gives {mup_ratio:.3g}; "
                "initialise it with PyTorch's default (or mup.init), or with a constant std "
                "that mutune rescales")
        if off_constant < off_mup:
            names.append(name)
    return names


def rescale_constant_std_init(model: nn.Module, base: nn.Module, *,
                              skip: tuple[str, ...] = (),
                              names: Sequence[str] | None = None) -> list[str]:
    """In place, weight ×= √(fan_in_base / fan_in) on constant-std hidden weights (TP V Table 3).

    Raises:
        ProxyError: with ``names`` None, as :func:`constant_std_weights`."""
    import math

    import torch

    chosen = set(constant_std_weights(model, base, skip=skip) if names is None else names)
    done = []
    for name, p, b in _hidden_pairs(model, base, skip):
        if name in chosen:
            with torch.no_grad():
                p.mul_(math.sqrt(math.prod(b.shape[1:]) / math.prod(p.shape[1:])))
            done.append(name)
    return done
