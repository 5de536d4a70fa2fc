"""The main job's stages (proxy sweeps → transfer → target → ledger) and the jobs built from
them: resume, dry run, the coord and transfer checks. The stages never import the results
store; the caller hands them a recorder."""
from mutune.pipeline.main_job import finish_sweep, run_pipeline
from mutune.pipeline.sweep import PipelineResult, ProxyResult, SweepRun, open_sweep

__all__ = ["run_pipeline", "finish_sweep", "open_sweep", "SweepRun", "ProxyResult",
           "PipelineResult"]
