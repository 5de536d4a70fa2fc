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

__all__ = ["MODEL_DIR", "MODEL_FILE", "META_FILE", "model_dir_name", "keep_target_model",
           "load_target_model"]

MODEL_DIR = "target_model"
MODEL_FILE = "model.pt"
META_FILE = "model.json"


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


def load_target_model(folder: str | os.PathLike[str], *, optimizer: bool = False,
                      data: Any = None) -> tuple[Any, Any, dict[str, Any]]:
    """Rebuild a kept target model from its folder: (the model in eval mode on CPU, its μP
    optimizer with saved state or None, ``{"meta", "task"}``).

    Raises:
        SearchError: the folder is not a kept model."""
    import torch

    from mutune.config import parse_config
    from mutune.proxies.task import ProxyTask, load_task_data

    root = Path(folder)
    if not (root / MODEL_FILE).is_file() or not (root / META_FILE).is_file():
        raise SearchError(f"{str(root)!r} is not a kept target model (needs {MODEL_FILE} and "
                          f"{META_FILE})")
    meta = json.loads((root / META_FILE).read_text(encoding="utf-8"))
    config = parse_config(meta["config"], source=str(root / META_FILE))
    bsh = root / "base_shapes.bsh"
    spec = config.model      # a depth ladder's target trains deeper than its model section
    if meta.get("depth") is not None and int(meta["depth"]) != spec.depth:
        spec = spec.model_copy(update={"depth": int(meta["depth"])})
    task = ProxyTask(spec, config.train,
                     data if data is not None else load_task_data(config),
                     base_shapes=bsh.read_text(encoding="utf-8") if bsh.is_file() else None)
    state = torch.load(root / MODEL_FILE, map_location="cpu", weights_only=True)
    hp = meta["hyperparameters"]
    model = task.build(int(meta["width"]), hp)
    model.load_state_dict(state["model"])
    opt = None
    if optimizer:
        opt = task.for_point(hp).optimizer(model, float(hp["lr"]))
        opt.load_state_dict(state["optimizer"])
    return model.eval(), opt, {"meta": meta, "task": task}
