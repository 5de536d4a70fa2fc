"""`mutune export --optuna-storage URL`: a recorded sweep as Optuna studies, one per proxy width
(``{prefix}-{sweep_id}-w{width}``); ``completed`` → COMPLETE, ``stopped`` → PRUNED at its last
report, ``failed``/``diverged`` or no finite report → FAIL."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mutune.errors import StoreError

__all__ = ["export_to_optuna", "distributions_from_space"]


def distributions_from_space(space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Optuna distributions for a config's ``search.space``.

    Raises:
        StoreError: an unknown distribution type (names the parameter and the type)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    out: dict[str, Any] = {}
    for name, d in space.items():
        kind = d.get("type")
        if kind == "loguniform":
            out[name] = FloatDistribution(float(d["low"]), float(d["high"]), log=True)
        elif kind == "uniform":
            out[name] = FloatDistribution(float(d["low"]), float(d["high"]))
        elif kind == "choice":
            out[name] = CategoricalDistribution([v if isinstance(v, str) else float(v)
                                                 for v in d["values"]])
        else:
            raise StoreError(f"search.space.{name}.type = {kind!r}: cannot be exported to "
                             "Optuna (expected loguniform, uniform or choice)")
    return out


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def export_to_optuna(store: Any, sweep_id: int, storage_url: str, *,
                     study_prefix: str = "mutune", overwrite: bool = False) -> list[str]:
    """Write sweep ``sweep_id``'s proxy widths into the Optuna storage at ``storage_url``; returns
    the study names written.

    Raises:
        StoreError: unknown sweep, a study that exists (without ``overwrite``), or a search
            space Optuna cannot represent."""
    import optuna
    from optuna.trial import TrialState, create_trial

    rows = store.sweep_rows(sweep_id)
    search = (rows["sweep"]["config"] or {}).get("search") or {}
    dists = distributions_from_space(search.get("space") or {})
    fixed = search.get("fixed") or {}
    storage = optuna.storages.RDBStorage(storage_url)
    names = []
    for ps in rows["proxy_sweeps"]:
        settings = ps["settings"] or {}
        metric = settings.get("metric", "val_loss")
        direction = "maximize" if settings.get("mode", "min") == "max" else "minimize"
        name = f"{study_prefix}-{sweep_id}-w{ps['width']}"
        if overwrite:
            try:
                optuna.delete_study(study_name=name, storage=storage)
            except KeyError:
                pass
        try:
            study = optuna.create_study(study_name=name, storage=storage, direction=direction)
        except optuna.exceptions.DuplicatedStudyError as exc:
            raise StoreError(f"Optuna study {name!r} exists already in {storage_url}; "
                             "pass overwrite=True (--overwrite) to replace it") from exc
        study.set_user_attr("mutune_sweep_id", sweep_id)
        study.set_user_attr("width", ps["width"])
        study.set_user_attr("scheduler", settings.get("scheduler"))
        study.set_user_attr("fixed", fixed)
        study.set_user_attr("best", ps.get("best"))
        trials = []
        for t in rows["trials"]:
            if t["kind"] != "proxy" or t["proxy_sweep_id"] != ps["id"]:
                continue
            inter = {int(r["step"]): v for r in t["reports"]
                     if (v := _num(r["metrics"].get(metric))) is not None}
            finite = [v for _, v in sorted(inter.items()) if math.isfinite(v)]
            last = finite[-1] if finite else None
            status = t["status"]
            if status == "completed" and last is not None:
                state, value = TrialState.COMPLETE, last
            elif status == "stopped" and last is not None:
                state, value = TrialState.PRUNED, last
            else:
                state, value = TrialState.FAIL, None
            params = {k: t["config"][k] for k in dists if k in t["config"]}
            trials.append(create_trial(
                params=params, distributions={k: dists[k] for k in params}, value=value,
                intermediate_values=inter, state=state,
                user_attrs={"mutune_trial_id": t["id"], "key": t["key"], "status": status,
                            "reason": t.get("reason"), "seed": t.get("seed")}))
        study.add_trials(trials)
        names.append(name)
    return names
