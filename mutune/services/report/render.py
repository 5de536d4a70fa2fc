"""The terminal rendering of ``report.json``: per-width best trials, optima, transfer rules,
the target run and the cost lines, as rich tables (``mutune report``, the main job)."""
from __future__ import annotations

from typing import Any

from mutune.services.report.formatting import (choice_line, fmt_interval, fmt_num, fmt_share,
                                               unclipped)

__all__ = ["render_report"]

#: the report's words for each cause of held time that did not train (mutune.scaling.idle)
IDLE_LABELS = {"sweep_startup": "before the first trial", "between_widths": "between widths",
               "fits": "fits and designs (no trial running)",
               "tails": "slots empty while other trials ran",
               "target_fewer_devices": "devices the target left idle",
               "worker_start": "inside trials: worker start (process, imports, task)",
               "trial_overhead": "inside trials: Ray's stop, report waits",
               "recovery": "inside trials: recovery"}


def _size(p: dict[str, Any]) -> str:
    """A proxy's size as shown: its width, or ``width × depth`` on a depth ladder."""
    return f"{p['width']} × {p['depth']}" if p.get("depth") else str(p["width"])


def render_report(report: dict[str, Any], console: Any) -> None:
    """Print ``report`` (:func:`~mutune.services.report.data.build_report`'s dict) on a rich
    ``console``: per-width best, optima, rules, target, cost lines (GPU-hours, money in the
    sweep's currency). Free text (reasons, errors) is escaped, so a bracket in it is never
    taken as markup."""
    for part in (_header, _proxies, _optima, _rules, _rule_notes):
        part(report, console)
    _gate(console, report)
    for part in (_target, _cost_table, _cost_notes):
        part(report, console)


def _header(report: dict[str, Any], console: Any) -> None:
    """The sweep's id, name, status and device kind; why it ended early."""
    from rich.markup import escape

    console.print(f"[bold]mutune sweep {report['sweep_id']}[/] ({report['name']}, "
                  f"{report['status']}, device kind: {report['device_kind']})")
    if report["status"] in ("cancelled", "budget_exhausted", "failed", "gate_stopped",
                            "target_diverged"):
        console.print(f"[yellow]sweep {report['status']}:[/] "
                      f"{escape(report.get('reason') or '')} — "
                      "the tables show what was recorded before it ended", highlight=False)


def _proxies(report: dict[str, Any], console: Any) -> None:
    """Each proxy's best configuration at its chosen rung."""
    from rich.table import Table

    ladder = any(p.get("depth") for p in report["proxies"])
    size_col = "width × depth" if ladder else "width"
    t = Table(title="Proxy sweeps: best configuration at the rung shown (the highest with ≥ 3 "
                    "trials; after a confirmation design, its seed mean at max_t)")
    for col in (size_col, "trials", "confirm trials", "rung (steps)", "best val loss (nats)",
                "best test loss", "best config"):
        t.add_column(col, justify="right" if col != "best config" else "left")
    for p in report["proxies"]:
        cfg = " ".join(f"{k}={fmt_num(v)}" for k, v in sorted((p["best_config"] or {}).items()))
        t.add_row(_size(p), str(p["trials"]), str(p.get("confirm_trials", 0)),
                  str(p["chosen_rung"]), fmt_num(p["best_val_loss"]),
                  fmt_num(p.get("best_test_loss")), cfg)
    console.print(unclipped(t))


