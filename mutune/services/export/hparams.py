"""``mutune export SWEEP_ID --hparams --width N``: the transferred hyperparameters for any
shape, re-fitted from the stored optima by :func:`mutune.pipeline.transfer_stage.
transfer_rules`, with a snippet that builds the μP optimizer."""
from __future__ import annotations

import json
from typing import Any

from mutune._json import json_safe
from mutune.errors import FitError, StoreError
from mutune.pipeline.optimum_record import WidthOptimum

__all__ = ["export_hparams", "format_export"]

_OPTIMIZER = {"adamw": "MuAdamW", "adam": "MuAdam", "sgd": "MuSGD"}


def _floats(o: Any) -> Any:
    if isinstance(o, str) and o in ("nan", "inf", "-inf"):
        return float(o)
    if isinstance(o, dict):
        return {k: _floats(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_floats(v) for v in o]
    return o


def _recipe(cfg: Any, hp: dict[str, Any]) -> Any:
    """The config's ``train`` section with the searched recipe knobs at their transferred values."""
    from mutune.config.spaces import RECIPE_HPARAMS

    return cfg.train.model_copy(update={k: hp[k] for k in RECIPE_HPARAMS if k in hp})


def depth_scaling(cfg: Any, depth: int) -> Any:
    """The DepthScaling of a model ``depth`` deep under the sweep's depth parametrization, or
    None."""
    from mutune.proxies.depth import DepthScaling

    kind = getattr(cfg.model, "depth_parametrization", "none")
    if kind == "none":
        return None
    return DepthScaling(kind, int(depth), int(cfg.model.base_depth or cfg.model.depth))


def _depth_export(scaling: Any) -> dict[str, Any]:
    """The depth parametrization's export (Dey et al. 2025, Table 1;
    :mod:`mutune.proxies.depth`)."""
    from mutune.proxies.depth import LAYER_GROUPS

    return {"kind": scaling.parametrization, "alpha": scaling.alpha, "depth": scaling.depth,
            "base_depth": scaling.base_depth, "branch_multiplier": scaling.branch_multiplier,
            "group_factors": {g: scaling.factors(g) for g in LAYER_GROUPS}}


def _depth_lines(scaling: Any, opt: str, lr: float, t: Any,
                 settings: dict[str, Any]) -> list[str]:
    """The snippet's optimizer under a depth parametrization: one parameter group per layer
    group."""
    from mutune.proxies.depth import LAYER_GROUPS

    wd = float(settings["weight_decay"]) if t.optimizer != "adam" else 0.0
    lines = [f"# depth parametrization {scaling.parametrization} (α = {scaling.alpha:g}): depth "
             f"{scaling.depth}, base depth {scaling.base_depth} (Dey et al. 2025, Table 1);",
             f"# each residual branch is multiplied by {scaling.branch_multiplier!r} "
             "(branch_mult above), and each layer group's Adam lr and ε by:"]
    for g in LAYER_GROUPS:
        f = scaling.factors(g)
        lines.append(f"#   {g}: lr × {f['lr']!r}, eps × {f['eps']!r}")
    lines += ["from mutune.proxies.depth import DepthScaling, depth_param_groups",
              f"groups = depth_param_groups(model, DepthScaling({scaling.parametrization!r}, "
              f"{scaling.depth}, {scaling.base_depth}),",
              f"                            lr={lr!r}, eps={t.eps!r}, weight_decay={wd!r})",
              f"optimizer = mup.optim.{opt}(groups, betas=({t.beta1!r}, {t.beta2!r}))"]
    return lines


def _snippet(cfg: Any, width: int, depth: int, hp: dict[str, Any],
             settings: dict[str, Any]) -> str:
    from mutune.proxies.plugins import MODEL_HPARAMS

    t = _recipe(cfg, hp)
    opt = _OPTIMIZER[t.optimizer]
    # full precision (repr): the snippet trains with exactly the transferred values
    args = f"lr={float(hp['lr'])!r}"
    if t.optimizer != "sgd":
        args += f", betas=({t.beta1!r}, {t.beta2!r}), eps={t.eps!r}"
    if t.optimizer != "adam":
        args += f", weight_decay={float(settings['weight_decay'])!r}"
    mults = {k: v for k, v in sorted(hp.items()) if k in MODEL_HPARAMS}
    base = cfg.model.base_width
    scaling = depth_scaling(cfg, depth)
    if scaling is not None:
        mults = {**mults, "branch_mult": scaling.branch_multiplier}
    warm = (f"{t.warmup_fraction!r} of the run's steps" if t.warmup_fraction is not None
            else f"{t.warmup_steps} steps")
    lines = [
        "import mup",
        "",
        "# your model family: build(width, depth) -> nn.Module with mup.MuReadout as output",
        f"model = build(width={width}, depth={depth}"
        + "".join(f", {k}={float(v)!r}" for k, v in mults.items()) + ")",
        "# base shapes relative to the sweep's base width (the rules assume this base)",
        f"mup.set_base_shapes(model, build(width={base}, depth={depth}),",
        f"                    delta=build(width={2 * base}, depth={depth}))",
        "# custom init after this point only with mup.init.* (torch.nn.init undoes μP)",
        *(_depth_lines(scaling, opt, float(hp["lr"]), t, settings) if scaling is not None
          else [f"optimizer = mup.optim.{opt}(model.parameters(), {args})"]),
        "# LR schedules: scale each param group's lr relative to its initial value",
        f"# schedule: {t.lr_schedule} after a linear warmup of {warm}, down to "
        f"{t.min_lr_ratio!r} × each group's starting lr",
    ]
    if t.grad_clip is not None:
        lines.append(f"# before each optimizer.step(): torch.nn.utils.clip_grad_norm_("
                     f"model.parameters(), {float(t.grad_clip)!r})")
    return "\n".join(lines) + "\n"


def _shape_warnings(cfg: Any, sweep: dict[str, Any], width: int, d: int,
                    widths: list[int]) -> list[str]:
    """What the export warns of the target shape and the sweep's status."""
    ladder = cfg.depth_ladder
    warnings = []
    if ladder and d < cfg.proxy_depths[0]:
        warnings.append(f"depth {d} is below the proxies' {cfg.proxy_depths[0]}–"
                        f"{cfg.proxy_depths[-1]}")
    if not ladder and d != cfg.model.depth:
        warnings.append(f"the rules were fitted at depth {cfg.model.depth}; depth {d} is not "
                        "covered by them (μP transfers across width; depth only empirically)")
    if width < widths[0] or width > 64 * widths[-1]:
        warnings.append(f"width {width} is far outside the proxies' {widths[0]}–{widths[-1]}")
    if sweep["status"] != "completed":
        warnings.append(f"the sweep ended {sweep['status']}: {sweep.get('reason') or ''}")
    return warnings


def _export_rule(r: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """One rule as exported; a verdict that is not stable adds to ``warnings``."""
    value = r.get("value_after_adjustments", r["transferred_value"])
    out = {"hyperparameter": r["hyperparameter"], "value": value,
           "interval": r["transferred_interval"], "slope": r["slope"],
           "slope_interval": r["slope_interval"], "formula": r["formula"],
           **{k: r[k] for k in ("axes", "slopes", "slope_intervals", "verdicts")
              if k in r},
           "transfer_form": r["transfer_form"], "verdict": r["verdict"],
           "reason": r["reason"], "advice": r["advice"],
           "published_adjustments": r.get("published_adjustments", [])}
    if r["verdict"] != "stable":
        warnings.append(f"{r['hyperparameter']}: verdict {r['verdict']}: {r['reason']}")
    for axis, v in (r.get("verdicts") or {}).items():
        if axis != "width" and v not in ("stable", "sp_corrected", "per_choice",
                                         "not_transferred"):
            warnings.append(f"{r['hyperparameter']}: verdict along {axis} {v}: "
                            f"{(r.get('verdict_reasons') or {}).get(axis, '')}")
    return out


def export_hparams(rows: dict[str, Any], *, width: int, depth: int | None = None
                   ) -> dict[str, Any]:
    """The transferred hyperparameters of a stored sweep at ``width`` (and ``depth``).

    ``depth`` None keeps the sweep's; without a ladder another depth is exported with a warning
    (depth transfer is empirical, TP V §5). Values are in each hyperparameter's unit (lr per step).

    Raises:
        StoreError: the sweep has fewer than 2 finished proxy widths or width/depth < 1.
        FitError: a rule cannot be fitted from the stored optima."""
    from mutune.config import parse_config
    from mutune.pipeline.transfer_stage import transfer_rules

    if width < 1 or (depth is not None and depth < 1):
        raise StoreError(f"width ({width}) and depth ({depth}) must be >= 1")
    sweep = rows["sweep"]
    cfg = parse_config(sweep["config"], source=f"sweep {sweep['id']}")
    # on a depth ladder in its proxies' order: depth by depth, widths increasing within each
    done = sorted((p for p in rows["proxy_sweeps"] if (p.get("best") or {}).get("optimum")),
                  key=lambda p: ((p.get("settings") or {}).get("depth") or 0, p["width"]))
    if len(done) < 2:
        raise StoreError(f"sweep {sweep['id']} ({sweep['status']}) has {len(done)} finished "
                         "proxy width(s); transfer rules need at least 2")
    ladder = cfg.depth_ladder
    d = (cfg.target_depth if ladder else cfg.model.depth) if depth is None else depth
    cfg = cfg.model_copy(update={"target": cfg.target.model_copy(
        update={"width": width, **({"depth": d} if ladder else {})})})
    optima = [WidthOptimum.from_json(_floats(p["best"]["optimum"])) for p in done]
    widths = [p["width"] for p in done]
    depths = [int(p["settings"]["depth"]) for p in done] if ladder else None
    try:
        rules, hp, settings = transfer_rules(cfg, widths, optima, depths)
    except FitError as err:
        raise FitError(f"sweep {sweep['id']}: {err}") from None
    warnings = _shape_warnings(cfg, sweep, width, d, widths)
    out_rules = [_export_rule(r, warnings) for r in rules]
    t = _recipe(cfg, hp)
    scaling = depth_scaling(cfg, d)
    return json_safe({
        "sweep_id": sweep["id"], "name": sweep["name"],
        "model": {"family": cfg.model.family, "parametrization": cfg.model.parametrization,
                  "base_width": cfg.model.base_width, "swept_depth": cfg.model.depth,
                  "proxy_widths": widths,
                  **({"proxy_depths": depths} if ladder else {})},
        "width": width, "depth": d, "hyperparameters": hp, "rules": out_rules,
        "optimizer": {"class": f"mup.optim.{_OPTIMIZER[t.optimizer]}", "lr": hp["lr"],
                      "weight_decay": settings["weight_decay"],
                      "betas": [t.beta1, t.beta2], "eps": t.eps,
                      "batch_size": settings["batch_size"]},
        "recipe": {"lr_schedule": t.lr_schedule, "warmup_steps": t.warmup_steps,
                   "warmup_fraction": t.warmup_fraction, "min_lr_ratio": t.min_lr_ratio,
                   "decay_fraction": t.decay_fraction, "grad_clip": t.grad_clip,
                   "micro_batches": t.micro_batches},
        **({"depth_parametrization": _depth_export(scaling)} if scaling is not None else {}),
        "warnings": warnings, "snippet": _snippet(cfg, width, d, hp, settings)})


def format_export(data: dict[str, Any], fmt: str) -> str:
    """``data`` as ``json`` (indented) or ``yaml`` (the snippet as a literal block)."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt != "yaml":
        raise StoreError(f"format = {fmt!r}: use json or yaml")
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: Any, s: str) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", s,
                                       style="|" if "\n" in s else None)
    _Dumper.add_representer(str, _str)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
