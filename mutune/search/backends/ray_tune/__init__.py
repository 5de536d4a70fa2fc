"""The Ray Tune backend (imports Ray): cluster, run, the two adapters, the driver-side book.

* :mod:`.cluster` — a local cluster or ``ray.address``; slots; Ray Tune's loggers;
* :mod:`.run` — one Ray Tune run: the driver, the book, the adapters and the tuner;
* :mod:`.scheduler_adapter`, :mod:`.searcher_adapter` — Ray's hooks ⇄ the driver loop
  (translation only);
* :mod:`.callback` — the :class:`~.callback.SweepBook` that records every trial;
  :mod:`.retention` — checkpoints kept on disk; :mod:`.zombies` — trials that hold devices
  and report nothing; :mod:`.cancel` — ``mutune cancel`` as a Ray Tune stopper;
* :mod:`.backend` — :class:`~.backend.RayBackend`, Ray as the sweep's backend.

Ray Tune's private state (the kept actors) is used only through :mod:`mutune._internals`.

Import the submodule you need; this package imports nothing.
"""