def _optima(report: dict[str, Any], console: Any) -> None:
    """Each proxy's optimum with its interval, horizon and counts; fallbacks."""
    from rich.markup import escape
    from rich.table import Table

    ladder = any(p.get("depth") for p in report["proxies"])
    size_col = "width × depth" if ladder else "width"
    o = Table(title=f"Optimum per {'proxy' if ladder else 'width'} (95 % bootstrap interval; "
                    "method and horizon per row; * = at the edge of what was searched)")
    # the short-horizon fit runs only for optima read at a rung (no confirmation design)
    horizon = any(((p.get("optimum") or {}).get("horizon") or {}).get("extrapolated_lr")
                  is not None for p in report["proxies"])
    for col in (size_col, "horizon", "trials / points / seeds", "method", "optimum",
                *(("lr at target steps (short-horizon fit)",) if horizon else ())):
        o.add_column(col, justify="right" if col != "optimum" else "left")
    for p in report["proxies"]:
        opt = p.get("optimum")
        if not opt:
            continue
        edge = opt.get("on_edge") or {}
        vals = " ".join(f"{k}={fmt_num(v)}{'*' if edge.get(k) else ''} "
                        f"{fmt_interval((opt.get('intervals') or {}).get(k))}"
                        for k, v in sorted((opt.get("values") or {}).items()))
        hz = opt.get("horizon") or {}
        hz_text = (f"{hz['extrapolated_lr']:.4g} (at the rung: {hz['highest_rung_lr']:.4g})"
                   if hz.get("extrapolated_lr") is not None else "—")
        counts = [len(opt.get("trial_ids") or []), opt.get("n_points"), opt.get("n_seeds")]
        o.add_row(_size(p), str(opt.get("optimum_horizon") or opt.get("milestone")),
                  " / ".join("—" if c is None else str(c) for c in counts),
                  str(opt.get("method")), vals, *((hz_text,) if horizon else ()))
    console.print(unclipped(o))
    for p in report["proxies"]:
        opt = p.get("optimum") or {}
        if opt.get("fallback_reason"):
            console.print(f"  [yellow]{'proxy' if ladder else 'width'} {_size(p)}: no fitted "
                          "optimum[/] — the best "
                          f"configuration is used: {escape(opt['fallback_reason'])}",
                          highlight=False)


def _rules(report: dict[str, Any], console: Any) -> None:
    """The transfer rules' table."""
    from rich.table import Table

    ladder = any(p.get("depth") for p in report["proxies"])
    r = Table(title="Transfer rules: log h*(w) = a + b·log w" + (" + c·log L" if ladder else "")
                    + " (95 % intervals; b and its verdict are the width's)")
    depth_cols = ("c (depth)", "c interval", "depth verdict") if ladder else ()
    for col in ("hyperparameter", "a", "b (slope)", "b interval", "loss at stake",
                *depth_cols, "transferred value", "value interval", "verdict"):
        r.add_column(col, justify="right")
    for rule in report["rules"]:
        depth_cells = ((fmt_num((rule.get("slopes") or {}).get("depth")),
                        fmt_interval((rule.get("slope_intervals") or {}).get("depth")),
                        (rule.get("verdicts") or {}).get("depth", "—")) if ladder else ())
        r.add_row(rule["hyperparameter"], fmt_num(rule["intercept"]), fmt_num(rule["slope"]),
                  fmt_interval(rule.get("slope_interval")), _stake_cell(rule), *depth_cells,
                  fmt_num(rule["transferred_value"]),
                  fmt_interval(rule.get("transferred_interval")), rule.get("verdict", "—"))
    console.print(unclipped(r))


def _stake_cell(rule: dict[str, Any]) -> str:
    """``0.21 % (≤ 0.5 %)``: the share of the loss the rule's uncertainty could cost at the
    target, against ``transfer.loss_tolerance``; ``—`` where no loss surface priced it."""
    stake = rule.get("loss_at_stake")
    if not stake:
        return "—"
    tol = rule.get("loss_tolerance")
    limit = "" if tol is None else f" ({'≤' if stake['relative'] <= tol else '>'} " \
        f"{100 * tol:g} %)"
    return f"{fmt_share(stake['relative'])}{limit}"


def _rule_notes(report: dict[str, Any], console: Any) -> None:
    """Each rule's fitted formula, verdict and advice, further axes, choices and warnings."""
    from rich.markup import escape

    for rule in report["rules"]:
        if rule.get("formula"):
            flat = str(rule.get("transfer_form", "")).startswith("flat")
            console.print(f"fitted: {rule['formula']}"
                          + ("  (slope not resolved: not extrapolated)" if flat else ""),
                          highlight=False)
            console.print(f"  → {rule['hyperparameter']} at the target = "
                          f"{fmt_num(rule['transferred_value'])}"
                          + (f" ({rule['transfer_form']})" if rule.get("transfer_form") else ""),
                          highlight=False)
        if rule.get("verdict"):
            console.print(f"  {rule['verdict']}: {escape(rule.get('reason') or '')}"
                          + (f" — {rule['advice']}" if rule.get("advice") else ""),
                          highlight=False)
        for axis in (rule.get("axes") or [])[1:]:
            console.print(f"  {axis}: exponent {fmt_num(rule['slopes'][axis])} "
                          f"{fmt_interval(rule['slope_intervals'][axis])}, "
                          f"{rule['verdicts'].get(axis, '—')}: "
                          f"{escape((rule.get('verdict_reasons') or {}).get(axis) or '')}",
                          highlight=False)
        for w, ev in zip(rule.get("widths") or [], rule.get("choice_evidence") or []):
            if ev:
                console.print(f"  width {w}: {choice_line(ev)}", highlight=False)
        for adj in rule.get("published_adjustments") or []:
            console.print(f"  published rule: {adj['rule']}", highlight=False)
        if rule.get("outside_searched_range"):
            console.print(f"  [yellow]warning:[/] the transferred {rule['hyperparameter']} "
                          "lies outside the searched range", highlight=False)


