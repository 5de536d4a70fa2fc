"""μP / SP parametrization of proxy models, and their optimizers.

Order: build → ``mup.set_base_shapes`` once → ``reset_parameters`` → optimizer. Yang et al. 2022,
Tensor Programs V, Table 3 and Appendix B; mup 1.0.0 (``set_base_shapes``, ``mup.optim``)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, TypeVar

import mup
import torch
from torch import nn

from mutune.errors import ProxyError

__all__ = ["PARAMETRIZATIONS", "OPTIMIZERS", "build_parametrized", "make_optimizer",
           "fused_adam_ok", "check_positive", "check_count",
           "count_parameters", "base_shapes_text", "split_options"]

_Record = TypeVar("_Record")

PARAMETRIZATIONS = ("mup", "sp")
OPTIMIZERS = ("adamw", "adam", "sgd")


def check_positive(name: str, value: float) -> None:
    """Raise ProxyError unless ``value`` is a finite number > 0 (names ``name``)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ProxyError(f"{name} must be a finite number > 0, got {value!r}")


def split_options(record: type[_Record],
                  options: Mapping[str, Any]) -> tuple[_Record, dict[str, Any]]:
    """``record`` built from the options that name its fields, and the other options."""
    names = {f.name for f in dataclasses.fields(record)}  # type: ignore[arg-type]
    return (record(**{k: v for k, v in options.items() if k in names}),
            {k: v for k, v in options.items() if k not in names})


