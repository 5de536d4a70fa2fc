"""Remote checkpoint storage (``ray.storage``): a shared folder or a pyarrow filesystem URI."""
from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from mutune.errors import SearchError

__all__ = ["CheckpointStore", "Uploader", "open_filesystem", "shown", "safe_name", "LATEST"]

#: The pointer file naming the newest complete upload.
LATEST = "LATEST"
_CHUNK = 8 << 20
_KEEP = 2   # the newest upload and the one before it


def open_filesystem(storage: str) -> tuple[Any, str]:
    """``(pyarrow filesystem, root path)`` of ``storage``; SearchError if pyarrow can't open it."""
    import pyarrow.fs as pafs

    if "://" not in storage:
        return pafs.LocalFileSystem(), str(Path(storage).expanduser().resolve())
    try:
        fs, root = pafs.FileSystem.from_uri(storage)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad URI
        raise SearchError(f"ray.storage = {shown(storage)!r}: pyarrow cannot open it: "
                          f"{exc}") from exc
    return fs, root.rstrip("/")


def shown(storage: str) -> str:
    """``storage`` without the credentials a URI may carry (``s3://key:secret@bucket``)."""
    head, sep, rest = storage.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{head}://***@{rest.split('@', 1)[1]}"
    return storage


def safe_name(name: str) -> str:
    """``name`` as one file name: characters other than letters, digits, ``-_.`` become ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"


class CheckpointStore:
    """One run's checkpoints and logs in remote storage (layout: docs/architecture.md §4.6)."""

    def __init__(self, storage: str, run: str) -> None:
        self.storage, self.run = storage, run
        self.fs, root = open_filesystem(storage)
        self.root = f"{root}/{safe_name(run)}"
        self.local = self.fs.type_name == "local"

    def _dir(self, key: str) -> str:
        return f"{self.root}/{safe_name(key)}"

    def _write(self, path: str, src: Any) -> None:
        """Copy the binary stream ``src`` to ``path``: complete or not at all."""
        parent = path.rsplit("/", 1)[0]
        if self.local:       # object stores have no folders to make
            self.fs.create_dir(parent, recursive=True)
        target = f"{parent}/.{uuid.uuid4().hex}.tmp" if self.local else path
        try:
            with self.fs.open_output_stream(target) as out:
                shutil.copyfileobj(src, out, _CHUNK)
            if self.local:
                self.fs.move(target, path)     # rename(2): atomic
        except BaseException:
            if self.local:
                with contextlib.suppress(Exception):
                    self.fs.delete_file(target)
            raise

    def put(self, key: str, step: int, state_file: str | os.PathLike[str],
            owner: str = "") -> int:
        """Upload ``state_file`` as ``key``'s ``step``, point ``LATEST`` at it; bytes uploaded."""
        from mutune.search.trial.checkpoint import STATE_FILE

        base = self._dir(key)
        with open(state_file, "rb") as src:
            self._write(f"{base}/step_{int(step):09d}/{STATE_FILE}", src)
        import io

        self._write(f"{base}/{LATEST}", io.BytesIO(f"{int(step)} {owner}".strip().encode()))
        for old in self.steps(key)[:-_KEEP]:
            with contextlib.suppress(Exception):
                self.fs.delete_dir(f"{base}/step_{old:09d}")
        return os.path.getsize(state_file)

    def steps(self, key: str) -> list[int]:
        """Uploaded checkpoint steps of ``key``, ascending (complete or not)."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self._dir(key), allow_not_found=True)
        out = []
        for info in self.fs.get_file_info(sel):
            name = info.path.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("step_") and name[5:].isdigit():
                out.append(int(name[5:]))
        return sorted(out)

    def latest_entry(self, key: str) -> tuple[int, str] | None:
        """``(step, owner)`` as ``LATEST`` names them for ``key`` (None: nothing uploaded)."""
        try:
            with self.fs.open_input_stream(f"{self._dir(key)}/{LATEST}") as fh:
                step, _, owner = fh.read().decode().strip().partition(" ")
                return int(step), owner
        except (FileNotFoundError, OSError, ValueError):
            return None

    def entry_at_most(self, key: str, at_most: int | None = None) -> tuple[int, str] | None:
        """``(step, owner)`` of ``key``'s newest upload ≤ ``at_most`` (None: ``LATEST``'s)."""
        from mutune.search.trial.checkpoint import STATE_FILE

        got = self.latest_entry(key)
        if got is None or at_most is None or got[0] <= at_most:
            return got
        import pyarrow.fs as pafs

        for step in reversed([s for s in self.steps(key) if s <= at_most]):
            info = self.fs.get_file_info(f"{self._dir(key)}/step_{step:09d}/{STATE_FILE}")
            if info.type != pafs.FileType.NotFound:
                return step, got[1]
        return None

    def latest(self, key: str) -> int | None:
        """The step ``LATEST`` names for ``key`` (None: nothing uploaded)."""
        got = self.latest_entry(key)
        return None if got is None else got[0]

    def fetch(self, key: str, dest: str | os.PathLike[str], owner: str | None = None,
              at_most: int | None = None) -> tuple[int, Path] | None:
        """Download ``key``'s latest checkpoint (at or before ``at_most``) into ``dest``.

        Returns:
            ``(step, folder)``, or None when nothing is uploaded or another ``owner`` wrote it.
        Raises:
            SearchError: ``LATEST`` names a checkpoint that cannot be read."""
        got = self.entry_at_most(key, at_most)
        if got is None or (owner is not None and got[1] != owner):
            return None
        return got[0], self.download(key, got[0], dest)

    def download(self, key: str, step: int, dest: str | os.PathLike[str]) -> Path:
        """Download ``key``'s checkpoint ``step`` into ``dest``; SearchError if unreadable."""
        from mutune.search.trial.checkpoint import STATE_FILE

        folder = Path(dest)
        folder.mkdir(parents=True, exist_ok=True)
        src = f"{self._dir(key)}/step_{step:09d}/{STATE_FILE}"
        try:
            with self.fs.open_input_stream(src) as fh, open(folder / STATE_FILE, "wb") as out:
                shutil.copyfileobj(fh, out, _CHUNK)
        except (FileNotFoundError, OSError) as exc:
            raise SearchError(f"remote checkpoint {shown(self.storage)}/{self.run}/{key} step "
                              f"{step} cannot be read: {exc}") from exc
        return folder

    def drop(self, key: str) -> None:
        """Delete trial ``key``'s uploaded checkpoints (its log stays)."""
        base = self._dir(key)
        with contextlib.suppress(Exception):
            self.fs.delete_file(f"{base}/{LATEST}")
        for step in self.steps(key):
            with contextlib.suppress(Exception):
                self.fs.delete_dir(f"{base}/step_{step:09d}")

    def put_log(self, key: str, local_file: str | os.PathLike[str]) -> None:
        """Upload the trial's log record (:mod:`~.logs`) beside its checkpoints."""
        with open(local_file, "rb") as src:
            self._write(f"{self._dir(key)}/log.json", src)

    def get_log(self, key: str) -> bytes | None:
        """The trial's uploaded log record, or None."""
        try:
            with self.fs.open_input_stream(f"{self._dir(key)}/log.json") as fh:
                return fh.read()
        except (FileNotFoundError, OSError):
            return None


