"""Coordinate check: mean |activation| per module against width (or depth), for μP and its SP twin.

Yang et al. 2022, Tensor Programs V, Appendix D.1; across depth: Dey et al. 2025, arXiv
2505.01618, §3, and Yang et al. 2023, Tensor Programs VI, §3."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from mutune.errors import ProxyError

__all__ = ["CoordCheck", "CoordSetup", "coord_check", "depth_role", "slope_table",
           "plot_coord_check"]

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class CoordCheck:
    """Activation sizes and slopes of one parametrization."""
    parametrization: str
    widths: tuple[int, ...]
    sizes: dict[str, np.ndarray] = field(repr=False)
    slopes: dict[str, float]
    axis: str = "width"
    slope_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)


def _modules(model: nn.Module, blocks: bool = False) -> list[tuple[str, nn.Module]]:
    """Modules owning parameters, and with ``blocks`` every element of a ``ModuleList``."""
    lists = {name for name, m in model.named_modules() if isinstance(m, nn.ModuleList)}
    return [(name, m) for name, m in model.named_modules()
            if name and (any(True for _ in m.parameters(recurse=False))
                         or blocks and name.rpartition(".")[0] in lists)]


def depth_role(name: str, depth: int) -> str | None:
    """A module's role across depth: ``blocks.0.fc`` → ``blocks.first.fc``; middle blocks → None."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            k = int(part)
            role = "first" if k == 0 else "last" if k == depth - 1 else None
            return None if role is None else ".".join([*parts[:i], role, *parts[i + 1:]])
    return name


@dataclass(frozen=True)
class CoordSetup:
    """What a coord check trains."""
    build: Callable[[int, str], nn.Module]
    make_optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    batch: Callable[[int, int], Batch]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _record_run(setup: CoordSetup, width: int, parametrization: str, seed: int, steps: int,
                by_depth: bool) -> dict[str, list[float]]:
    """Train one model ``steps`` steps from ``seed``; module → mean |output| at each forward."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = setup.build(width, parametrization)
    opt = setup.make_optimizer(model)
    record: dict[str, list[float]] = {}
    named = [(depth_role(name, width) if by_depth else name, m)
             for name, m in _modules(model, blocks=by_depth)]
    hooks = [m.register_forward_hook(
        lambda _m, _i, out, name=name, record=record: record.setdefault(name, []).append(
            float(out.detach().abs().mean())))
        for name, m in named if name is not None]
    try:
        for step in range(steps + 1):
            x, y = setup.batch(seed, step + 1)
            out = model(x)
            if step == steps:
                break
            value = setup.loss(out, y)
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
    finally:
        for h in hooks:
            h.remove()
    return record


def _slopes(sizes: dict[str, np.ndarray], log_w: np.ndarray, steps: int,
            parametrization: str) -> dict[str, float]:
    """Module → slope of log mean |output| after the last step against log size."""
    slopes: dict[str, float] = {}
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
    return slopes


def coord_check(setup: CoordSetup, *, widths: Sequence[int], parametrization: str,
                steps: int = 3, seeds: Sequence[int] = (0, 1, 2),
                axis: str = "width") -> CoordCheck:
    """Record mean |output| of every module over the first ``steps`` steps at each width (or
    depth).

    Raises:
        ProxyError: fewer than 2 sizes, sizes not increasing, a depth below 2, steps < 1, no
            seeds, an unknown axis, or a non-finite activation (the learning rate is too large
            for the check)."""
    widths = [int(w) for w in widths]
    if axis not in ("width", "depth"):
        raise ProxyError(f"coord check axis {axis!r}: must be 'width' or 'depth'")
    if len(widths) < 2 or any(b <= a for a, b in zip(widths, widths[1:])):
        raise ProxyError(f"coord check {axis}s {widths}: need at least 2, strictly increasing")
    if axis == "depth" and widths[0] < 2:
        raise ProxyError(f"coord check depths {widths}: each must be ≥ 2 (a first and a last "
                         "block)")
    by_depth = axis == "depth"
    if steps < 1 or not seeds:
        raise ProxyError(f"coord check needs steps >= 1 (got {steps}) and at least one seed")
    per_width: list[dict[str, np.ndarray]] = []
    per_seed: list[dict[str, list[float]]] = []      # size → module → last row per seed
    for width in widths:
        acc: dict[str, np.ndarray] = {}
        lasts: dict[str, list[float]] = {}
        for seed in seeds:
            record = _record_run(setup, width, parametrization, int(seed), steps, by_depth)
            for name, vals in record.items():
                acc[name] = acc.get(name, 0.0) + np.asarray(vals) / len(seeds)
                lasts.setdefault(name, []).append(vals[-1])
        per_width.append(acc)
        per_seed.append(lasts)
    names = [n for n in per_width[0] if all(n in pw for pw in per_width)]
    sizes = {n: np.stack([pw[n] for pw in per_width], axis=1) for n in names}
    log_w = np.log(widths)
    slopes = _slopes(sizes, log_w, steps, parametrization)
    intervals = {n: _seed_interval(log_w, np.array([ps[n] for ps in per_seed]))
                 for n in slopes}
    return CoordCheck(parametrization, tuple(widths), sizes, slopes, axis, intervals)


def _seed_interval(log_w: np.ndarray, lasts: np.ndarray) -> tuple[float, float]:
    """95 % Student-t interval of the mean per-seed slope; ``lasts`` (n_sizes, n_seeds)."""
    from scipy import stats

    k = lasts.shape[1]
    if k < 2 or not np.all(np.isfinite(lasts)) or np.any(lasts <= 0):
        return (float("nan"), float("nan"))
    per = np.polyfit(log_w, np.log(lasts), 1)[0]          # (n_seeds,)
    half = float(stats.t.ppf(0.975, k - 1) * per.std(ddof=1) / np.sqrt(k))
    return (float(per.mean()) - half, float(per.mean()) + half)


def slope_table(checks: Sequence[CoordCheck]) -> dict[str, dict[str, dict[str, float]]]:
    """``{"mup": {"slopes": {module: slope}, "widths": [...]}, "sp": {...}}`` — the
    coord_check.json contract (across depth: ``"depths"`` instead of ``"widths"``)."""
    return {c.parametrization: {"slopes": dict(c.slopes),
                                "slope_intervals": {n: list(v) for n, v in
                                                    c.slope_intervals.items()},
                                f"{c.axis}s": list(c.widths)} for c in checks}


def plot_coord_check(checks: Sequence[CoordCheck], path: str) -> None:
    """PNG: per parametrization, mean |output| after the last step against width (log-log)."""
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
        ax.set_xlabel(c.axis)
        ax.set_ylabel("mean |output| after the last step")
        ax.set_title(f"coord check: {c.parametrization}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
