"""Rebuilding a kept target model from its folder (public as
``mutune.load_target_model``; the folder is written by
:func:`mutune.pipeline.target_model.keep_target_model`)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mutune.errors import SearchError

__all__ = ["MODEL_FILE", "META_FILE", "load_target_model"]

MODEL_FILE = "model.pt"
META_FILE = "model.json"


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
