"""The search server's API v1 against a real `mutune serve` (uvicorn on loopback).

These tests run the server without its worker (nothing leaves ``queued``), so they need no
Ray; tests/services/server/test_server_sweeps.py runs sweeps through it.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import make_tiny_config
from tests.services.conftest import make_token, start_server

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("services.server.test_server")

V1 = "/api/v1"


def tiny_yaml(**changes) -> str:
    d = make_tiny_config().model_dump(mode="json")
    d.update(changes)
    return yaml.safe_dump(d)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One sqlite-backed server for the module, with a 64 KiB body limit and a data root."""
    tmp = tmp_path_factory.mktemp("server")
    root = tmp / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "a.txt").write_text("hello world\n" * 50)
    (tmp / "outside.txt").write_text("secret\n")
    db = f"sqlite:///{tmp / 'mutune.db'}"
    srv = start_server(db, tmp, env={"MUTUNE_MAX_BODY_BYTES": str(64 * 1024),
                                     "MUTUNE_DATA_ROOTS": json.dumps([str(root)])})
    srv.root = root
    srv.tmp = tmp
    try:
        yield srv
    finally:
        srv.kill(signal.SIGTERM)


def test_submit_list_get_trials_report_cancel(live_server):
    """The whole v1 surface on SQLite and PostgreSQL (a queued sweep, no worker)."""
    token = make_token(live_server.db, "alpha")
    with httpx.Client(base_url=live_server.url + V1, headers=auth(token)) as c:
        r = c.post("/sweeps", content=tiny_yaml(), headers={"Content-Type": "application/yaml"})
        assert r.status_code == 201, r.text
        first = r.json()["id"]
        assert r.json() == {"id": first, "status": "queued", "project": "alpha"}
        assert r.headers["location"] == f"{V1}/sweeps/{first}"
        r = c.post("/sweeps", json=make_tiny_config().model_dump(mode="json"))
        assert r.status_code == 201
        second = r.json()["id"]

        page = c.get("/sweeps", params={"limit": 1}).json()
        assert page["total"] == 2 and [s["id"] for s in page["items"]] == [second]
        page = c.get("/sweeps", params={"limit": 1, "offset": 1}).json()
        assert [s["id"] for s in page["items"]] == [first]
        assert c.get("/sweeps", params={"limit": 0}).status_code == 422

        st = c.get(f"/sweeps/{first}").json()
        assert st["status"] == "queued" and st["project"] == "alpha"
        assert st["progress"]["trials_total"] == 4 * 2 + 1
        assert st["progress"]["fraction"] == 0.0 and st["best_so_far"] is None
        assert c.get(f"/sweeps/{first}/trials").json() == {"items": []}
        r = c.get(f"/sweeps/{first}/report")
        assert r.status_code == 409 and "queued" in r.json()["detail"]

        assert c.post(f"/sweeps/{first}/cancel").json() == {"id": first, "status": "cancelled"}
        assert c.get(f"/sweeps/{first}").json()["status"] == "cancelled"
        r = c.post(f"/sweeps/{first}/cancel")
        assert r.status_code == 409 and "cancelled" in r.json()["detail"]
        assert c.get("/sweeps/999999").status_code == 404


def test_tokens_and_projects(server):
    alpha, beta = make_token(server.db, "alpha"), make_token(server.db, "beta")
    r = httpx.post(server.url + V1 + "/sweeps", content=tiny_yaml())
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = httpx.get(server.url + V1 + "/sweeps", headers=auth("not-a-token"))
    assert r.status_code == 401 and "invalid" in r.json()["detail"]
    sid = httpx.post(server.url + V1 + "/sweeps", content=tiny_yaml(),
                     headers=auth(alpha)).json()["id"]
    for path in (f"/sweeps/{sid}", f"/sweeps/{sid}/trials", f"/sweeps/{sid}/report"):
        r = httpx.get(server.url + V1 + path, headers=auth(beta))
        assert r.status_code == 404 and "beta" in r.json()["detail"], path
    assert httpx.post(server.url + V1 + f"/sweeps/{sid}/cancel",
                      headers=auth(beta)).status_code == 404
    assert sid not in [s["id"] for s in httpx.get(server.url + V1 + "/sweeps",
                                                  headers=auth(beta)).json()["items"]]
    # a revoked token stops working (the test server caches tokens for 0 s)
    from mutune.services.store import Store
    with Store.open(server.db) as store:
        newest = store.list_tokens()[-1]
        assert newest["project"] == "beta"
        store.token_revoked(newest["id"])
    assert httpx.get(server.url + V1 + "/sweeps", headers=auth(beta)).status_code == 401


