"""``mutune export SWEEP_ID --model DIR``: the kept target model copied into DIR with a
``load_model.py`` that rebuilds it (:func:`mutune.load_target_model`)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mutune.errors import StoreError

__all__ = ["export_model", "SNIPPET"]

SNIPPET = '''\
"""Load the target model mutune trained in sweep {sweep_id} (width {width}, {steps} steps)."""
from pathlib import Path

import torch

from mutune import load_target_model

torch.set_num_threads(1)         # the thread count the run evaluated with: the same bits
here = Path(__file__).resolve().parent
model, optimizer, info = load_target_model(here, optimizer=True)
val, se = info["task"].evaluate(model, "val")
print(f"validation loss {{val!r}} ± {{se:.4f}} nats (recorded: {val_loss!r})")
# further training: model.train(); the μP optimizer's state is restored in `optimizer`
'''


def export_model(rows: dict[str, Any], dest: str | Path) -> Path:
    """Copy the kept target model of the sweep ``rows`` to ``dest`` with ``load_model.py``.

    Raises:
        StoreError: the sweep has no kept target model, its folder is gone, or ``dest`` exists
            and is not empty."""
    from mutune.pipeline.target_model import META_FILE, MODEL_FILE

    sweep_id = rows["sweep"]["id"]
    target = rows.get("target")
    if not target or not target.get("model_dir"):
        raise StoreError(f"sweep {sweep_id} has no kept target model (its target run "
                         f"{'status: ' + target['status'] if target else 'never ran'})")
    src = Path(target["model_dir"])
    if not (src / MODEL_FILE).is_file() or not (src / META_FILE).is_file():
        raise StoreError(f"sweep {sweep_id}: the kept model folder {str(src)!r} is missing "
                         f"or incomplete (needs {MODEL_FILE} and {META_FILE})")
    meta = json.loads((src / META_FILE).read_text(encoding="utf-8"))
    if int(meta.get("sweep_id", -1)) != int(sweep_id):
        raise StoreError(f"sweep {sweep_id}: the kept model folder {str(src)!r} now holds "
                         f"sweep {meta.get('sweep_id')}'s model (a later sweep was written "
                         "into the same --out folder before models were kept per sweep); "
                         "this sweep's trained model is gone — rerun it to train it again")
    out = Path(dest).resolve()
    if out.exists() and any(out.iterdir()):
        raise StoreError(f"--model {str(out)!r} exists and is not empty")
    shutil.copytree(src, out, dirs_exist_ok=True)
    trial = next((t for t in rows["trials"] if t["id"] == target["trial_id"]), None)
    steps = trial["reports"][-1]["step"] if trial and trial["reports"] else "?"
    (out / "load_model.py").write_text(SNIPPET.format(
        sweep_id=sweep_id, width=target["width"], steps=steps,
        val_loss=target["val_loss"]), encoding="utf-8")
    return out