def check_count(name: str, value: int, minimum: int = 1) -> None:
    """Raise ProxyError unless ``value`` is an int ≥ ``minimum`` (names ``name``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProxyError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_widths(width: int, base_width: int) -> None:
    for name, value in (("width", width), ("base_width", base_width)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProxyError(f"{name} must be an int, got {value!r}")
    if base_width < 1:
        raise ProxyError(f"base_width must be >= 1, got {base_width}")
    if width < base_width:
        raise ProxyError(f"width must be >= base_width, got width={width} < base_width={base_width}"
                         "; choose a base width no larger than the smallest proxy")


def _build(factory: Callable[[int], nn.Module], width: int) -> nn.Module:
    model = factory(width)
    if not isinstance(model, nn.Module):
        raise ProxyError(f"factory({width}) returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _undo_shared_readout_rescale(model: nn.Module) -> None:
    """Undo ``set_base_shapes``' √width_mult on a MuSharedReadout's (embedding's) weight: mup#55."""
    seen: set[int] = set()
    for module in model.modules():
        if isinstance(module, mup.MuSharedReadout) and id(module.weight) not in seen:
            seen.add(id(module.weight))
            with torch.no_grad():
                module.weight.div_(math.sqrt(module.width_mult()))


def base_shapes_text(factory: Callable[[int], nn.Module], base_width: int) -> str:
    """mup's ``.bsh`` base-shapes text for ``factory(base_width)`` against
    ``factory(2·base_width)``.

    Raises:
        ProxyError: base_width < 1 or the factory does not return a module."""
    import yaml

    if isinstance(base_width, bool) or not isinstance(base_width, int) or base_width < 1:
        raise ProxyError(f"base_width must be an int >= 1, got {base_width!r}")
    with torch.random.fork_rng(devices=[]):
        bsh = mup.make_base_shapes(_build(factory, base_width), _build(factory, 2 * base_width))
    shapes = {name: list(s.base_shape()) for name, s in bsh.items()}
    return "# mup base shapes (mutune)\n" + yaml.safe_dump(shapes, indent=4)


def _load_base_shapes(text: str) -> dict:
    import yaml

    from mup.infshape import InfShape

    try:
        data = yaml.safe_load(text)
        return {k: InfShape.from_base_shape(v) for k, v in data.items()}
    except (yaml.YAMLError, AttributeError, TypeError) as exc:
        raise ProxyError(f"base shapes are not a mup .bsh mapping: {exc}") from exc


def build_parametrized(factory: Callable[[int], nn.Module], width: int, base_width: int,
                       parametrization: str, base_shapes: str | None = None) -> nn.Module:
    """Build ``factory(width)`` in μP (relative to ``base_width``) or in standard parametrization.

    Base and delta models are built under a forked torch RNG, so μP and its SP twin consume the
    global RNG alike; at ``width == base_width`` they are the same function under the same seed.

    Raises:
        ProxyError: unknown parametrization; ``base_width < 1`` or ``width < base_width``; under
            μP a model without a ``MuReadout``, or one whose width multipliers are all 1 at
            ``width > base_width``; mup's own shape checks."""
    if parametrization not in PARAMETRIZATIONS:
        raise ProxyError(f"unknown parametrization {parametrization!r}; "
                         f"use one of {PARAMETRIZATIONS}")
    _check_widths(width, base_width)
    model = _build(factory, width)
    has_readout = any(isinstance(m, mup.MuReadout) for m in model.modules())
    if parametrization == "mup" and not has_readout:
        raise ProxyError(f"{type(model).__name__} has no mup.MuReadout: the readout is a plain "
                         "Linear; use mup.MuReadout (or mup.MuSharedReadout for tied embeddings) "
                         "as the output layer, or parametrization='sp'")
    try:
        if parametrization == "mup" and base_shapes is not None:
            mup.set_base_shapes(model, _load_base_shapes(base_shapes))
        elif parametrization == "mup":
            with torch.random.fork_rng(devices=[]):
                base = _build(factory, base_width)
                delta = _build(factory, 2 * base_width)
            mup.set_base_shapes(model, base, delta=delta)
        else:
            mup.set_base_shapes(model, None)
    except AssertionError as exc:
        raise ProxyError(f"mup.set_base_shapes rejected {type(model).__name__}: {exc}") from exc
    except RuntimeError as exc:
        raise ProxyError(f"mup.set_base_shapes failed on {type(model).__name__} (base shapes set "
                         f"twice? build a fresh model, or pass rescale_params=False for a "
                         f"checkpoint): {exc}") from exc
    if parametrization == "mup" and width > base_width:
        if all(p.infshape.width_mult() == 1 for p in model.parameters()):
            raise ProxyError(
                f"μP was declared but nothing scales: width={width} > base_width={base_width} yet "
                f"every width multiplier of {type(model).__name__} is 1 (factory(width) builds the "
                "same shapes for every width); make the factory use its width argument, or "
                "declare parametrization='sp'")
    _undo_shared_readout_rescale(model)
    reset = getattr(model, "reset_parameters", None)
    if callable(reset):
        reset()
    return model


def make_optimizer(model: nn.Module, *, lr: float, weight_decay: float = 0.0,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                   kind: str = "adamw", depth: Any = None) -> torch.optim.Optimizer:
    """μP optimizer (``MuAdamW``, ``MuAdam`` or ``MuSGD``) for a :func:`build_parametrized` model.

    mup splits parameters into per-width groups, so a schedule must scale each group's lr relative
    to its initial value. Yang et al. 2022, Tensor Programs V, Table 3; Loshchilov & Hutter 2019
    (decoupled weight decay); depth factors: Dey et al. 2025, Table 1.

    Raises:
        ProxyError: unknown kind; bad lr / weight_decay / betas / eps; ``"adam"`` with weight
            decay; a parameter without ``infshape``; a depth scaling with SGD or on a model
            without ``depth_groups``."""
    if kind not in OPTIMIZERS:
        raise ProxyError(f"unknown optimizer kind {kind!r}; use one of {OPTIMIZERS}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ProxyError(f"lr must be a finite number > 0, got {lr!r}")
    if not (isinstance(weight_decay, (int, float)) and math.isfinite(weight_decay)
            and weight_decay >= 0):
        raise ProxyError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ProxyError(f"eps must be a finite number > 0, got {eps!r}")
    if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
        raise ProxyError(f"betas must be two numbers in [0, 1), got {betas!r}")
    if kind == "adam" and weight_decay != 0:
        raise ProxyError(
            f"kind='adam' with weight_decay={weight_decay}: use adamw. Adam + L2 is not decoupled "
            "weight decay, and mup scales it with width (Tensor Programs V, Table 3 / §B; "
            "Loshchilov & Hutter 2019)")
    params = list(model.parameters())
    if not params:
        raise ProxyError(f"{type(model).__name__} has no parameters to optimize")
    missing = [tuple(p.shape) for p in params if not hasattr(p, "infshape")]
    if missing:
        raise ProxyError(f"parameters with shapes {missing[:3]} have no infshape; build the model "
                         "with build_parametrized (mup.set_base_shapes) before the optimizer")
    betas = (float(betas[0]), float(betas[1]))
    groups: list[Any] = params
    if depth is not None and depth.alpha is not None:
        from mutune.proxies.depth import depth_param_groups

        if kind == "sgd":
            raise ProxyError(f"depth parametrization {depth.parametrization!r} with "
                             "kind='sgd': its per-group factors are Adam's (Dey et al. 2025, "
                             "Table 1); use adam or adamw")
        groups = depth_param_groups(model, depth, lr=lr, eps=eps, weight_decay=weight_decay)
    from mutune._internals import optimizer_class

    # mup.optim.MuAdamW is MuAdam with impl=AdamW
    impl = optimizer_class(kind)
    fused = {"fused": True} if fused_adam_ok(params) else {}
    if kind == "adamw":
        return mup.optim.MuAdam(groups, impl=impl, lr=lr, weight_decay=weight_decay,
                                betas=betas, eps=eps, **fused)
    if kind == "adam":
        return mup.optim.MuAdam(groups, impl=impl, lr=lr, betas=betas, eps=eps, **fused)
    return mup.optim.MuSGD(params, impl=impl, lr=lr, weight_decay=weight_decay)


def fused_adam_ok(params: list[torch.Tensor]) -> bool:
    """Whether torch's fused Adam/AdamW kernel can step ``params`` (float, one CPU/CUDA device)."""
    devices = {p.device for p in params}
    if len(devices) != 1 or not all(p.is_floating_point() for p in params):
        return False
    dev = next(iter(devices))
    if dev.type not in ("cpu", "cuda"):
        return False
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return (major, minor) >= ((2, 4) if dev.type == "cpu" else (2, 0))


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model`` (shared tensors counted once)."""
    return int(sum(p.numel() for p in model.parameters()))
