"""The sweep config: the shipped configs load, and bad input names field, value and rule."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from mutune.config import default_config_path, load_config, parse_config
from mutune.errors import ConfigError
from tests.conftest import MLP_DIGITS, config_error

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def quick() -> dict:
    return yaml.safe_load(MLP_DIGITS.read_text())


def test_embedded_configs_are_the_repo_files():
    shipped = default_config_path().parent
    assert sorted(p.name for p in shipped.glob("*.yaml")) == \
        sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    for p in shipped.glob("*.yaml"):
        assert (ROOT / "configs" / p.name).read_bytes() == p.read_bytes(), p.name
    assert default_config_path().name == "quickstart.yaml"


def test_shipped_configs_load():
    """The quickstart is a language model whose target is ≥ 16× its smallest proxy; the MLP
    example and the GPT configs load."""
    q = load_config()
    assert q.model.family == "gpt" and q.data.kind == "text" and q.data.path is None
    assert len(q.widths) >= 3 and q.target.width >= 16 * q.widths[0]
    assert {"lr", "output_mult"} <= set(q.search.space)
    m = load_config(MLP_DIGITS)
    assert m.model.family == "mlp" and m.data.kind == "digits"
    assert len(m.widths) >= 3 and m.search.num_samples >= 16
    assert m.target.width >= 8 * m.widths[0]
    assert {"lr", "output_mult"} <= set(m.search.space)
    g = load_config(ROOT / "configs" / "gpt-text.yaml")
    assert g.model.family == "gpt" and g.data.kind == "text" and g.data.path is None
    assert len(g.widths) >= 3 and g.target.width >= 8 * g.widths[0]


@pytest.mark.parametrize("mutate, field, value, rule", [
    (lambda d: d.update(bogus=1), "bogus", "1", "unknown key"),
    (lambda d: d["search"]["scheduler"].update(max_t=5), "search.scheduler.max_t", "5",
     "must be >= grace_period (20)"),
    (lambda d: d["search"]["scheduler"].update(reduction_factor=1),
     "search.scheduler.reduction_factor", "1", "greater than or equal to 2"),
    (lambda d: d.update(widths=[128, 64, 256]), "widths", "[128, 64, 256]",
     "strictly increasing"),
    (lambda d: d.update(widths=[64, 64]), "widths", "[64, 64]", "strictly increasing"),
    (lambda d: d["target"].update(width=256), "target.width", "256",
     "must be > the largest proxy width (256)"),
    (lambda d: d["search"]["space"].pop("lr"), "search.space", "['output_mult']",
     "must search 'lr'"),
    (lambda d: d["search"].update(replicates=0), "search.replicates", "0",
     "greater than or equal to 1"),
    (lambda d: d["search"]["space"]["lr"].update(low=-1), "search.space.lr.low", "-1",
     "greater than 0"),
    (lambda d: d["search"]["space"].update(momentum={"type": "uniform", "low": 0, "high": 1}),
     "search.space.momentum", "{…}", "unknown hyperparameter 'momentum'"),
    (lambda d: d["search"]["space"].update(dropout={"type": "uniform", "low": 0, "high": 1}),
     "search.space.dropout", "1.0", "is outside [0, 1), where dropout is defined"),
    (lambda d: d["model"].update(family="resnet"), "model.family", "'resnet'",
     "no model plugin of that name is installed here"),
    (lambda d: d["model"].update(depth=0), "model.depth", "0", "greater than or equal to 1"),
    (lambda d: d["model"].update(d_head=16), "model.d_head", "16", "unknown key"),
    (lambda d: d.update(data={"kind": "text"}), "data.kind", "'text'",
     "a mlp model needs data.kind: digits"),
    (lambda d: d["search"].update(mode="max"), "search.mode", "'max'",
     "is a loss (lower is better), so mode must be 'min'"),
    (lambda d: d["train"].update(eval_every=25), "train.eval_every", "25",
     "does not divide the rung milestones [20, 60, 180]"),
    (lambda d: d["train"].update(eval_every=25), "train.eval_every", "25",
     "a divisor of 20, e.g. eval_every: 20"),
])
def test_errors_name_field_value_and_rule(quick, mutate, field, value, rule):
    """The error's data (what the server answers 422 with) names the field, its value and the
    rule; the message prints the same on the field's own line."""
    d = copy.deepcopy(quick)
    mutate(d)
    with config_error(field, value, rule) as exc:
        parse_config(d)
    assert any(ln.strip().startswith(f"{field} = {value}") for ln in str(exc.value).splitlines())


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(top)


