"""Model families as plugins: Python entry points in the group ``mutune.models``.

A config names its model by plugin name (``model.family``), never by an import path: mutune
loads only what is installed where it runs, through :mod:`importlib.metadata` (the built-in
``mlp`` and ``gpt`` are registered the same way, in mutune's own ``pyproject.toml``). A plugin is
a :class:`ModelFamily`::

    # pyproject.toml of the user's package
    [project.entry-points."mutune.models"]
    tiny_cnn = "tiny_cnn:FAMILY"

Training loops are plugins too, in the group ``mutune.loops``, named by ``train.loop``: a
function ``loop(ctx)`` doing its own forward, backward and optimizer step
(:mod:`mutune.training.context` gives the contract)::

    [project.entry-points."mutune.loops"]
    warmup_cosine = "gpt_loop:train"

Importing this module imports neither torch nor the plugins; :func:`load_family` and
:func:`load_loop` import the one plugin asked for.
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mutune.errors import ConfigError

__all__ = ["GROUP", "LOOP_GROUP", "MODEL_HPARAMS", "ModelFamily", "installed_families",
           "installed_loops", "load_family", "load_loop"]

#: The entry-point group model plugins register in.
GROUP = "mutune.models"
#: The entry-point group training-loop plugins register in.
LOOP_GROUP = "mutune.loops"

#: Model hyperparameters a family's ``build`` may accept (the μP multipliers, TP V Table 1, and
#: dropout, which does not transfer across width).
MODEL_HPARAMS = ("input_mult", "output_mult", "attn_mult", "init_std", "dropout")


@dataclass(frozen=True)
class ModelFamily:
    """What a model plugin gives mutune; mutune does the rest (base and delta models, base
    shapes, the μP optimizer, reports, the ledger).

    Attributes:
        name: the plugin name configs use (``model.family``); must equal the entry point's.
        spec: the pydantic model of the config's ``model`` section, a subclass of
            :class:`mutune.config.ModelSpec` whose ``family`` is ``Literal[name]``; every
            further field is passed to ``build`` (extra keys are refused).
        build: ``build(width, *, depth, **options, **data_shape, **hparams) -> nn.Module``:
            the model at hidden width ``width`` (features). ``options`` are ``spec``'s own
            fields; ``data_shape`` is ``d_in`` and ``n_classes`` for classification data;
            ``hparams`` are the entries of :data:`MODEL_HPARAMS` named in ``hparams``. It must
            build mup layers (a ``mup.MuReadout`` output) or set ``readout``.
        data_kinds: the ``data.kind`` values the family trains on (``digits``, ``text``,
            ``tokens``).
        hparams: which of :data:`MODEL_HPARAMS` ``build`` accepts (and a search may name).
        readout: name of a plain ``nn.Linear`` output layer (attribute path, e.g. ``"head"``)
            that mutune replaces with a zero-initialised ``mup.MuReadout`` of the same shape
            (:func:`mutune.proxies.convert.swap_readout`); None when ``build`` already uses one.
        attention_scale: name of the attribute holding the attention-logit scale in the
            model's attention modules (each also has ``head_dim``); mutune sets it to
            attn_mult / head_dim (:func:`mutune.proxies.convert.set_attention_scale`), taking
            ``attn_mult``; None when ``build`` already scales by attn_mult/d_head.
        forward_loss: optional training step body ``forward_loss(model, x, y) -> scalar
            loss`` (nats) replacing ``cross_entropy(model(x), y)`` in training and evaluation.
        batch: optional data loader ``batch(data, batch_size, seed, step) -> (x, y)`` (numpy
            or torch) replacing mutune's seeded sampler; a pure function of its arguments.
        flops_per_sample: optional ``flops_per_sample(width, n_params, spec) -> float``:
            training FLOPs per sample (or token) for the ledger's MFU. Default: 6·N, exact for
            stacks of dense layers (Kaplan et al. 2020 §2.1); a family that shares weights
            across positions (convolutions, attention) should give its own.

    A family on ``text``/``tokens`` data needs a ``seq_len`` field in its spec (tokens per
    batch row). Attention in a plain model must read its logit scale from the attribute
    named by ``attention_scale`` (mutune cannot rewrite a hard-coded 1/√d_head).
    """
    name: str
    spec: type
    build: Callable[..., Any]
    data_kinds: tuple[str, ...] = ("digits",)
    hparams: tuple[str, ...] = ("input_mult", "output_mult", "init_std")
    readout: str | None = None
    attention_scale: str | None = None
    forward_loss: Callable[..., Any] | None = None
    batch: Callable[..., Any] | None = None
    flops_per_sample: Callable[..., float] | None = None


def installed_families() -> dict[str, importlib.metadata.EntryPoint]:
    """The model plugins installed in this environment: name → entry point (not loaded)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def _load(found: dict[str, importlib.metadata.EntryPoint], name: str, field: str,
          kind: str, group: str) -> Any:
    """The object entry point ``name`` names, with the refusals both plugin kinds share: an
    unknown name (listing the installed ones) and a plugin that fails to import."""
    if name not in found:
        names = ", ".join(sorted(found)) or "none"
        raise ConfigError(f"{field} = {name!r}: no {kind} plugin of that name is installed "
                          f"here (entry-point group {group!r}); installed: {names}")
    try:
        return found[name].load()
    except Exception as exc:  # a broken plugin must not look like a mutune bug
        raise ConfigError(f"{field} = {name!r}: loading plugin {found[name].value!r} "
                          f"failed: {type(exc).__name__}: {exc}") from exc


def load_family(name: str) -> ModelFamily:
    """Load the model plugin registered as ``name`` in group ``mutune.models``.

    Raises:
        ConfigError: no such plugin (names the installed ones), the entry point fails to
            import, or it is not a :class:`ModelFamily` whose ``name`` matches.
    """
    found = installed_families()
    family = _load(found, name, "model.family", "model", GROUP)
    if not isinstance(family, ModelFamily) or family.name != name:
        raise ConfigError(f"model.family = {name!r}: entry point {found[name].value!r} is "
                          f"not a mutune.proxies.plugins.ModelFamily named {name!r}")
    bad = [h for h in family.hparams if h not in MODEL_HPARAMS]
    if bad:
        raise ConfigError(f"model plugin {name!r} declares unknown hparams {bad}; allowed: "
                          f"{', '.join(MODEL_HPARAMS)}")
    return family


def installed_loops() -> dict[str, importlib.metadata.EntryPoint]:
    """The training-loop plugins installed here: name → entry point (not loaded)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=LOOP_GROUP)}


def load_loop(name: str) -> Callable[..., Any]:
    """Load the training-loop plugin registered as ``name`` in group ``mutune.loops``: a
    callable ``loop(ctx) -> None`` (:class:`mutune.training.context.LoopContext`).

    Raises:
        ConfigError: no such plugin (names the installed ones), the entry point fails to
            import, or what it names is not callable.
    """
    found = installed_loops()
    loop = _load(found, name, "train.loop", "training-loop", LOOP_GROUP)
    if not callable(loop):
        raise ConfigError(f"train.loop = {name!r}: entry point {found[name].value!r} is a "
                          f"{type(loop).__name__}, not a function loop(ctx)")
    return loop
