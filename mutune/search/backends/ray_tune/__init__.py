"""The Ray Tune backend (imports Ray): cluster, run, the two adapters, the driver-side book.

* :mod:`.cluster` — a local cluster or ``ray.address``; slots; Ray Tune's loggers;
* :mod:`.run` — one Ray Tune run: the driver, the book, the adapters and the tuner;
* :mod:`.scheduler_adapter`, :mod:`.searcher_adapter` — Ray's hooks ⇄ the driver loop
  (translation only);
* :mod:`.callback` — the :class:`~.callback.SweepBook` that records every trial;
  :mod:`.retention` — checkpoints kept on disk; :mod:`.zombies` — trials that hold devices
  and report nothing; :mod:`.cancel` — ``mutune cancel`` as a Ray Tune stopper;
* :mod:`.backend` — :class:`~.backend.RayBackend`, Ray as the sweep's backend;
* :mod:`.actor_keep`, :mod:`.idle_workers` — a slot's actor kept between trials, and trial
  actors started in the worker processes Ray already runs idle.

Import the submodule you need; this package imports nothing.
"""
