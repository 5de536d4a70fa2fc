"""The public API: what the README and the guide use is importable from ``mutune``; the deep
paths users imported before keep working with a DeprecationWarning."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import mutune


@pytest.mark.parametrize("name", mutune.__all__)
def test_every_public_name_resolves(name):
    assert getattr(mutune, name) is not None
    assert name in dir(mutune)


def test_the_client_errors_share_one_root():
    assert issubclass(mutune.ServerError, mutune.MutuneError)
    for err in (mutune.AuthError, mutune.NotFound, mutune.Conflict, mutune.PayloadTooLarge):
        assert issubclass(err, mutune.ServerError)
    assert issubclass(mutune.SweepTimeout, TimeoutError)


@pytest.mark.parametrize("module, name", [("mutune.proxies.plugins", "ModelFamily"),
                                          ("mutune.pipeline.target_model", "load_target_model")])
def test_a_deep_path_warns_and_gives_the_same_object(module, name):
    import importlib

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"mutune.{name}"):
        old = getattr(mod, name)
    assert old is getattr(mutune, name)
    with pytest.raises(AttributeError):
        mod.no_such_name  # noqa: B018


def test_the_top_level_names_import_without_warnings_or_heavy_modules():
    code = ("import sys, warnings; warnings.simplefilter('error');"
            "from mutune import ModelFamily, LoopContext, ConfigError;"
            "print(sorted(m for m in ('ray', 'sqlalchemy', 'fastapi', 'httpx') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from mutune import ModelFamily   # noqa: F401
