"""Before a sweep spends device time: warnings about known transfer breakers (trainable norm
gains, Lingle 2024, arXiv 2404.05728; a 1/√d_head attention scale, Tensor Programs V §4;
SGD with weight decay), and an automatic coord check (Tensor Programs V, Appendix D.1) that
stops a converted plain model μP cannot transfer."""
from __future__ import annotations

import math
from typing import Any

from mutune.checks import CheckRecord

__all__ = ["transfer_breakers", "check_converted_coords", "run_preflight", "COORD_TOLERANCE"]

#: the largest log-log slope of a module's mean |activation| against width a μP model may
#: show after three steps (Tensor Programs V, Appendix D.1: flat under μP, growing under SP)
COORD_TOLERANCE = 0.1

_NORMS = ("LayerNorm", "RMSNorm", "GroupNorm")


def transfer_breakers(task: Any, hparams: dict[str, float] | None = None) -> list[str]:
    """Warnings, each naming what it found and the fix, for the model at 2 × its base width; []
    if none. Trainable norm gains are not warned about in a family whose transfer has been
    measured with them (``ModelFamily.norm_gains_checked``)."""
    width = 2 * int(task.model.base_width)
    model = task.build(width, dict(hparams or {}))
    out = []
    checked = bool(getattr(getattr(task, "family", None), "norm_gains_checked", False))
    gains = [] if checked else [
        name for name, m in model.named_modules()
        if type(m).__name__ in _NORMS and getattr(m, "weight", None) is not None
        and getattr(m.weight, "requires_grad", False)]
    if gains:
        shown = ", ".join(gains[:4]) + (f" and {len(gains) - 4} more" if len(gains) > 4 else "")
        out.append(f"trainable norm gains in {shown}: Lingle 2024 (\"A Large-Scale "
                   "Exploration of μ-Transfer\", arXiv 2404.05728) reports they can break the "
                   "learning rate's transfer across width; build the norms with "
                   "elementwise_affine=False (no gain), or check the transfer "
                   "(mutune transfer-check)")
    for name, m in model.named_modules():
        d = getattr(m, "head_dim", None)
        if not isinstance(d, int) or isinstance(d, bool) or d < 2:
            continue
        for attr in ("scale", "softmax_scale", "attn_scale", "scaling"):
            v = getattr(m, attr, None)
            if isinstance(v, float) and math.isclose(v, d ** -0.5, rel_tol=1e-6):
                out.append(f"{name or type(model).__name__}.{attr} = 1/√{d} at width {width}: "
                           "standard parametrization's attention scale, which μP replaces "
                           "by 1/d_head (Tensor Programs V §4); declare the attribute as the "
                           "plugin's attention_scale so mutune sets it, or scale by 1/d_head")
                break
    t = task.train
    if t.optimizer == "sgd" and t.weight_decay > 0:
        out.append(f"train.optimizer sgd with weight_decay {t.weight_decay:g}: L2 on the loss, "
                   "not decoupled decay; use train.optimizer: adamw for weight decay that "
                   "the transfer rules keep comparable across width")
    return out


def check_converted_coords(task: Any, lr: float, hparams: dict[str, float] | None = None,
                           *, steps: int = 3, seeds: tuple[int, ...] = (0, 1, 2)
                           ) -> dict[str, Any]:
    """The coord check of a converted plain model at its base width, 2× and 4×.

    Raises:
        ProxyError: a module's slope exceeds :data:`COORD_TOLERANCE` (names the modules, their
            slopes and the fix), or non-finite activations (lower the learning rate)."""
    from mutune.errors import ProxyError
    from mutune.proxies.coord_check import CoordSetup, coord_check

    hp = {**dict(hparams or {}), "lr": lr}
    base = int(task.model.base_width)
    widths = [base, 2 * base, 4 * base]
    check = coord_check(CoordSetup(lambda w, p: task.build(w, hp),
                                   lambda m: task.optimizer(m, lr), task.batch, task.loss),
                        widths=widths, parametrization="mup", steps=steps, seeds=seeds)
    bad = {n: s for n, s in check.slopes.items() if s > COORD_TOLERANCE}
    if bad:
        shown = ", ".join(f"{n} {s:+.2f}" for n, s in sorted(bad.items(), key=lambda x: -x[1]))
        raise ProxyError(
            f"coord check of the converted model at widths {widths} (lr {lr:g}, {steps} steps, "
            f"{len(seeds)} seeds): activations grow with width in {shown} (log-log slope > "
            f"{COORD_TOLERANCE}); μP would not transfer. Build those layers from nn.Linear / "
            "mup layers, initialise them with PyTorch's default or mup.init, and name the "
            "plugin's readout and attention_scale (docs/architecture.md §5)")
    return {"widths": widths, "slopes": dict(check.slopes), "tolerance": COORD_TOLERANCE,
            "steps": steps, "seeds": list(seeds), "lr": lr}


def run_preflight(config: Any, task: Any) -> CheckRecord:
    """What the sweep checks before its first trial: the ``preflight``
    :class:`~mutune.checks.CheckRecord`.

    Raises:
        ProxyError: the converted model fails its coord check."""
    hp = dict(config.search.fixed)
    lr_dist = config.search.space["lr"]
    lr = (math.sqrt(lr_dist.low * lr_dist.high) if hasattr(lr_dist, "low")
          else sorted(lr_dist.values)[len(lr_dist.values) // 2])
    fam = task.family
    plain = fam.readout is not None or fam.attention_scale is not None
    coords = (check_converted_coords(task, float(lr), hp)
              if plain and config.model.parametrization == "mup" else None)
    return CheckRecord("preflight", {"warnings": transfer_breakers(task, hp),
                                     "coord_check": coords})