def test_gpt_widths_must_divide_by_d_head():
    d = yaml.safe_load((ROOT / "configs" / "gpt-text.yaml").read_text())
    d["widths"] = [32, 40, 64]
    with config_error("model.d_head", "16", "must be a multiple of model.d_head"):
        parse_config(d)


def _set(path: str, value):
    """A mutation that sets the dotted ``path`` (creating mappings on the way) to ``value``."""
    def mutate(d):
        *parents, last = path.split(".")
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = value
    return mutate


@pytest.mark.parametrize("mutate, field, suggestion", [
    (_set("search.num_sample", 4), "search.num_sample", "did you mean 'num_samples'?"),
    (_set("search.scheduler.grace_perod", 4), "search.scheduler.grace_perod",
     "did you mean 'grace_period'?"),
    (_set("nmae", "x"), "nmae", "did you mean 'name'?"),
    (_set("data.val_frac", 0.1), "data.val_frac", "did you mean 'val_fraction'?"),
    (_set("search.space.lr.lo", 1e-4), "search.space.lr.lo", "did you mean 'low'?"),
    (_set("cost.devices.h100.peak", 1e15), "cost.devices.h100.peak",
     "did you mean 'peak_flops'?"),
    (_set("model.dpeth", 3), "model.dpeth", "did you mean 'depth'?"),
    (_set("ray.heartbeat", 5), "ray.heartbeat", "did you mean 'heartbeat_s'?"),
])
def test_unknown_key_suggests_the_closest_known_key(quick, mutate, field, suggestion):
    d = copy.deepcopy(quick)
    mutate(d)
    with pytest.raises(ConfigError) as exc:
        parse_config(d)
    line = next(ln for ln in str(exc.value).splitlines() if ln.strip().startswith(field))
    assert line.endswith(f": unknown key (not allowed); {suggestion}"), line
    # the structured errors (the server's 422 body) carry the same rule
    (err,) = [e for e in exc.value.errors if e["field"] == field]
    assert err["rule"] == f"unknown key (not allowed); {suggestion}"


def test_unknown_key_with_nothing_close_gets_no_suggestion(quick):
    d = copy.deepcopy(quick)
    d["search"]["zzz"] = 1
    with pytest.raises(ConfigError) as exc:
        parse_config(d)
    (err,) = exc.value.errors
    assert err == {"field": "search.zzz", "value": "1", "rule": "unknown key (not allowed)"}


@pytest.mark.parametrize("section, name, meant", [("space", "lrr", "lr"),
                                                  ("space", "outputmult", "output_mult"),
                                                  ("fixed", "init_sdt", "init_std")])
def test_misspelt_hyperparameter_suggests_the_searchable_one(quick, section, name, meant):
    d = copy.deepcopy(quick)
    if section == "space":
        d["search"]["space"][name] = {"type": "uniform", "low": 0.5, "high": 2.0}
    else:
        d["search"]["fixed"] = {name: 1.0}
    with pytest.raises(ConfigError) as exc:
        parse_config(d)
    (err,) = exc.value.errors
    # the misspelt key, not the whole section (mutune.config.base.FieldRuleError)
    assert err["field"] == f"search.{section}.{name}"
    assert err["value"] == ("{…}" if section == "space" else "1.0")
    assert err["rule"] == (f"unknown hyperparameter {name!r}; searchable: lr, output_mult, "
                           "input_mult, attn_mult, init_std, dropout, beta1, beta2, eps, "
                           f"weight_decay, grad_clip, warmup_fraction, lr_schedule; did you mean "
                           f"{meant!r}?")
    assert err["rule"] in str(exc.value)


