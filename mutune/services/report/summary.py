"""The first screen of a report: what was transferred and how sure, whether the target beat its
proxies and its prediction, what it cost against the naive sweep, and what needs attention —
every line read from ``report.json`` (:func:`~mutune.services.report.data.build_report`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mutune.services.report.formatting import fmt_interval, fmt_num, fmt_share

__all__ = ["Summary", "summarize", "render_summary"]

_HEALTHY = ("stable", "drifting", "sp_corrected", "per_choice", "not_transferred")


@dataclass(frozen=True)
class Summary:
    """The summary's lines: ``answer`` (one line per topic) and ``attention`` (one per item)."""
    title: str
    answer: list[str]
    attention: list[str]


def _rule_part(rule: dict[str, Any]) -> str:
    stake = rule.get("loss_at_stake")
    at_stake = "" if not stake else f", {fmt_share(stake['relative'])} of the loss at stake"
    return (f"{rule['hyperparameter']} = {fmt_num(rule.get('transferred_value'))} "
            f"({rule.get('verdict', '—')}{at_stake})")


def _needs_attention(rule: dict[str, Any]) -> bool:
    """An unhealthy verdict, or a drift whose extrapolated value puts more than the tolerance
    of the loss at stake."""
    if rule.get("verdict") not in _HEALTHY:
        return True
    stake, tol = rule.get("loss_at_stake"), rule.get("loss_tolerance")
    return rule.get("verdict") == "drifting" and bool(stake) and tol is not None \
        and stake["relative"] > tol


def _unhealthy(rule: dict[str, Any]) -> str:
    hp, reason = rule["hyperparameter"], str(rule.get("reason") or "")
    return f"{hp} is {rule.get('verdict')}: {reason.removeprefix(hp + ': ')}"


def _best_proxy(report: dict[str, Any]) -> dict[str, Any] | None:
    tested = [p for p in report["proxies"] if p.get("best_test_loss") is not None]
    return min(tested, key=lambda p: p["best_test_loss"]) if tested else None


def _target_line(report: dict[str, Any], attention: list[str]) -> str | None:
    tg = report.get("target")
    if not tg or tg.get("val_loss") is None:
        return None
    loss, what = (tg["test_loss"], "test") if tg.get("test_loss") is not None else \
        (tg["val_loss"], "validation")
    line = f"target (width {tg['width']}): {what} loss {fmt_num(loss)}"
    best = _best_proxy(report)
    if best is not None and what == "test":
        gap = (loss - best["best_test_loss"]) / best["best_test_loss"]
        line += (f", {abs(100 * gap):.2g} % {'below' if gap < 0 else 'above'} the best "
                 f"proxy's {fmt_num(best['best_test_loss'])} (width {best['width']})")
        if gap >= 0:
            attention.append("the target is no better than its best proxy on test loss")
    iv = tg.get("predicted_val_loss_interval")
    if tg.get("predicted_val_loss") is not None and iv and None not in iv:
        inside = iv[0] <= tg["val_loss"] <= iv[1]
        line += (f"; validation {fmt_num(tg['val_loss'])} "
                 f"{'inside' if inside else 'outside'} its prediction "
                 f"{fmt_num(tg['predicted_val_loss'])} {fmt_interval(iv)}")
        if not inside:
            attention.append("the target's loss lies outside its predicted interval")
    return line


def _cost_line(report: dict[str, Any], attention: list[str]) -> str | None:
    c = report.get("cost") or {}
    if c.get("total_gpu_hours") is None or c.get("naive_gpu_hours") is None:
        return None
    line = (f"cost: {fmt_num(c['total_gpu_hours'], '.4g')} GPU-h against "
            f"{fmt_num(c['naive_gpu_hours'], '.4g')} for a naive sweep at the target's size")
    if c.get("saved_fraction") is not None:
        line += f": saved {fmt_num(c['saved_fraction'], '.1%')}"
        if c.get("ideal_saved_fraction") is not None:
            line += f" (ideal {fmt_num(c['ideal_saved_fraction'], '.1%')})"
        if c["saved_fraction"] < 0:
            attention.append("the transfer cost more GPU-hours than a naive sweep")
    if c.get("saved_flops_fraction") is not None:
        line += (f"; in model FLOPs saved {fmt_num(c['saved_flops_fraction'], '.1%')}"
                 f" (ideal {fmt_num(c.get('ideal_saved_flops_fraction'), '.1%')})")
    return line


def summarize(report: dict[str, Any]) -> Summary:
    """The summary of ``report`` (report.json's dict)."""
    attention: list[str] = []
    if report["status"] != "completed":
        attention.append(f"the sweep ended {report['status']}: {report.get('reason') or ''}")
    answer = []
    rules = report.get("rules") or []
    if rules:
        answer.append("transferred: " + ", ".join(_rule_part(r) for r in rules))
        attention += [_unhealthy(r) for r in rules if _needs_attention(r)]
    for line in (_target_line(report, attention), _cost_line(report, attention)):
        if line:
            answer.append(line)
    gate = report.get("gate") or {}
    if gate.get("warning"):
        attention.append(str(gate["warning"]))
    attention += [f"pre-flight: {w}" for w in (report.get("preflight") or {}).get("warnings")
                  or []]
    watch = ((report.get("target") or {}).get("watch") or {}).get("note")
    if watch:
        attention.append(str(watch))
    return Summary(f"mutune sweep {report['sweep_id']} ({report['name']}): {report['status']}",
                   answer, attention)


def render_summary(report: dict[str, Any], console: Any) -> None:
    """Print :func:`summarize`'s lines on a rich ``console`` (free text escaped)."""
    from rich.markup import escape

    s = summarize(report)
    console.print(f"[bold]{escape(s.title)}[/]", highlight=False)
    for line in s.answer:
        console.print(f"  {escape(line)}", highlight=False)
    if s.attention:
        console.print("[yellow]needs attention:[/]", highlight=False)
        for item in s.attention:
            console.print(f"  - {escape(item)}", highlight=False)
    else:
        console.print("nothing needs attention", highlight=False)
    console.print(f"full tables: mutune report {report['sweep_id']} --full", highlight=False)