def _target(report: dict[str, Any], console: Any) -> None:
    """The target run, the watch against the best proxy and the predicted loss."""
    from rich.markup import escape

    tg = report.get("target")
    if tg:
        cfg = " ".join(f"{k}={fmt_num(v)}" for k, v in sorted(tg["config"].items()))
        se = f" ± {tg['val_loss_se']:.2g}" if tg.get("val_loss_se") is not None else ""
        test = (f", test loss {fmt_num(tg['test_loss'])}"
                + (f" ± {tg['test_loss_se']:.2g}" if tg.get("test_loss_se") else "")
                if tg.get("test_loss") is not None else "")
        depth = f", depth {tg['depth']}" if tg.get("depth") else ""
        console.print(f"Target run: width {tg['width']}{depth}, {cfg}: final val loss "
                      f"{fmt_num(tg['val_loss'])}{se} nats{test} ({tg['status']})")
        if tg.get("metric"):
            console.print(f"  {tg['metric']} (the sweep's metric): "
                          f"{fmt_num(tg.get('metric_value'))}", highlight=False)
        note = (tg.get("watch") or {}).get("note")
        if note:
            console.print(f"  [yellow]warning:[/] {escape(note)}", highlight=False)
        skipped = (tg.get("watch") or {}).get("skipped")
        if skipped:
            console.print(f"  target-vs-proxy check skipped: {escape(skipped)}",
                          highlight=False)
        law = report.get("loss_law") or {}
        if tg.get("predicted_val_loss") is not None:
            form = law.get("form", "")
            ident = "" if law.get("identifiable", True) else \
                " — E + A·N^-α not identifiable from these sizes; power-law fallback"
            console.print(f"  predicted before it ran (loss law {form} over the proxies"
                          f"{ident}): {fmt_num(tg['predicted_val_loss'])} nats, 95 % interval "
                          f"{fmt_interval(tg.get('predicted_val_loss_interval'))}",
                          highlight=False)
            iv = tg.get("predicted_val_loss_interval") or [None, None]
            if tg.get("val_loss") is not None and None not in iv and \
                    not iv[0] <= tg["val_loss"] <= iv[1]:
                side = "above" if tg["val_loss"] > iv[1] else "below"
                console.print(f"  [yellow]warning:[/] the actual loss lies {side} the predicted "
                              "interval: the proxies' loss-vs-size trend did not hold at the "
                              "target (few sizes, or a transferred setting that is off)",
                              highlight=False)
        elif tg.get("predicted_val_loss_error"):
            console.print(f"  no loss prediction: {escape(tg['predicted_val_loss_error'])}",
                          highlight=False)


