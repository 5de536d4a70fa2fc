"""The main job's stages, one room: proxy sweeps → transfer → target → ledger, and the jobs
built from them (resume, dry run, the coord and transfer checks).

* :mod:`.sweep` — :func:`open_sweep` and the :class:`SweepRun` every stage takes;
* :mod:`.proxy_stage` — one sweep per proxy width, its best trial and optimum;
* :mod:`.transfer_stage` — per-width optima → transfer rules → the target's settings;
* :mod:`.target_stage` — the loss law's prediction, the budget's admission, the target run;
* :mod:`.ledger_stage` — measured FLOPs and peaks into :mod:`mutune.scaling.ledger`;
* :mod:`.main_job` — :func:`run_pipeline`, the stages in order;
* :mod:`.resume` — the one recovery path (``mutune resume`` and a restarted server);
* :mod:`.dry_run` — ``mutune run --dry-run``; :mod:`.preflight` — coord and transfer checks;
* :mod:`.provenance` — what a rerun needs to be trusted;
* :mod:`.recording` — what the stages record (:class:`Recorder`), and a memory recorder.

The stages never import the results store; the caller hands them a recorder.
"""
from mutune.pipeline.main_job import finish_sweep, run_pipeline
from mutune.pipeline.sweep import PipelineResult, ProxyResult, SweepRun, open_sweep

__all__ = ["run_pipeline", "finish_sweep", "open_sweep", "SweepRun", "ProxyResult",
           "PipelineResult"]