def test_did_you_mean_phrasing():
    from mutune.config.suggest import did_you_mean, section_keys
    from mutune.config import SweepConfig

    assert did_you_mean("zzz", ["lr"]) == ""
    assert did_you_mean("Num_Samples", ["num_samples", "replicates"]) == \
        "did you mean 'num_samples'?"
    assert did_you_mean("beta", ["beta1", "beta2"]) == "did you mean 'beta1' or 'beta2'?"
    assert section_keys(SweepConfig, ("search", "space", "lr", "uniform", "x")) == \
        ["type", "low", "high"]
    assert section_keys(SweepConfig, ("search", "nope", "x")) is None


def test_a_missing_required_field_is_named_without_a_meaningless_value(tiny_config):
    from mutune.config import parse_config

    d = tiny_config.model_dump(mode="json")
    del d["widths"]
    with pytest.raises(ConfigError) as err:
        parse_config(d)
    assert "widths = (missing): required: the config must give it" in str(err.value)
    assert {"field": "widths", "value": "(missing)",
            "rule": "required: the config must give it"} in err.value.errors


def test_target_checkpoint_interval_defaults_to_a_tenth_of_its_steps_at_evaluations():
    from mutune.config import load_config, parse_config

    d = load_config(MLP_DIGITS).model_dump(mode="json")       # 200 target steps, eval every 10
    assert parse_config(d).target_checkpoint_every == 20
    assert parse_config(d).target_checkpoint_max_share == 0.05    # at most ~5 % of the run
    d["target"]["steps"] = 95                        # a tenth is 9.5 → the next evaluation
    assert parse_config(d).target_checkpoint_every == 10
    d["target"]["checkpoint_every"] = 0              # only the final model
    assert parse_config(d).target_checkpoint_every == 0
    assert parse_config(d).target_checkpoint_max_share is None    # given: kept exactly
    d["target"]["checkpoint_every"] = -1
    with config_error("target.checkpoint_every", "-1", "greater than or equal to 0"):
        parse_config(d)


def test_a_rule_across_fields_names_its_field_and_survives_pickling(quick):
    import pickle

    from mutune.config.base import FieldRuleError

    d = copy.deepcopy(quick)
    d["ray"].update(cpus_per_trial=8)
    with pytest.raises(ConfigError) as exc:
        parse_config(d)
    (err,) = exc.value.errors
    assert (err["field"], err["value"]) == ("ray.cpus_per_trial", "8.0")
    got = pickle.loads(pickle.dumps(FieldRuleError("target.width", 32, "must be > 256")))
    assert (got.field, got.value, str(got)) == ("target.width", 32, "must be > 256")



@pytest.mark.parametrize("change, field, value", [
    ({"ray": {"storage": "foo://x"}}, "ray.storage", "'foo://x'"),
    ({"ray": {"gpus_per_trial": 1.5}}, "ray.gpus_per_trial", "1.5"),
    ({"ray": {"lease_s": 1.0}}, "ray.lease_s", "1.0"),
    ({"search": {"metric_kind": "score"}}, "search.metric_kind", "'score'"),
    ({"search": {"mode": "max"}}, "search.mode", "'max'"),
    ({"search": {"metric": "val_acc"}}, "search.metric_kind", "None"),
    ({"search": {"metric": "val_acc", "metric_kind": "score", "mode": "max"}}, "search.metric",
     "'val_acc'"),
    ({"train": {"checkpoint_every": -1}}, "train.checkpoint_every", "-1"),
    ({"model": {"depth_parametrization": "completep", "residual": True},
      "train": {"optimizer": "sgd"}}, "model.depth_parametrization", "'completep'"),
])
def test_a_rule_across_fields_names_its_field_and_value_once(quick, change, field, value):
    d = copy.deepcopy(quick)
    for section, values in change.items():
        d[section].update(values)
    with pytest.raises(ConfigError) as exc:
        parse_config(d)
    (err,) = exc.value.errors
    assert (err["field"], err["value"]) == (field, value)
    # the message line is "field = value: rule"; the rule does not repeat the field
    shown = field.split(".")[-1]
    assert not err["rule"].startswith((field, shown)), err["rule"]
    assert str(exc.value).count(f"{field} = {value}") == 1