def _cost_table(report: dict[str, Any], console: Any) -> None:
    """The cost table: GPU-hours, ETTR, MFU, waste, idle causes, money."""
    from rich.table import Table

    c = report["cost"]
    ct = Table(title=f"Cost (GPU-hours; device kind {c.get('device_kind')})")
    ct.add_column("line")
    ct.add_column("value", justify="right")
    for key, label in (("proxy_gpu_hours", "proxy sweeps"), ("target_gpu_hours", "target run"),
                       ("total_gpu_hours", "total"),
                       ("naive_gpu_hours", "naive: same search at target size, 1 seed"),
                       ("naive_replicates_gpu_hours", "naive, with the proxies' seeds"),
                       ("naive_grid_gpu_hours", "naive: every sample to max_t"),
                       ("saved_gpu_hours", "saved vs naive"),
                       ("saved_fraction", "saved fraction (measured GPU-hours)"),
                       ("ideal_saved_fraction", "ideal: the proxies free"),
                       ("saved_flops_fraction", "saved fraction (model FLOPs)"),
                       ("ideal_saved_flops_fraction", "ideal in FLOPs: the proxies free"),
                       ("ettr" if "trial_ettr" not in c else "", "ETTR"),   # older sweeps
                       ("trial_ettr", "trial ETTR (productive / each trial's allocation)"),
                       ("sweep_ettr", "sweep ETTR (productive / held)"),
                       ("mfu", "MFU"),
                       ("target_samples_per_s", "target samples/s (all its devices)"),
                       ("target_devices", "target devices"),
                       ("gpu_hours_per_trial", "per proxy trial"),
                       ("cost_to_final_metric_gpu_hours", "to reach the final metric"),
                       ("held_gpu_hours",
                        "held by the sweep (submitted → last trial end, target in; × devices)"),
                       ("useful_gpu_hours", "useful"),
                       ("spent_gpu_hours", "spent: every recorded trial"),
                       ("budget_gpu_hours", "budget")):
        if key in c:
            fmt = ".1%" if key in ("saved_fraction", "ideal_saved_fraction",
                                   "saved_flops_fraction", "ideal_saved_flops_fraction",
                                   "ettr", "trial_ettr", "sweep_ettr") else \
                ".3%" if key == "mfu" else \
                ".1f" if key in ("target_samples_per_s", "target_devices") else ".6f"
            ct.add_row(label, fmt_num(c[key], fmt))
    for cat, v in (c.get("waste_gpu_hours") or {}).items():
        ct.add_row(f"waste: {cat.replace('_', ' ')}", fmt_num(v, ".6f"))
    for cause, v in (c.get("idle_gpu_hours_by_cause") or {}).items():
        label = IDLE_LABELS.get(cause, cause.replace("_", " "))
        ct.add_row(f"held, not training: {label}", fmt_num(v, ".6f"))
    if c.get("preemptions"):
        ct.add_row("preemptions (retried from their checkpoints)",
                   f"{int(c['preemptions'])}, recovery {c.get('recovery_s', 0.0):.1f} s, "
                   f"{int(c.get('repeated_steps') or 0)} steps retrained")
    if c.get("upload_s"):
        ct.add_row("checkpoint uploads to remote storage (background)",
                   f"{c['upload_s']:.1f} s")
    if c.get("checkpoint_bytes_written") is not None:
        ct.add_row("checkpoints written / kept (MB)",
                   f"{c['checkpoint_bytes_written'] / 1e6:.3f} / "
                   f"{(c.get('checkpoint_bytes_kept') or 0) / 1e6:.3f}")
    cur = c.get("currency", "")
    for key, label in (("price_per_hour", f"price per device-hour ({c.get('pricing')})"),
                       ("total_money", "money spent"), ("naive_money", "money, naive"),
                       ("saved_money", "money saved")):
        if c.get(key) is not None:
            ct.add_row(label, f"{c[key]:.4f} {cur}")
    console.print(unclipped(ct))


def _cost_notes(report: dict[str, Any], console: Any) -> None:
    """The formulas under the cost table, billing, spot economics."""
    c = report["cost"]
    if c.get("idle_gpu_hours_by_cause"):
        console.print("held, not training = held − productive − evaluation − checkpoint − "
                      "set-up (stopped trials' steps count as productive here); waste: idle = "
                      "slots no trial held + completed trials' overhead", highlight=False)
    if c.get("naive_formula"):
        console.print(f"naive = {c['naive_formula']}", highlight=False)
    if c.get("mfu_formula"):
        i = c.get("mfu_inputs") or {}
        peak = fmt_num(i.get('peak_flops_per_device'), '.3g')
        console.print(f"MFU = {c['mfu_formula']}; peak {peak}"
                      f" FLOP/s ({i.get('peak_source')})", highlight=False)
    if c.get("project") or c.get("owner"):
        console.print(f"billed to project {c.get('project')}, owner {c.get('owner')}",
                      highlight=False)
    sp = c.get("spot")
    if sp:
        console.print(_spot_line(sp), highlight=False)
    if (c.get("price_per_hour") and c.get("spent_gpu_hours") is not None
            and c.get("total_money") is None):
        console.print(f"money spent: {c['spent_gpu_hours'] * c['price_per_hour']:.4f} at "
                      f"{c['price_per_hour']:g} per device-hour", highlight=False)