class Uploader:
    """Background upload of one trial's newest checkpoint (docs/architecture.md §4.6)."""

    def __init__(self, store: CheckpointStore, key: str, *, min_interval_s: float = 0.0,
                 owner: str = "") -> None:
        self.store, self.key, self.min_interval_s = store, key, float(min_interval_s)
        self.owner = owner
        self.upload_s, self.uploads, self.uploaded_step = 0.0, 0, None
        self.error: str | None = None
        self._pending: tuple[int, str] | None = None
        self._busy = False
        self._flushing = False
        self._last = float("-inf")
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"mutune-upload-{key}")
        self._thread.start()

    def submit(self, step: int, state_file: str | os.PathLike[str]) -> None:
        """Queue checkpoint ``step`` (replacing a queued older one)."""
        with self._cv:
            self._pending = (int(step), str(state_file))
            self._cv.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or uploading; returns False on ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._flushing = True
            self._cv.notify_all()
            try:
                while self._pending is not None or self._busy:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cv.wait(left)
                return True
            finally:
                self._flushing = False

    def close(self) -> None:
        """Stop the thread (what is queued is dropped: :meth:`flush` first to keep it)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed and (self._pending is None or (
                        not self._flushing
                        and time.monotonic() - self._last < self.min_interval_s)):
                    wait = (None if self._pending is None else
                            self.min_interval_s - (time.monotonic() - self._last))
                    self._cv.wait(wait)
                if self._closed:
                    return
                step, path = self._pending
                self._pending, self._busy = None, True
            t0 = time.perf_counter()
            try:
                self.store.put(self.key, step, path, self.owner)
                ok, err = True, None
            except Exception as exc:  # noqa: BLE001 - the local checkpoint stands
                ok, err = False, f"upload of step {step} failed: {exc}"
            took = time.perf_counter() - t0
            with self._cv:
                self.upload_s += took
                self._last = time.monotonic()
                if ok:
                    self.uploads += 1
                    self.uploaded_step = step
                else:
                    self.error = err
                self._busy = False
                self._cv.notify_all()