def test_config_errors_are_422_with_field_value_rule(server):
    token = make_token(server.db, "alpha")
    post = lambda body, ct="application/yaml": httpx.post(  # noqa: E731
        server.url + V1 + "/sweeps", content=body, headers={**auth(token), "Content-Type": ct})
    d = make_tiny_config().model_dump(mode="json")
    d["search"]["scheduler"]["reduction_factor"] = 1
    d["widths"] = "many"
    r = post(json.dumps(d), "application/json")
    assert r.status_code == 422
    errors = {e["field"]: e for e in r.json()["detail"]["errors"]}
    assert errors["widths"]["value"] == "'many'" and "list" in errors["widths"]["rule"]
    assert "search.scheduler.reduction_factor" in errors
    assert errors["search.scheduler.reduction_factor"]["value"] == "1"
    d = make_tiny_config().model_dump(mode="json")
    d["ray"]["address"] = "ray://attacker.example:10001"
    r = post(json.dumps(d), "application/json")
    assert r.status_code == 422
    err = r.json()["detail"]["errors"][0]
    assert err["field"] == "ray.address" and "attacker" in err["value"]
    d = make_tiny_config().model_dump(mode="json")
    d["target"]["width"] = 16                 # a rule across sections names its field
    r = post(json.dumps(d), "application/json")
    assert r.status_code == 422
    err = r.json()["detail"]["errors"][0]
    assert (err["field"], err["value"]) == ("target.width", "16")
    assert "must be > the largest proxy width (32)" in err["rule"]
    r = post("a: [unclosed")
    assert r.status_code == 422 and r.json()["detail"]["errors"][0]["field"] == "(body)"
    r = post("{not json", "application/json")
    assert r.status_code == 422 and "JSON" in r.json()["detail"]["errors"][0]["rule"]


def test_nothing_in_a_config_is_evaluated_as_code(server):
    token = make_token(server.db, "alpha")
    marker = server.tmp / "pwned"
    body = (f"!!python/object/apply:os.system ['touch {marker}']\n")
    r = httpx.post(server.url + V1 + "/sweeps", content=body, headers=auth(token))
    assert r.status_code == 422
    body = tiny_yaml(name="tiny").replace(
        "name: tiny", f"name: !!python/object/apply:os.system ['touch {marker}']")
    assert "os.system" in body
    r = httpx.post(server.url + V1 + "/sweeps", content=body, headers=auth(token))
    assert r.status_code == 422
    assert not marker.exists()


def _text_config(path: str) -> str:
    d = yaml.safe_load(Path("configs/gpt-text.yaml").read_text()
                       if Path("configs/gpt-text.yaml").exists() else
                       (Path(__file__).resolve().parents[3] / "configs" / "gpt-text.yaml")
                       .read_text())
    d["data"] = {"kind": "text", "path": path}
    return yaml.safe_dump(d)


def test_data_paths_must_lie_under_the_data_roots(server):
    token = make_token(server.db, "alpha")

    def post(path):
        return httpx.post(server.url + V1 + "/sweeps", content=_text_config(path),
                          headers=auth(token))
    for bad in (str(server.tmp / "outside.txt"), "../outside.txt", "corpus/../../outside.txt",
                "/etc/passwd"):
        r = post(bad)
        assert r.status_code == 422, bad
        err = r.json()["detail"]["errors"][0]
        assert err["field"] == "data.path" and err["value"] == repr(bad)
        assert "data roots" in err["rule"]
    link = server.root / "escape"
    if not link.exists():
        link.symlink_to(server.tmp)
    assert post("escape/outside.txt").status_code == 422      # a symlink out of the root
    r = post("corpus")                                          # relative to the first root
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    from mutune.services.store import Store
    with Store.open(server.db) as store:
        stored = store.sweep_rows(sid)["sweep"]["config"]["data"]["path"]
    assert stored == str((server.root / "corpus").resolve())


def test_body_size_limit_is_413(server):
    token = make_token(server.db, "alpha")
    body = tiny_yaml() + "#" + "x" * (70 * 1024) + "\n"
    r = httpx.post(server.url + V1 + "/sweeps", content=body, headers=auth(token))
    assert r.status_code == 413 and "65536" in r.json()["detail"]

    def chunks():  # no Content-Length: counted while it streams
        yield tiny_yaml().encode()
        for _ in range(20):
            yield b"#" + b"y" * 8191 + b"\n"
    r = httpx.post(server.url + V1 + "/sweeps", content=chunks(), headers=auth(token))
    assert r.status_code == 413


def test_health_and_openapi(server):
    r = httpx.get(server.url + V1 + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["worker"] is False
    spec = httpx.get(server.url + "/openapi.json").json()
    assert {f"{V1}/sweeps", f"{V1}/sweeps/{{sweep_id}}", f"{V1}/sweeps/{{sweep_id}}/trials",
            f"{V1}/sweeps/{{sweep_id}}/report", f"{V1}/sweeps/{{sweep_id}}/cancel",
            f"{V1}/health"} <= set(spec["paths"])
    docs = httpx.get(server.url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_token_cli_creates_a_working_token_and_never_lists_it(server):
    import os
    import subprocess
    import sys

    env = {**os.environ, "MUTUNE_DB": server.db}
    made = subprocess.run([sys.executable, "-m", "mutune.services.cli", "token", "create",
                           "--project",
                           "gamma"], capture_output=True, text=True, env=env, check=True)
    token = made.stdout.strip()
    assert len(token) >= 43 and "shown only now" in made.stderr
    r = httpx.get(server.url + V1 + "/sweeps", headers=auth(token))
    assert r.status_code == 200 and r.json()["total"] == 0
    listed = subprocess.run([sys.executable, "-m", "mutune.services.cli", "token", "list"],
                            capture_output=True, text=True, env=env, check=True).stdout
    assert "gamma" in listed and token not in listed