def _spot_line(sp: dict[str, Any]) -> str:
    """The report's spot economics (:func:`mutune.scaling.spot.spot_economics`) in a line."""
    if sp.get("error"):
        return f"spot (preemptions every {sp['mtbp_s']:g} s): not priced: {sp['error']}"
    verdict = {True: "spot pays", False: "spot does not pay", None: "no price to compare"}[
        sp.get("spot_pays")]
    return (f"spot (preemptions every {sp['mtbp_s']:g} s): checkpoint every "
            f"{sp['interval_s']:.1f} s (Young, C = {sp['checkpoint_s']:.3g} s); a hard "
            f"preemption loses {sp['expected_lost_s_per_hard_preemption']:.1f} s of work on "
            f"average, each costs {sp['recovery_s_per_preemption']:.1f} s to recover; "
            f"overhead {sp['overhead_fraction']:.1%} on {sp['trial_s']:.1f}-s trials → "
            f"{verdict} (effective {fmt_num(sp.get('spot_effective_price'))} against "
            f"{fmt_num(sp.get('on_demand_price'))} on demand)")


def _gate(console: Any, report: dict[str, Any]) -> None:
    """What the gate before the target run did, and what each hyperparameter matters."""
    from rich.markup import escape

    g = report.get("gate")
    if g:
        console.print(f"Gate (transfer.gate = {g.get('setting')}, at most "
                      f"{g.get('max_rounds')} round(s)): {g.get('outcome')}; "
                      f"{len(g.get('rounds') or [])} round(s), "
                      f"{fmt_num(g.get('gpu_hours'), '.6f')} GPU-h", highlight=False)
        for r in g.get("rounds") or []:
            acts = "; ".join(
                f"width {a['width']}" + (f" × depth {a['depth']}" if a.get("depth") else "")
                + ": " + (
                    "widen " + ", ".join(f"{n} ({v['side']}) → centre {v['new_center']:.4g}"
                                         + _widened_from(v)
                                         for n, v in a["hyperparameters"].items())
                    if a["action"] == "widen" else
                    f"+{a['added_seeds_per_point']} seed(s) per design point"
                    + (f", {a['added_seeds_at_center']} at the centre"
                       if a.get("added_seeds_at_center") else ""))
                for a in r["actions"])
            problems = ", ".join(f"{n} {v}" for n, v in sorted((r["problems"] or {}).items()))
            now = ", ".join(f"{n} {v}" for n, v in sorted((r["verdicts"] or {}).items()))
            console.print(f"  round {r['round']}: {problems} → {acts}; "
                          f"{r['trials']} trials, {fmt_num(r['gpu_hours'], '.6f')} GPU-h; "
                          f"now {now}", highlight=False)
        if g.get("warning"):
            console.print(f"  [yellow]warning:[/] {escape(g['warning'])}", highlight=False)
        if g.get("reason"):
            console.print(f"  [yellow]stopped:[/] {escape(g['reason'])}", highlight=False)
    pre = report.get("preflight") or {}
    for w in pre.get("warnings") or []:
        console.print(f"[yellow]pre-flight warning:[/] {escape(w)}", highlight=False)
    if pre.get("coord_check"):
        cc = pre["coord_check"]
        worst = max(cc["slopes"].values()) if cc["slopes"] else float("nan")
        console.print(f"Pre-flight coord check of the converted model (widths {cc['widths']}, "
                      f"{cc['steps']} steps): largest slope {worst:+.2f} ≤ {cc['tolerance']}",
                      highlight=False)
    imp = report.get("importance")
    if imp and imp.get("importances"):
        vals = ", ".join(f"{k} {v:.2f}" for k, v in imp["importances"].items())
        console.print(f"Importance at the proxies (fANOVA, width {imp.get('width')}"
                      + (f" × depth {imp['depth']}" if imp.get("depth") else "") + ", "
                      f"{imp.get('n_trials')} trials at step {imp.get('step')}): {vals}",
                      highlight=False)
    elif imp and imp.get("error"):
        console.print(f"Importance at the proxies: not computed ({escape(imp['error'])})",
                      highlight=False)


def _widened_from(v: dict[str, Any]) -> str:
    """`` (from …; unclipped …; best trial …)`` of a widen action's evidence, where
    recorded."""
    parts = [f"{label} {v[key]:.4g}" for key, label in (("from", "from"),
                                                        ("unclipped_center", "unclipped"),
                                                        ("best_trial", "best trial"))
             if isinstance(v.get(key), (int, float))]
    return f" ({'; '.join(parts)})" if parts else ""
