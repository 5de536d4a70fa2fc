"""Bearer tokens of the search server: ``secrets.token_urlsafe(32)``, stored as their sha256 hex
digest only, the plaintext shown once; a valid token's project is cached ``token_cache_s``."""
from __future__ import annotations

import hashlib
import secrets
import threading
import time
from typing import Any

__all__ = ["new_token", "token_digest", "create_token", "TokenCache", "bearer_token"]


def token_digest(token: str) -> str:
    """sha256 hex digest (64 characters) of ``token``'s UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh random token and its digest: (plaintext, sha256 hex)."""
    token = secrets.token_urlsafe(32)
    return token, token_digest(token)


def create_token(store: Any, project: str) -> tuple[int, str]:
    """Create a token for ``project`` in ``store``; returns (token row id, plaintext).

    Raises:
        StoreError: empty project name."""
    token, digest = new_token()
    return store.token_added(project, digest), token


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class TokenCache:
    """digest → (project, expiry) for ``ttl_s`` seconds; only valid tokens are cached."""

    def __init__(self, store: Any, ttl_s: float) -> None:
        self._store, self._ttl = store, ttl_s
        self._hits: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def cached(self, token: str) -> str | None:
        hit = self._hits.get(token_digest(token))
        if hit is not None and hit[1] > time.monotonic():
            return hit[0]
        return None

    def lookup(self, token: str) -> str | None:
        """The project of ``token`` (database on a miss), or None if unknown or revoked."""
        digest = token_digest(token)
        hit = self._hits.get(digest)
        if hit is not None and hit[1] > time.monotonic():
            return hit[0]
        project = self._store.token_project(digest)
        if project is not None and self._ttl > 0:
            with self._lock:
                self._hits[digest] = (project, time.monotonic() + self._ttl)
        return project
