"""Reading a sweep config: YAML file or parsed data → :class:`SweepConfig`, or one
:class:`~mutune.errors.ConfigError` whose lines each name the field (dotted path), the value and
the rule it broke, e.g. ``search.scheduler.max_t = 10: must be >= grace_period (20)``.

An unknown key (pydantic's ``extra_forbidden``) is answered with the closest keys its section
does take: ``search.num_sample = 4: unknown key (not allowed); did you mean 'num_samples'?``
(:mod:`mutune.config.suggest`). The same text is in ``ConfigError.errors[i]["rule"]``, which the
search server returns with its 422.
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from mutune.config.base import FieldRuleError
from mutune.config.model import model_spec_class
from mutune.config.suggest import did_you_mean, section_keys
from mutune.config.sweep import SweepConfig, with_ladder_depth
from mutune.errors import ConfigError

__all__ = ["parse_config", "load_config", "default_config_path", "config_errors"]

#: Union tags pydantic puts in error locations; they are not user fields, so paths omit them.
_UNION_TAGS = frozenset({"DigitsDataConfig", "TextDataConfig", "TokenDataConfig", "digits",
                         "text", "tokens", "loguniform", "uniform", "choice"})


def config_errors(err: ValidationError, *, prefix: str = "",
                  root: type[BaseModel] = SweepConfig) -> list[dict[str, str]]:
    """Each rule ``err`` reports broken, as data.

    Args:
        err: pydantic's error from validating ``root``.
        prefix: prepended to every field path (``"model."`` when ``root`` is a model spec).
        root: the model that was validated; unknown keys are compared with the keys of the
            section of it they were found in.
    Returns:
        [{"field": dotted path (``"(root)"`` for the whole config), "value": repr of the
        value (``"{…}"`` for a mapping, ``"(missing)"`` for a required field that is
        absent), "rule": the rule, with "did you mean …" for an unknown key close to a known
        one}].
    """
    out = []
    for e in err.errors():
        raw = [p for p in e["loc"] if not str(p).startswith("function-after")]
        value = e.get("input")
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, FieldRuleError):     # a rule across fields names its field
            raw, value = [*raw, *cause.field.split(".")], cause.value
        loc = ".".join(p for p in (prefix + ".".join(str(p) for p in raw)).split(".")
                       if p not in _UNION_TAGS) or "(root)"
        rule = e["msg"].removeprefix("Value error, ")
        shown = repr(value) if not isinstance(value, (dict, BaseModel)) else "{…}"
        if e["type"] == "missing":            # the input is the section that lacks it
            shown, rule = "(missing)", "required: the config must give it"
        if e["type"] == "extra_forbidden":
            rule = "unknown key (not allowed)"
            hint = did_you_mean(str(raw[-1]), section_keys(root, raw) or ()) if raw else ""
            if hint:
                rule += f"; {hint}"
        out.append({"field": loc, "value": shown, "rule": rule})
    return out


def _message(source: str, errors: list[dict[str, str]]) -> str:
    return "\n".join([f"invalid sweep config {source}:"] +
                     [f"  {e['field']} = {e['value']}: {e['rule']}" for e in errors])


def parse_config(data: Any, *, source: str = "<dict>") -> SweepConfig:
    """Validate already-parsed config data (a mapping) into a :class:`SweepConfig`.

    The ``model`` section is validated first, with the spec of the model plugin its
    ``family`` names (:mod:`mutune.proxies.plugins`), so its errors name ``model.<field>``.

    Raises:
        ConfigError: one line per broken rule, each naming the field, the value and the rule
            (also as data in ``ConfigError.errors``, see :func:`config_errors`).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid sweep config {source}: top level must be a mapping, got "
                          f"{type(data).__name__}",
                          [{"field": "(root)", "value": type(data).__name__,
                            "rule": "top level must be a mapping"}])
    errors: list[dict[str, str]] = []
    data = with_ladder_depth(data)
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("family"), str):
        try:
            spec = model_spec_class(model)
            data = {**data, "model": spec.model_validate(model)}
        except ConfigError as err:
            raise ConfigError(f"invalid sweep config {source}:\n  {err}",
                              [{"field": "model.family", "value": repr(model["family"]),
                                "rule": str(err)}]) from None
        except ValidationError as err:
            errors += config_errors(err, prefix="model.", root=spec)
            data = {k: v for k, v in data.items() if k != "model"}
    try:
        cfg = SweepConfig.model_validate(data)
    except ValidationError as err:
        more = config_errors(err)
        if errors:   # the model section failed: the rest cannot be cross-checked
            more = [e for e in more if e["field"] != "model"]
        errors += more
        raise ConfigError(_message(source, errors), errors) from None
    if errors:
        raise ConfigError(_message(source, errors), errors)
    return cfg


def default_config_path() -> Path:
    """Path of the quickstart config shipped inside the package (``mutune/configs``)."""
    return Path(str(importlib.resources.files("mutune") / "configs" / "quickstart.yaml"))


def load_config(path: str | os.PathLike[str] | None = None) -> SweepConfig:
    """Read and validate a YAML sweep config; ``None`` loads the embedded quickstart config.

    Raises:
        ConfigError: the file is missing, is not YAML, or breaks a rule (field, value, rule).
    """
    p = Path(path) if path is not None else default_config_path()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read sweep config {p}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"sweep config {p} is not valid YAML: {err}") from None
    return parse_config(data, source=str(p))
