"""The trained target model, kept in ``<out_dir>/target_model-sweep<ID>/`` (``model.pt``,
``base_shapes.bsh``, ``model.json``), and how it loads (docs/architecture.md §4.4)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mutune.errors import SearchError
from mutune.pipeline.depth_tasks import target_task
from mutune.pipeline.target_loader import META_FILE, MODEL_FILE

__all__ = ["MODEL_DIR", "MODEL_FILE", "META_FILE", "model_dir_name", "keep_target_model",
           "release_checkpoints"]

MODEL_DIR = "target_model"


def model_dir_name(sweep_id: int) -> str:
    return f"{MODEL_DIR}-sweep{int(sweep_id)}"


def keep_target_model(run: Any, trec: Any, target_hp: dict[str, float], *,
                      seed: int, provenance: dict[str, Any] | None = None) -> Path:
    """Write the target's trained model into ``run.out_dir / model_dir_name(sweep_id)``, replacing
    that sweep's folder atomically; returns the folder (absolute).

    Raises:
        SearchError: the trial left no checkpoint at its last step."""
    import torch

    from mutune.search.trial.checkpoint import latest_checkpoint, load_trial_state

    folder = latest_checkpoint(getattr(trec, "trial_dir", None))
    state = load_trial_state(folder) if folder else None
    steps = run.config.target_steps
    if state is None or int(state["step"]) != steps:
        raise SearchError(f"the target run (trial {trec.trial_id}) left no checkpoint at its "
                          f"last step {steps} (found: {folder})")
    if provenance is None:
        from mutune.pipeline.provenance import collect_provenance
        provenance = collect_provenance({"fingerprint": run.task.data.fingerprint})
    last = trec.reports[-1] if trec.reports else {}
    meta = {"format": 1, "sweep_id": run.sweep_id, "trial_id": trec.trial_id,
            "width": run.config.target.width, "depth": run.config.target_depth,
            "hyperparameters": dict(target_hp),
            "seed": int(seed), "step": steps, "val_loss": last.get("val_loss"),
            "test_loss": last.get("test_loss"), "config": run.config.model_dump(mode="json"),
            "provenance": provenance}
    out = (run.out_dir / model_dir_name(run.sweep_id)).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".target_model-", dir=out.parent))
    try:
        torch.save({"model": state["models"][0], "optimizer": state["optimizers"][0],
                    "step": steps}, tmp / MODEL_FILE)
        shapes = target_task(run).base_shapes
        if shapes is not None:
            (tmp / "base_shapes.bsh").write_text(shapes, encoding="utf-8")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, default=str),
                                     encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def release_checkpoints(trec: Any, model_dir: Path) -> None:
    """Delete the target trial's checkpoint folders once its model is kept in ``model_dir``
    (written and recorded: its ``model.pt`` holds the final checkpoint's model and optimizer
    states), so the trained target is on disk once; the trial's ``checkpoint_bytes_kept``
    becomes the kept folder's bytes, the figure the report gives."""
    from mutune.search.backends.ray_tune.retention import drop_checkpoints

    drop_checkpoints(getattr(trec, "trial_dir", None))
    trec.timing["checkpoint_bytes_kept"] = float(sum(
        f.stat().st_size for f in Path(model_dir).rglob("*") if f.is_file()))


def __getattr__(name: str) -> Any:
    if name == "load_target_model":
        import warnings

        warnings.warn("mutune.pipeline.target_model.load_target_model moved: import it as "
                      "mutune.load_target_model", DeprecationWarning, stacklevel=2)
        from mutune.pipeline.target_loader import load_target_model as moved

        return moved
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
