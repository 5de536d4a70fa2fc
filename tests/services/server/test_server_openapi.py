"""The search server's OpenAPI schema carries the sweep config, field descriptions included."""
from __future__ import annotations

from mutune.config import SweepConfig
from mutune.services.server.app import API_PREFIX, create_app
from mutune.services.server.settings import ServerSettings


def _schema(tmp_path) -> dict:
    app = create_app(ServerSettings(db=f"sqlite:///{tmp_path / 'o.db'}", run_worker=False))
    return app.openapi()


def test_the_submission_body_is_the_sweep_config(tmp_path):
    schema = _schema(tmp_path)
    body = schema["paths"][f"{API_PREFIX}/sweeps"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/SweepConfig"}
    assert "application/yaml" in body


def test_field_descriptions_reach_the_schema(tmp_path):
    components = _schema(tmp_path)["components"]["schemas"]
    max_t = components["SchedulerConfig"]["properties"]["max_t"]
    assert max_t["description"] == SweepConfig.model_fields["search"].annotation.model_fields[
        "scheduler"].annotation.model_fields["max_t"].description
    assert "rung" in max_t["description"]
    assert components["SweepConfig"]["properties"]["widths"]["description"]
