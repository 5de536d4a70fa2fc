"""The search server (docs/architecture.md §8): the FastAPI app factory and the API v1 routes
under ``/api/v1`` (every one but ``health`` needs ``Authorization: Bearer <token>``; a sweep
of another project answers 404). OpenAPI at ``/docs``; the dashboard at ``/``."""
from __future__ import annotations

import json
import logging
import threading
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from mutune._json import json_safe
from mutune.errors import ConfigError, StoreError

from .auth import TokenCache, bearer_token
from .settings import ServerSettings

log = logging.getLogger("mutune.server")

__all__ = ["create_app", "API_PREFIX"]

API_PREFIX = "/api/v1"
_ENDED = ("completed", "failed", "cancelled")


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(json_safe(data), separators=(",", ":")).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


class _BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes (Content-Length, or counted
    streaming)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                return await self._reject(send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message
        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._reject(send)

    async def _reject(self, send: Any) -> None:
        body = json.dumps({"detail": f"request body over the limit of {self.limit} bytes "
                                     "(settings.max_body_bytes)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class _StatusCache:
    """sweep id → (expiry, project, serialized status); ended sweeps never expire, and refreshes are
    single-flight (others get the previous entry meanwhile)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl = ttl_s
        self._rows: dict[int, tuple[float, str | None, bytes]] = {}
        self._lock = threading.Lock()
        self.loading: set[int] = set()

    def get(self, sweep_id: int, *, stale_ok: bool = False
            ) -> tuple[str | None, bytes] | None:
        hit = self._rows.get(sweep_id)
        if hit is None or (hit[0] < time.monotonic() and not stale_ok):
            return None
        return hit[1], hit[2]

    def put(self, sweep_id: int, status: dict[str, Any]) -> bytes:
        body = json.dumps(json_safe(status), separators=(",", ":")).encode()
        ttl = float("inf") if status["status"] in _ENDED else self.ttl
        with self._lock:
            self._rows[sweep_id] = (time.monotonic() + ttl, status["project"], body)
        return body

    def drop(self, sweep_id: int) -> None:
        with self._lock:
            self._rows.pop(sweep_id, None)


async def _project(request: Request) -> str:
    """The dependency every authenticated route takes: the token's project, or 401."""
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <token>' "
                                 "(create one with `mutune token create --project NAME`)",
                            headers={"WWW-Authenticate": "Bearer"})
    tokens: TokenCache = request.app.state.tokens
    project = tokens.cached(token)
    if project is None:
        project = await run_in_threadpool(tokens.lookup, token)
    if project is None:
        raise HTTPException(401, "invalid or revoked token",
                            headers={"WWW-Authenticate": "Bearer"})
    return project


def _owned(store: Any, sweep_id: int, project: str) -> dict[str, Any]:
    """The sweep's summary if ``project`` owns it; 404 otherwise (unknown or not yours)."""
    try:
        summary = store.sweep_summary(sweep_id)
    except StoreError:
        summary = None
    if summary is None or summary["project"] != project:
        raise HTTPException(404, f"no sweep with id {sweep_id} in project {project!r}")
    return summary


def _routes() -> APIRouter:
    r = APIRouter(prefix=API_PREFIX)
    _queue_routes(r)
    _sweep_routes(r)
    _action_routes(r)
    return r


def _queue_routes(r: APIRouter) -> None:
    @r.get("/health", summary="Liveness and queue length (no token needed)")
    async def health(request: Request) -> Response:
        store = request.app.state.store
        page, queued = await run_in_threadpool(lambda: store.sweeps_page(
            project=None, offset=0, limit=0))
        worker = request.app.state.worker
        return _json({"status": "ok", "sweeps": queued,
                      "running": None if worker is None else worker.current,
                      "worker": worker is not None})

    @r.post("/sweeps", status_code=201, summary="Submit a sweep config (YAML or JSON body)",
            responses={201: {"description": "queued: {id, status, project}"},
                       422: {"description": "config error: field, value, rule"},
                       413: {"description": "body over the size limit"}})
    async def submit(request: Request, project: str = Depends(_project)) -> Response:
        from .submission import parse_submission

        app = request.app
        body = await request.body()
        try:
            cfg = parse_submission(body, request.headers.get("content-type"),
                                   app.state.settings.data_roots,
                                   app.state.settings.ray_address)
        except ConfigError as err:
            return _json({"detail": {"message": str(err), "errors": err.errors}}, 422)
        data = cfg.model_dump(mode="json")
        sweep_id = await run_in_threadpool(lambda: app.state.store.sweep_queued(
            data, project=project, seed=cfg.seed, name=cfg.name))
        if app.state.worker is not None:
            app.state.worker.notify()
        return _json({"id": sweep_id, "status": "queued", "project": project}, 201,
                     {"Location": f"{API_PREFIX}/sweeps/{sweep_id}"})

    @r.get("/sweeps", summary="List the project's sweeps, newest first (paginated)")
    async def list_sweeps(request: Request, project: str = Depends(_project),
                          offset: int = Query(0, ge=0),
                          limit: int = Query(50, ge=1, le=500)) -> Response:
        items, total = await run_in_threadpool(lambda: request.app.state.store.sweeps_page(
            project=project, offset=offset, limit=limit))
        return _json({"items": items, "total": total, "offset": offset, "limit": limit})


def _sweep_routes(r: APIRouter) -> None:
    @r.get("/sweeps/{sweep_id}", summary="A sweep's status, progress and best so far")
    async def get_sweep(sweep_id: int, request: Request,
                        project: str = Depends(_project)) -> Response:
        cache: _StatusCache = request.app.state.status_cache
        hit = cache.get(sweep_id)
        if hit is None and sweep_id in cache.loading:
            hit = cache.get(sweep_id, stale_ok=True)
        if hit is None:
            store = request.app.state.store

            def load() -> bytes:
                try:
                    return cache.put(sweep_id, store.sweep_progress(sweep_id))
                except StoreError as err:  # the previous status, if any, is served meanwhile
                    log.warning("sweep %s: reading its status failed: %s", sweep_id, err)
                    return b""
            cache.loading.add(sweep_id)
            try:
                await run_in_threadpool(load)
            finally:
                cache.loading.discard(sweep_id)
            hit = cache.get(sweep_id, stale_ok=True) or (None, b"")
        if hit[0] != project or not hit[1]:
            raise HTTPException(404, f"no sweep with id {sweep_id} in project {project!r}")
        return Response(hit[1], media_type="application/json")

    @r.get("/sweeps/{sweep_id}/trials", summary="Every trial of a sweep")
    async def trials(sweep_id: int, request: Request,
                     project: str = Depends(_project)) -> Response:
        store = request.app.state.store

        def load() -> list[dict[str, Any]]:
            _owned(store, sweep_id, project)
            return store.sweep_trials(sweep_id)
        return _json({"items": await run_in_threadpool(load)})


def _action_routes(r: APIRouter) -> None:
    @r.get("/sweeps/{sweep_id}/report", summary="report.json of an ended sweep")
    async def report(sweep_id: int, request: Request,
                     project: str = Depends(_project)) -> Response:
        from mutune.services.report.data import build_report

        store = request.app.state.store

        def load() -> dict[str, Any]:
            summary = _owned(store, sweep_id, project)
            if summary["status"] != "completed":
                raise HTTPException(409, f"sweep {sweep_id} is {summary['status']}: the report "
                                         "is ready when it has completed")
            return build_report(store.sweep_rows(sweep_id))
        return _json(await run_in_threadpool(load))

    @r.post("/sweeps/{sweep_id}/cancel", summary="Cancel a queued or running sweep")
    async def cancel(sweep_id: int, request: Request,
                     project: str = Depends(_project)) -> Response:
        app = request.app
        store, worker = app.state.store, app.state.worker

        def work() -> dict[str, Any]:
            summary = _owned(store, sweep_id, project)
            if summary["status"] == "queued" and store.cancel_queued(sweep_id):
                return {"id": sweep_id, "status": "cancelled"}
            if summary["status"] in ("queued", "running") and worker is not None \
                    and worker.cancel(sweep_id):
                return {"id": sweep_id, "status": "cancelling"}
            now = store.sweep_summary(sweep_id)["status"]
            raise HTTPException(409, f"sweep {sweep_id} is {now}: only a queued or running "
                                     "sweep can be cancelled")
        out = await run_in_threadpool(work)
        app.state.status_cache.drop(sweep_id)
        return _json(out)


def _config_schema_openapi(app: FastAPI) -> Any:
    """``app.openapi`` with the sweep config's JSON schema as ``POST /api/v1/sweeps``'s body."""
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        from fastapi.openapi.utils import get_openapi

        from mutune.config import SweepConfig

        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)
        config = SweepConfig.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(config.pop("$defs", {}))
        components["SweepConfig"] = config
        ref = {"$ref": "#/components/schemas/SweepConfig"}
        schema["paths"][f"{API_PREFIX}/sweeps"]["post"]["requestBody"] = {
            "required": True, "content": {"application/json": {"schema": ref},
                                          "application/yaml": {"schema": ref}}}
        app.openapi_schema = schema
        return schema
    return openapi


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The search server's ASGI app; its lifespan opens (and migrates) ``settings.db`` and, with
    ``settings.run_worker``, starts the worker (default settings: ``MUTUNE_*`` env vars)."""
    settings = settings or ServerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from mutune.services.store import Store
        from .worker import Worker

        store = await run_in_threadpool(Store.open, settings.db)
        app.state.store = store
        app.state.tokens = TokenCache(store, settings.token_cache_s)
        app.state.status_cache = _StatusCache(settings.status_cache_s)
        app.state.worker = None
        if settings.run_worker:
            worker = Worker(store, db=settings.db, out_dir=settings.out_dir,
                            ray_address=settings.ray_address, poll_s=settings.poll_s)
            await run_in_threadpool(worker.start)
            app.state.worker = worker
        try:
            yield
        finally:
            if app.state.worker is not None:
                await run_in_threadpool(app.state.worker.stop)
            store.close()

    app = FastAPI(title="mutune search server", version="1",
                  description="Submit μP proxy sweeps, follow them, read their reports.",
                  lifespan=lifespan)
    app.state.settings = settings
    app.include_router(_routes())

    from .dashboard import dashboard_router
    app.include_router(dashboard_router())

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    app.add_middleware(_BodyLimit, limit=settings.max_body_bytes)
    app.openapi = _config_schema_openapi(app)  # type: ignore[method-assign]
    return app
