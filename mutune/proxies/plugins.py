"""Model families as plugins: Python entry points in the group ``mutune.models``."""
from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from mutune.errors import ConfigError
from mutune.proxies.family import ModelFamily as _ModelFamily

__all__ = ["GROUP", "LOOP_GROUP", "MODEL_HPARAMS", "installed_families",
           "installed_loops", "load_family", "load_loop"]

#: The entry-point group model plugins register in.
GROUP = "mutune.models"
#: The entry-point group training-loop plugins register in.
LOOP_GROUP = "mutune.loops"

#: Model hyperparameters a family's ``build`` may accept (the μP multipliers, TP V Table 1, and
#: dropout, which does not transfer across width).
MODEL_HPARAMS = ("input_mult", "output_mult", "attn_mult", "init_std", "dropout")


def installed_families() -> dict[str, importlib.metadata.EntryPoint]:
    """The model plugins installed in this environment: name → entry point (not loaded)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def _load(found: dict[str, importlib.metadata.EntryPoint], name: str, field: str,
          kind: str, group: str) -> Any:
    """Entry point ``name``; refuses an unknown name (listing the installed) or a failed import."""
    if name not in found:
        names = ", ".join(sorted(found)) or "none"
        raise ConfigError(f"{field} = {name!r}: no {kind} plugin of that name is installed "
                          f"here (entry-point group {group!r}); installed: {names}")
    try:
        return found[name].load()
    except Exception as exc:  # a broken plugin must not look like a mutune bug
        raise ConfigError(f"{field} = {name!r}: loading plugin {found[name].value!r} "
                          f"failed: {type(exc).__name__}: {exc}") from exc


def load_family(name: str) -> _ModelFamily:
    """Load the model plugin registered as ``name`` in group ``mutune.models``.

    Raises:
        ConfigError: no such plugin (names the installed ones), the entry point fails to
            import, or it is not a :class:`ModelFamily` whose ``name`` matches."""
    found = installed_families()
    family = _load(found, name, "model.family", "model", GROUP)
    if not isinstance(family, _ModelFamily) or family.name != name:
        raise ConfigError(f"model.family = {name!r}: entry point {found[name].value!r} is "
                          f"not a mutune.ModelFamily named {name!r}")
    bad = [h for h in family.hparams if h not in MODEL_HPARAMS]
    if bad:
        raise ConfigError(f"model plugin {name!r} declares unknown hparams {bad}; allowed: "
                          f"{', '.join(MODEL_HPARAMS)}")
    return family


def installed_loops() -> dict[str, importlib.metadata.EntryPoint]:
    """The training-loop plugins installed here: name → entry point (not loaded)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=LOOP_GROUP)}


def load_loop(name: str) -> Callable[..., Any]:
    """Load the training-loop plugin ``name`` (group ``mutune.loops``): ``loop(ctx) -> None``.

    Raises:
        ConfigError: no such plugin (names the installed ones), the entry point fails to
            import, or what it names is not callable."""
    found = installed_loops()
    loop = _load(found, name, "train.loop", "training-loop", LOOP_GROUP)
    if not callable(loop):
        raise ConfigError(f"train.loop = {name!r}: entry point {found[name].value!r} is a "
                          f"{type(loop).__name__}, not a function loop(ctx)")
    return loop


def __getattr__(name: str) -> Any:
    if name == "ModelFamily":
        import warnings

        warnings.warn("mutune.proxies.plugins.ModelFamily moved: import it as "
                      "mutune.ModelFamily", DeprecationWarning, stacklevel=2)
        from mutune.proxies.family import ModelFamily as moved

        return moved
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
