"""The dashboard: server-rendered HTML pages (Jinja2) over the results database, with figures
from :func:`mutune.services.report.build_report`; a browser logs in once with its token,
kept in an HttpOnly, SameSite=Strict cookie."""
from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from mutune.errors import StoreError

from .auth import bearer_token

__all__ = ["dashboard_router", "COOKIE"]

#: Name of the cookie holding a logged-in browser's token.
COOKIE = "mutune_token"
PAGE = 50
_COST_ROWS = (("proxy_gpu_hours", "proxy GPU-hours"), ("target_gpu_hours", "target GPU-hours"),
              ("total_gpu_hours", "total GPU-hours"), ("naive_gpu_hours", "naive GPU-hours"),
              ("saved_gpu_hours", "saved GPU-hours"), ("ettr", "ETTR"),
              ("total_money", "money spent"), ("saved_money", "money saved"))
_env_lock = threading.Lock()
_plot_lock = threading.Lock()  # pyplot is not thread-safe
_env: Any = None


def fmt(v: Any, spec: str = ".4g") -> str:
    """A number for a page: ``format(v, spec)``; ``n/a`` for None; a categorical name as it is."""
    if isinstance(v, bool) or v is None:
        return "n/a"
    if isinstance(v, str) and v.isidentifier():
        return v
    try:
        x = float(v)
    except Exception:  # not a number, or a missing template value (jinja2 Undefined)
        return "n/a"
    return format(x, spec) if math.isfinite(x) else str(x)


def pct(v: Any) -> str:
    """A fraction as a percentage with one decimal (``n/a`` for None)."""
    x = fmt(v, "")
    return "n/a" if x == "n/a" else fmt(float(x) * 100, ".1f") + " %"


def interval(iv: Any) -> str:
    """``[lo, hi]`` with 4 significant digits, or empty."""
    if not iv or any(v is None for v in iv):
        return ""
    return f"[{fmt(iv[0])}, {fmt(iv[1])}]"


def _templates() -> Any:
    global _env
    with _env_lock:
        if _env is None:
            from jinja2 import Environment, PackageLoader, select_autoescape
            _env = Environment(loader=PackageLoader("mutune.services.server", "templates"),
                               autoescape=select_autoescape(["html"]))
            _env.globals.update(fmt=fmt, pct=pct, interval=interval)
        return _env


def _page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_templates().get_template(name).render(**context), status_code=status)


def _project_of(request: Request) -> str | None:
    token = bearer_token(request.headers.get("authorization")) or request.cookies.get(COOKIE)
    if not token:
        return None
    return request.app.state.tokens.lookup(token)


def rung_groups(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """Scheduler decisions per (width, rung): counts by decision and the last cutoff (nats)."""
    width_of = {t["id"]: t["width"] for t in rows["trials"] if t["kind"] == "proxy"}
    live = {p["id"] for p in rows["proxy_sweeps"] if p.get("status") != "interrupted"}
    ps_of = {t["id"]: t["proxy_sweep_id"] for t in rows["trials"]}
    groups: dict[tuple[int, int], dict[str, Any]] = {}
    for e in rows["events"]:
        tid = e["trial_id"]
        if tid not in width_of or ps_of.get(tid) not in live:
            continue
        g = groups.setdefault((width_of[tid], e["milestone"]), {
            "width": width_of[tid], "milestone": e["milestone"], "judged": 0, "continue": 0,
            "stop": 0, "diverged": 0, "complete": 0, "cutoff": None})
        g["judged"] += 1
        if e["decision"] in ("continue", "stop", "diverged", "complete"):
            g[e["decision"]] += 1
        if e["cutoff"] is not None:
            g["cutoff"] = e["cutoff"]
    return [groups[k] for k in sorted(groups)]


def dashboard_router() -> APIRouter:
    """The dashboard's routes (HTML and PNG; not in the OpenAPI schema)."""
    r = APIRouter(include_in_schema=False)
    _login_routes(r)
    _sweep_pages(r)
    _plot_route(r)
    return r


def _owned_rows(request: Request, sweep_id: int) -> dict[str, Any] | Response:
    project = _project_of(request)
    if project is None:
        return RedirectResponse("/login", status_code=303)
    try:
        rows = request.app.state.store.sweep_rows(sweep_id)
    except StoreError:
        rows = None
    if rows is None or rows["sweep"]["project"] != project:
        return _page("login.html", 404, project=project,
                     error=f"no sweep with id {sweep_id} in project {project!r}")
    return rows


def _login_routes(r: APIRouter) -> None:
    @r.get("/login")
    async def login_form() -> HTMLResponse:
        return _page("login.html", project=None, error=None)

    @r.post("/login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        project = await run_in_threadpool(request.app.state.tokens.lookup, token) \
            if token else None
        if project is None:
            return _page("login.html", 401, project=None, error="invalid or revoked token")
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return resp

    @r.get("/logout")
    async def logout() -> Response:
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE)
        return resp


def _sweep_pages(r: APIRouter) -> None:
    @r.get("/")
    async def sweeps(request: Request, offset: int = 0) -> Response:
        store = request.app.state.store
        offset = max(int(offset), 0)

        def load() -> Response:
            project = _project_of(request)
            if project is None:
                return RedirectResponse("/login", status_code=303)
            items, total = store.sweeps_page(project=project, offset=offset, limit=PAGE)
            costs = store.sweep_costs()
            for s in items:
                s["cost"] = costs.get(s["id"], {})
            return _page("sweeps.html", project=project, sweeps=items, total=total,
                         prev_offset=max(offset - PAGE, 0) if offset else None,
                         next_offset=offset + PAGE if offset + PAGE < total else None)
        return await run_in_threadpool(load)

    @r.get("/sweeps/{sweep_id}")
    async def sweep(request: Request, sweep_id: int) -> Response:
        from mutune.services.report.data import build_report
        from mutune.services.report.summary import summarize

        def load() -> Response:
            rows = _owned_rows(request, sweep_id)
            if isinstance(rows, Response):
                return rows
            report = build_report(rows)
            return _page("sweep.html", project=rows["sweep"]["project"], sweep=rows["sweep"],
                         report=report, summary=summarize(report), rungs=rung_groups(rows),
                         has_events=bool(rows["events"]), has_rules=bool(report["rules"]),
                         cost_rows=_COST_ROWS)
        return await run_in_threadpool(load)


def _plot_route(r: APIRouter) -> None:
    @r.get("/sweeps/{sweep_id}/{plot}.png")
    async def plot(request: Request, sweep_id: int, plot: str) -> Response:
        from mutune.services.report.data import build_report
        from mutune.services.report.plots import plot_loss_vs_lr, plot_transfer

        if plot not in ("loss_vs_lr", "transfer"):
            return Response(status_code=404)

        def draw() -> Response:
            rows = _owned_rows(request, sweep_id)
            if isinstance(rows, Response):
                return rows
            with _plot_lock, tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "plot.png"
                if plot == "loss_vs_lr":
                    plot_loss_vs_lr(rows, path)
                else:
                    report = build_report(rows)
                    if not report["rules"]:
                        return Response(status_code=404)
                    plot_transfer(report, path)
                return Response(path.read_bytes(), media_type="image/png",
                                headers={"Cache-Control": "private, max-age=5"})
        return await run_in_threadpool(draw)
