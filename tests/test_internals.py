"""mutune._internals: each private attribute it relies on exists in the installed release,
and each speed shortcut is off outside the releases it was verified on."""
from __future__ import annotations

import inspect

import pytest

from mutune import _internals


def test_ray_tune_keeps_actors_in_an_object_cache_with_increase_max():
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.utils.object_cache import _ObjectCache

    assert "self._actor_cache = _ObjectCache(" in inspect.getsource(TuneController.__init__)
    assert callable(_ObjectCache.increase_max)


def test_ray_tune_keeps_its_actor_classes_in_a_dict_and_names_their_env_vars():
    from ray.tune.execution.class_cache import (DEFAULT_ENV_VARS, ENV_VARS_TO_PROPAGATE,
                                                _ActorClassCache)
    from ray.tune.execution.tune_controller import TuneController

    assert "self._class_cache = _ActorClassCache(" in inspect.getsource(TuneController.__init__)
    assert isinstance(_ActorClassCache()._cache, dict)
    assert isinstance(DEFAULT_ENV_VARS, dict) and ENV_VARS_TO_PROPAGATE


def test_ray_exposes_the_session_folder_and_the_draining_nodes():
    import ray._private.state as state
    import ray._private.worker as worker

    assert hasattr(worker, "global_worker")
    assert callable(state.state.get_draining_nodes)


def test_torch_optimizer_methods_are_wrapped_as_the_eager_classes_expect():
    assert _internals._wrappers_known()


def test_the_installed_releases_are_verified():
    assert _internals.verified("ray") and _internals.verified("torch")


def test_an_unverified_release_turns_the_shortcuts_off(monkeypatch):
    import torch

    _internals.verified.cache_clear()
    monkeypatch.setitem(_internals.VERIFIED, "torch", ((1, 0), (1, 1)))
    monkeypatch.setitem(_internals.VERIFIED, "ray", ((1, 0), (1, 1)))
    try:
        with pytest.warns(RuntimeWarning, match="torch"):
            assert _internals.optimizer_class("adamw") is torch.optim.AdamW

        class Controller:
            _actor_cache = None
        with pytest.warns(RuntimeWarning, match="ray"):
            assert not _internals.keep_actors(Controller(), object(), 2)
        assert not _internals.use_idle_workers(Controller(), object(),
                                               dict(_internals.tune_actor_env() or {}))
    finally:
        _internals.verified.cache_clear()


def test_eager_classes_are_found_by_name_for_pickle():
    assert _internals.EagerAdamW is _internals.eager_optimizers()["adamw"]
    with pytest.raises(AttributeError):
        _internals.NoSuchName  # noqa: B018
