"""Model plugins through real entry points: a user's plain model registered by a
``*.dist-info/entry_points.txt`` in a folder on ``sys.path`` (no mocking of importlib.metadata),
a refused unknown plugin, and the installed example package run end to end."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import mup
import pytest
import torch

from mutune.config import load_config, parse_config
from mutune.errors import ConfigError, ProxyError
from mutune.proxies.plugins import installed_families, load_family
from tests.conftest import MLP_DIGITS, config_error

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = textwrap.dedent('''
    """A user's plain PyTorch MLP: its head is an ordinary nn.Linear (mutune swaps it)."""
    from typing import Literal

    import torch
    from torch import nn

    from mutune.config import ModelSpec
    from mutune.proxies.family import ModelFamily


    class PlainSpec(ModelSpec):
        family: Literal["plain_mlp"]
        base_width: int = 8
        activation: Literal["relu", "tanh"] = "tanh"


    class Plain(nn.Module):
        def __init__(self, width, depth, d_in, n_classes, activation):
            super().__init__()
            self.act = torch.tanh if activation == "tanh" else torch.relu
            self.body = nn.ModuleList(nn.Linear(d_in if i == 0 else width, width)
                                      for i in range(depth))
            self.head = nn.Linear(width, n_classes)

        def forward(self, x):
            for layer in self.body:
                x = self.act(layer(x))
            return self.head(x)


    def build(width, *, depth, activation, d_in, n_classes, init_std=1.0):
        print(f"plain_mlp build width={width}")
        model = Plain(width, depth, d_in, n_classes, activation)
        with torch.no_grad():
            for layer in model.body:
                layer.weight.mul_(init_std)
        return model


    def forward_loss(model, x, y):
        return nn.functional.cross_entropy(model(x), y, label_smoothing=0.0)


    def batch(data, batch_size, seed, step):
        """The user's own loader: a contiguous window of the training set (no shuffling)."""
        start = (seed * 7919 + step * batch_size) % (len(data.train_x) - batch_size)
        return data.train_x[start:start + batch_size], data.train_y[start:start + batch_size]


    FAMILY = ModelFamily(name="plain_mlp", spec=PlainSpec, build=build,
                         data_kinds=("digits",), hparams=("output_mult", "init_std"),
                         readout="head", forward_loss=forward_loss, batch=batch)
    NOT_A_FAMILY = 42
