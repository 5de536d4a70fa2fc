"""The trained target model, kept: its folder in the sweep's storage, and how it loads.

The target run checkpoints its trained model at its last step (``keep_final`` of
:func:`mutune.search.trial.trainable.train_trial`); :func:`keep_target_model` turns that
checkpoint into ``<out_dir>/target_model-sweep<ID>/`` (one folder per sweep: a later sweep
written into the same ``--out`` folder keeps its own model and never replaces another's):

* ``model.pt`` — ``{"model": state_dict, "optimizer": state_dict, "step": int}`` (torch);
* ``base_shapes.bsh`` — the μP base shapes every proxy and the target were built with;
* ``model.json`` — the sweep id, trial id, width, hyperparameters, training seed and steps,
  the final validation loss, the sweep's full config and the provenance (package versions,
  Python, CPU, dataset fingerprint).

:func:`load_target_model` rebuilds the model (and optionally its μP optimizer, state
restored, to train further) from that folder; ``mutune export ID --model DIR`` copies the
folder with a snippet that calls it (docs/architecture.md §4.4).
"""
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

MODEL_DIR = "target_model"      # + "-sweep<ID>": :func:`model_dir_name`
MODEL_FILE = "model.pt"
META_FILE = "model.json"


def model_dir_name(sweep_id: int) -> str:
    """The kept model's folder name for sweep ``sweep_id``: ``target_model-sweep<ID>``."""
    return f"{MODEL_DIR}-sweep{int(sweep_id)}"


def keep_target_model(run: Any, trec: Any, target_hp: dict[str, float], *,
                      seed: int, provenance: dict[str, Any] | None = None) -> Path:
    """Write the target's trained model into ``run.out_dir / model_dir_name(sweep_id)``
    (replacing that sweep's folder atomically — a resumed sweep keeps its model again — the new
    one complete before it takes the name).

    Args:
        run: the :class:`~mutune.pipeline.sweep.SweepRun`.
        trec: the target's TrialRecord (its ``trial_dir`` holds the final checkpoint).
        target_hp: the hyperparameters it trained with. seed: its training seed.
        provenance: recorded with the model (None: collected now).
    Returns:
        The folder (absolute).
    Raises:
        SearchError: the trial left no checkpoint at its last step.
    """
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
        shapes = target_task(run).base_shapes       # the target depth's base shapes
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
    """Rebuild a kept target model from its folder.

    Args:
        folder: a ``target_model-sweep<ID>`` folder (or a copy written by
            ``mutune export --model``).
        optimizer: also rebuild its μP optimizer at the trained learning rate, with the
            saved state (to train further).
        data: the task's data (:func:`mutune.proxies.task.load_task_data`); default: loaded
            from the sweep's config (the model's input and output sizes come from it).
    Returns:
        (the model in eval mode on CPU, the optimizer or None, ``{"meta": model.json,
        "task": the ProxyTask}``) — the task evaluates it as the run did
        (``task.evaluate(model, "val")``).
    Raises:
        SearchError: the folder is not a kept model.
    """
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
