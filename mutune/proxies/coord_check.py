"""Coordinate check: activation size per module against width, for μP and its SP twin.

Yang et al. 2022, Tensor Programs V, Appendix D.1 ("coordinate check") and mup's
``get_coord_data``: train each width for a few steps from the same seeds and record, for every
module with parameters, the mean absolute value of its output coordinates. Under μP every
module's size stays Θ(1) as width grows (slope of log size against log width ≈ 0); under
standard parametrization the readout (and with Adam the hidden layers) blow up with width
(slope ≈ 1 for the readout).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from mutune.errors import ProxyError

__all__ = ["CoordCheck", "coord_check", "slope_table", "plot_coord_check"]

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class CoordCheck:
    """Activation sizes and slopes of one parametrization.

    Attributes:
        parametrization: ``mup`` or ``sp``.
        widths: the widths checked, increasing.
        sizes: module → array (n_steps + 1, n_widths) of mean |output| averaged over seeds;
            row t is the forward pass after t optimizer steps.
        slopes: module → slope of log size against log width at the last row (after the last
            step), from a least-squares line.
    """
    parametrization: str
    widths: tuple[int, ...]
    sizes: dict[str, np.ndarray] = field(repr=False)
    slopes: dict[str, float]


def _modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Modules that own parameters directly (Linear, Embedding, LayerNorm, MuReadout, …)."""
    return [(name, m) for name, m in model.named_modules()
            if name and any(True for _ in m.parameters(recurse=False))]


def coord_check(build: Callable[[int, str], nn.Module],
                make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
                batch: Callable[[int, int], Batch], loss: Callable[[torch.Tensor, torch.Tensor],
                                                                   torch.Tensor], *,
                widths: Sequence[int], parametrization: str, steps: int = 3,
                seeds: Sequence[int] = (0, 1, 2)) -> CoordCheck:
    """Record mean |output| of every module over the first ``steps`` steps at each width.

    Args:
        build: ``(width, parametrization) -> model`` with base shapes set.
        make_optimizer: the μP optimizer for a model (same learning rate at every width).
        batch: ``(seed, step) -> (inputs, targets)``, the training batches.
        loss: ``(outputs, targets) -> scalar`` loss.
        widths: increasing widths, at least 2.
        parametrization: ``mup`` or ``sp`` (passed to ``build``).
        steps: optimizer steps; sizes are recorded before the first and after every step, and
            slopes use the forward pass after the last one (zero-initialized modules such as
            the readout are non-zero by then).
        seeds: model-init and batch seeds averaged over.
    Returns:
        CoordCheck with sizes (n_steps + 1, n_widths) per module and the final slopes.
    Raises:
        ProxyError: fewer than 2 widths, widths not increasing, steps < 1, no seeds, or a
            non-finite activation (the learning rate is too large for the check).
    """
    widths = [int(w) for w in widths]
    if len(widths) < 2 or any(b <= a for a, b in zip(widths, widths[1:])):
        raise ProxyError(f"coord check widths {widths}: need at least 2, strictly increasing")
    if steps < 1 or not seeds:
        raise ProxyError(f"coord check needs steps >= 1 (got {steps}) and at least one seed")
    per_width: list[dict[str, np.ndarray]] = []
    for width in widths:
        acc: dict[str, np.ndarray] = {}
        for seed in seeds:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seed))
                model = build(width, parametrization)
            opt = make_optimizer(model)
            record: dict[str, list[float]] = {}
            hooks = [m.register_forward_hook(
                lambda _m, _i, out, name=name: record.setdefault(name, []).append(
                    float(out.detach().abs().mean())))
                for name, m in _modules(model)]
            try:
                for step in range(steps + 1):
                    x, y = batch(int(seed), step + 1)
                    out = model(x)
                    if step == steps:
                        break
                    value = loss(out, y)
                    opt.zero_grad(set_to_none=True)
                    value.backward()
                    opt.step()
            finally:
                for h in hooks:
                    h.remove()
            for name, vals in record.items():
                acc[name] = acc.get(name, 0.0) + np.asarray(vals) / len(seeds)
        per_width.append(acc)
    names = list(per_width[0])
    sizes = {n: np.stack([pw[n] for pw in per_width], axis=1) for n in names}
    log_w = np.log(widths)
    slopes = {}
    for n, arr in sizes.items():
        last = arr[-1]
        if not np.all(np.isfinite(last)) or np.any(last <= 0):
            if np.all(last == 0):
                slopes[n] = 0.0
                continue
            raise ProxyError(f"coord check: module {n!r} has non-finite or zero activations "
                             f"{last.tolist()} after {steps} steps ({parametrization}); "
                             "lower the learning rate")
        slopes[n] = float(np.polyfit(log_w, np.log(last), 1)[0])
    return CoordCheck(parametrization, tuple(widths), sizes, slopes)


def slope_table(checks: Sequence[CoordCheck]) -> dict[str, dict[str, dict[str, float]]]:
    """``{"mup": {"slopes": {module: slope}}, "sp": {...}}`` — the coord_check.json contract."""
    return {c.parametrization: {"slopes": dict(c.slopes),
                                "widths": list(c.widths)} for c in checks}


def plot_coord_check(checks: Sequence[CoordCheck], path: str) -> None:
    """PNG: one panel per parametrization, mean |output| after the last step against width
    (log-log), one line per module."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(checks), figsize=(6 * len(checks), 4.5), squeeze=False)
    for ax, c in zip(axes[0], checks):
        for name, arr in c.sizes.items():
            ax.plot(c.widths, arr[-1], "o-", ms=3,
                    label=f"{name} (slope {c.slopes[name]:.2f})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("width")
        ax.set_ylabel("mean |output| after the last step")
        ax.set_title(f"coord check: {c.parametrization}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
