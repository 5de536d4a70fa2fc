"""Import Ray Tune while a local Ray cluster starts, so the driver's two start-up waits overlap.

``ray.init`` on a local cluster spends most of its time waiting for the GCS and raylet
processes it started; ``import ray.tune`` (Ray Tune, the parts of Ray Train it shares,
pandas, pyarrow) comes right after it, before the first trial can start.
:func:`importing_ahead` runs that import in a thread while ``ray.init`` runs in the caller's
(the gain is in ``benchmarks/results/``, sweep ETTR).

Why the two threads cannot deadlock: Python's import locks are per module, and two threads
deadlock only when each is importing a module the other's chain needs. The modules
``ray.init`` imports lazily and those ``import ray.tune`` imports overlap in a handful
(:data:`SHARED`); they are imported in the calling thread before the other starts, so the
threads then import disjoint modules. A failure in the thread is dropped: the sweep's own
``import ray.tune`` raises it where it belongs.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["importing_ahead", "SHARED"]

#: modules both ``ray.init`` (a local cluster) and ``import ray.tune`` import (checked on
#: the Ray releases in :data:`mutune._internals.VERIFIED`)
SHARED = ("argparse", "gettext", "ray._common.usage.usage_lib", "ray.dashboard")


def _import_quietly(name: str) -> None:
    with contextlib.suppress(Exception):
        importlib.import_module(name)


@contextlib.contextmanager
def importing_ahead(name: str = "ray.tune") -> Iterator[None]:
    """Import ``name`` in a background thread for the duration of the block, then wait for
    it. Nothing happens when ``name`` is imported already."""
    if name in sys.modules:
        yield
        return
    for shared in SHARED:
        _import_quietly(shared)
    thread = threading.Thread(target=_import_quietly, args=(name,), daemon=True,
                              name="mutune-import-ahead")
    thread.start()
    try:
        yield
    finally:
        thread.join()