''')


@pytest.fixture
def user_plugin(tmp_path, monkeypatch) -> Path:
    """A folder on sys.path holding the module ``plain_mlp_plugin`` and a distribution
    ``user-models`` whose entry points register ``plain_mlp`` (and a broken ``not_family``)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "plain_mlp_plugin.py").write_text(PLUGIN)
    dist = site / "user_models-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-models\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[mutune.models]\nplain_mlp = plain_mlp_plugin:FAMILY\n"
        "not_family = plain_mlp_plugin:NOT_A_FAMILY\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("plain_mlp_plugin", None)


def _config(family: str = "plain_mlp", **model) -> dict:
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["model"] = {"family": family, "base_width": 8, "depth": 2, **model}
    d["widths"] = [8, 16]
    d["target"]["width"] = 32
    d["search"]["space"] = {"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-1},
                            "output_mult": {"type": "loguniform", "low": 0.5, "high": 2.0}}
    d["search"]["num_samples"] = 3
    d["search"]["scheduler"].update(grace_period=3, reduction_factor=3, max_t=9)
    d["train"]["eval_every"] = 3
    return d


def test_builtins_are_registered_through_the_entry_point_group():
    found = installed_families()
    assert {"mlp", "gpt"} <= set(found)
    assert found["mlp"].value == "mutune.proxies.families:MLP"
    assert load_family("gpt").data_kinds == ("text", "tokens")


def test_user_plugin_config_model_and_training(user_plugin):
    assert installed_families()["plain_mlp"].dist.name == "user-models"
    cfg = parse_config(_config(activation="relu"))
    assert type(cfg.model).__name__ == "PlainSpec" and cfg.model.activation == "relu"
    assert cfg.model_dump(mode="json")["model"] == {
        "family": "plain_mlp", "parametrization": "mup", "depth": 2, "base_width": 8,
        "activation": "relu"}
    # the stored form round-trips (what rerun and the server read back)
    assert parse_config(cfg.model_dump(mode="json")) == cfg

    from mutune.proxies.task import ProxyTask, load_task_data

    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    assert task.family.name == "plain_mlp"
    torch.manual_seed(0)
    model = task.build(32, {"lr": 0.01, "output_mult": 2.0, "init_std": 1.0})
    head = model.head
    assert isinstance(head, mup.MuReadout) and head.output_mult == 2.0
    assert torch.count_nonzero(head.weight) == 0                 # zero readout
    assert head.width_mult() == 4.0                              # 32 / base 8
    assert model.body[1].weight.infshape.width_mult() == 4.0
    x, y = task.batch(1, 2)                                    # the plugin's loader
    start = (7919 + 2 * cfg.train.batch_size) % (len(task.data.train_x) - cfg.train.batch_size)
    assert torch.equal(y, torch.from_numpy(task.data.train_y[start:start + len(y)]))
    assert x.shape == (cfg.train.batch_size, 64)
    opt = task.optimizer(model, 0.01)
    assert isinstance(opt, torch.optim.AdamW)                    # MuAdamW's class
    before = task.val_loss(model)
    for step in range(1, 31):
        x, y = task.batch(0, step)
        loss = task.step_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert task.val_loss(model) < before - 0.3


def test_unknown_and_broken_plugins_are_refused_with_the_installed_names(user_plugin):
    with pytest.raises(ConfigError) as exc:
        parse_config(_config("resnet9"))
    msg = str(exc.value)
    assert "model.family = 'resnet9'" in msg and "no model plugin" in msg
    assert "installed: gpt, mlp, not_family, plain_mlp" in msg
    with config_error("model.family", "'not_family'", "is not a mutune.ModelFamily"):
        parse_config(_config("not_family"))
    with config_error("model.activation", "'gelu'", "Input should be"):
        parse_config(_config(activation="gelu"))
    d = _config()
    d["search"]["space"]["attn_mult"] = {"type": "loguniform", "low": 0.5, "high": 2.0}
    with config_error("search.space.attn_mult", rule="which model.family 'plain_mlp' does not"):
        parse_config(d)


def test_readout_swap_refuses_what_is_not_a_plain_linear():
    from mutune.proxies.convert import swap_readout
    from mutune.proxies.mlp import MuMLP

    with pytest.raises(ProxyError, match="not a plain nn.Linear"):
        swap_readout(MuMLP(4, 8, 3), "readout")
    with pytest.raises(ProxyError, match="no module at 'head'"):
        swap_readout(MuMLP(4, 8, 3), "head")


def _run_cli(args: list[str], pythonpath: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "mutune.services.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_user_plugin_sweep_on_ray_records_its_output(user_plugin, tmp_path):
    """The whole main job on the plain_mlp plugin in a fresh process (Ray workers import the
    plugin from the same folder); what its build printed is stored per trial."""
    import yaml

    from mutune.services.store import Store

    cfg = tmp_path / "plain.yaml"
    cfg.write_text(yaml.safe_dump(_config()))
    url = f"sqlite:///{tmp_path / 'p.db'}"
    res = _run_cli(["run", str(cfg), "--db", url, "--out", str(tmp_path / "out")],
                   [user_plugin, ROOT], tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "latest" / "report.json").read_text())
    assert report["status"] == "completed" and report["target"]["width"] == 32
    assert report["target"]["val_loss"] < 2.3
    with Store.open(url) as store:
        rows = store.sweep_rows(report["sweep_id"])
        logs = [store.trial_log(t["id"]) for t in rows["trials"]]
    assert rows["sweep"]["config"]["model"]["family"] == "plain_mlp"
    assert all("plain_mlp build width=" in log["stdout"] for log in logs)
    target = next(log for log in logs if log["kind"] == "target")
    assert "plain_mlp build width=32" in target["stdout"]


def _install_example(example: Path, dist: str, tmp_path: Path) -> Path:
    """Install a copy of the example package into an empty folder (pip builds its wheel; no
    deps, no network, one pip process; the build's files stay out of the repository);
    returns the folder, for PYTHONPATH."""
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(example, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                    "-q", "--target", str(site), str(source)], check=True, cwd=tmp_path,
                   timeout=300)
    assert list(site.glob(f"{dist}-*.dist-info")), sorted(p.name for p in site.iterdir())
    return site


@pytest.mark.slow
def test_example_package_installs_and_runs_end_to_end(tmp_path):
    """examples/tiny_cnn installed (built into a wheel by pip) into an empty target folder (no
    network), found through its entry point, and run with ``mutune run``."""
    example = ROOT / "examples" / "tiny_cnn"
    site = _install_example(example, "mutune_tiny_cnn", tmp_path)
    url = f"sqlite:///{tmp_path / 'cnn.db'}"
    res = _run_cli(["run", str(example / "tiny.yaml"), "--db", url, "--out",
                    str(tmp_path / "out")], [site, ROOT], tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "latest" / "report.json").read_text())
    assert report["status"] == "completed"
    assert [p["width"] for p in report["proxies"]] == [8, 16]
    # it learns: every proxy width's best loss at most 1.5 nats (chance: ln 10 = 2.30)
    assert all(p["best_val_loss"] <= 1.5 for p in report["proxies"]), report["proxies"]
    assert report["target"]["width"] == 64 and report["target"]["val_loss"] < 1.5
    assert {r["hyperparameter"] for r in report["rules"]} == {"lr", "output_mult"}
    listed = _run_cli(["list", "--db", url, "--json"], [site, ROOT], tmp_path)
    assert json.loads(listed.stdout)[0]["family"] == "tiny_cnn"


def test_plain_attention_model_gets_the_mup_attention_scale_and_readout():
    """A family whose plain model reads its logit scale from ``self.scale``: mutune sets it
    to attn_mult / head_dim (not 1/√head_dim) and swaps the readout."""
    from typing import Literal

    import torch.nn.functional as F
    from torch import nn

    from mutune.config import ModelSpec, TrainConfig
    from mutune.proxies.family import ModelFamily
    from mutune.proxies.convert import set_attention_scale
    from mutune.proxies.data import load_digits_data
    from mutune.proxies.task import ProxyTask

    class Attn(nn.Module):
        def __init__(self, width: int, head_dim: int) -> None:
            super().__init__()
            self.head_dim, self.n_heads = head_dim, width // head_dim
            self.scale = head_dim ** -0.5                    # what a plain model ships with
            self.qkv = nn.Linear(width, 3 * width)

        def forward(self, x):
            b, t, w = x.shape
            q, k, v = (z.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
                       for z in self.qkv(x).chunk(3, dim=-1))
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
            return out.transpose(1, 2).reshape(b, t, w)

    class Net(nn.Module):           # digits as 8 tokens of 8 pixels
        def __init__(self, width: int) -> None:
            super().__init__()
            self.embed, self.attn = nn.Linear(8, width), Attn(width, 4)
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            h = self.embed(x.view(-1, 8, 8))
            return self.head((h + self.attn(h)).mean(dim=1))

    class Spec(ModelSpec):
        family: Literal["attn_test"]
        base_width: int = 8

    fam = ModelFamily(name="attn_test", spec=Spec,
                      build=lambda width, *, depth, d_in, n_classes: Net(width),
                      hparams=("output_mult", "attn_mult"), readout="head",
                      attention_scale="scale")
    task = ProxyTask(Spec(family="attn_test", depth=1), TrainConfig(),
                     load_digits_data(val_fraction=0.2, seed=0), family=fam).with_base_shapes()
    model = task.build(32, {"lr": 0.01, "attn_mult": 2.0, "output_mult": 0.5})
    assert model.attn.scale == 2.0 * 4 ** 0.5 / 4            # attn_mult · √d_base / d_head
    assert isinstance(model.head, mup.MuReadout) and model.head.output_mult == 0.5
    assert model.attn.qkv.weight.infshape.width_mult() == 4.0
    x, y = task.batch(0, 1)
    opt = task.optimizer(model, 0.01)
    loss = task.step_loss(model, x, y)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    with torch.no_grad():                                    # the scale is what forward uses
        h = model.embed(x.view(-1, 8, 8))
        a = model.attn(h)
        model.attn.scale = 0.0
        assert not torch.allclose(a, model.attn(h))
    with pytest.raises(ProxyError, match="nothing to give the μP attention scale"):
        set_attention_scale(nn.Linear(2, 2), "scale")


@pytest.mark.slow
def test_example_loop_package_trains_proxies_and_target_under_ray(tmp_path):
    """examples/gpt_loop (a training-loop plugin) built into a wheel, installed into an empty
    folder, and run by ``mutune run`` on its config shrunk to seconds: every proxy trial and
    the target are trained by the user's loop (its own ``lr_factor`` key is in every stored
    report, the last at the cosine's floor), the target on Ray as any trial."""
    import yaml

    from mutune.services.store import Store

    example = ROOT / "examples" / "gpt_loop"
    site = _install_example(example, "mutune_gpt_loop", tmp_path)
    d = yaml.safe_load((example / "gpt_loop.yaml").read_text())
    d["target"]["width"] = 128
    d["search"]["num_samples"] = 3
    d["search"]["scheduler"].update(grace_period=10, max_t=30)
    d["train"].update(eval_every=10, eval_windows=16)
    d["transfer"].update(confirm_replicates=0, gate_rounds=0)
    cfg = tmp_path / "loop.yaml"
    cfg.write_text(yaml.safe_dump(d))
    url = f"sqlite:///{tmp_path / 'loop.db'}"
    res = _run_cli(["run", str(cfg), "--db", url, "--out", str(tmp_path / "out")],
                   [site, ROOT], tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "latest" / "report.json").read_text())
    assert report["status"] == "completed" and report["target"]["width"] == 128
    assert math.isfinite(report["target"]["val_loss"])
    with Store.open(url) as store:
        rows = store.sweep_rows(report["sweep_id"])
    assert {t["kind"] for t in rows["trials"]} == {"proxy", "target"}
    for t in rows["trials"]:
        got = t["reports"]
        assert got and all("lr_factor" in r["metrics"] for r in got), t
        if got[-1]["step"] == 30:
            assert got[-1]["metrics"]["lr_factor"] == pytest.approx(0.1)
