"""The dashboard pages against a real `mutune serve`, over HTTP and in headless Chromium.

The browser test drives Debian's ``chromium`` with ``chromium-driver`` through Selenium and
saves screenshots to ``test-artifacts/`` (env ``MUTUNE_TEST_ARTIFACTS`` overrides). Without the
browser it is skipped, unless ``MUTUNE_REQUIRE_BROWSER=1`` (set by .ci/run) makes that a failure.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mutune.services.server.dashboard import fmt, pct
from mutune.services.report import build_report
from mutune.services.store import Store
from tests.services.conftest import REPO, make_token, start_server
from tests.services.seeded import COST, RULES, TARGET, seed_sweep

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("services.server.test_dashboard")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A server (no worker) over a database holding one seeded sweep of project alpha and one
    of project beta; yields (server, alpha's token, alpha's sweep id, beta's sweep id)."""
    tmp = tmp_path_factory.mktemp("dash")
    db = f"sqlite:///{tmp / 'mutune.db'}"
    with Store.open(db) as store:
        mine = seed_sweep(store, "alpha")
        theirs = seed_sweep(store, "beta")
    token = make_token(db, "alpha")
    srv = start_server(db, tmp)
    try:
        yield srv, token, mine, theirs
    finally:
        srv.kill(signal.SIGTERM)


@contextlib.contextmanager
def _login(url: str, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url) as c:
        r = c.post("/login", data={"token": token})
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert "mutune_token" in c.cookies
        yield c


def _cell(html: str, ident: str) -> str:
    m = re.search(rf'id="{re.escape(ident)}"[^>]*>([^<]*)<', html)
    assert m, f"no element id={ident}"
    return m.group(1).strip()


def test_pages_need_a_valid_token(seeded):
    srv, token, mine, _ = seeded
    r = httpx.get(srv.url + "/")
    assert r.status_code == 303 and r.headers["location"] == "/login"
    r = httpx.post(srv.url + "/login", data={"token": "wrong"})
    assert r.status_code == 401 and "invalid or revoked token" in r.text
    r = httpx.get(srv.url + f"/sweeps/{mine}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200


def test_sweeps_list_and_sweep_page_show_the_seeded_numbers(seeded):
    srv, token, mine, theirs = seeded
    with Store.open(srv.db) as store:
        report = build_report(store.sweep_rows(mine))
    with _login(srv.url, token) as c:
        listing = c.get("/").text
        row = listing[listing.index(f'id="sweep-{mine}"'):]
        row = row[:row.index("</tr>")]
        assert "completed" in row and "alpha" in row
        assert fmt(COST["total_gpu_hours"], ".6f") in row
        assert fmt(COST["saved_gpu_hours"], ".6f") in row and pct(COST["saved_fraction"]) in row
        assert f'id="sweep-{theirs}"' not in listing       # beta's sweep is not listed

        page = c.get(f"/sweeps/{mine}").text
        assert _cell(page, "status") == "completed"
        assert _cell(page, "target-width") == str(TARGET["width"])
        assert _cell(page, "target-val-loss") == fmt(TARGET["val_loss"], ".4f")
        for key in ("total_gpu_hours", "naive_gpu_hours", "saved_gpu_hours"):
            assert _cell(page, f"cost-{key}") == fmt(COST[key], ".6f")
        rule = RULES[0]
        lo, hi = rule["slope_interval"]
        assert f"[{fmt(lo)}, {fmt(hi)}]" in page and fmt(rule["slope"]) in page
        for p in report["proxies"]:
            assert fmt(p["best_val_loss"], ".4f") in page
        assert 'src="/sweeps/%d/loss_vs_lr.png"' % mine in page
        for plot in ("loss_vs_lr", "transfer"):
            png = c.get(f"/sweeps/{mine}/{plot}.png")
            assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
        r = c.get(f"/sweeps/{theirs}")
        assert r.status_code == 404 and "alpha" in r.text
        assert c.get(f"/sweeps/{theirs}/loss_vs_lr.png").status_code == 404


def test_rung_decisions_match_the_recorded_events(seeded):
    srv, token, mine, _ = seeded
    with Store.open(srv.db) as store:
        rows = store.sweep_rows(mine)
    width = {t["id"]: t["width"] for t in rows["trials"]}
    with _login(srv.url, token) as c:
        page = c.get(f"/sweeps/{mine}").text
    groups = {(width[e["trial_id"]], e["milestone"]) for e in rows["events"]}
    assert groups
    for w, m in groups:
        events = [e for e in rows["events"] if width[e["trial_id"]] == w and e["milestone"] == m]
        row = page[page.index(f'id="rung-{w}-{m}"'):]
        row = row[:row.index("</tr>")]
        assert f'class="judged">{len(events)}<' in row
        assert f'class="stopped">{sum(e["decision"] == "stop" for e in events)}<' in row


# ---------------------------------------------------------------- headless Chromium
def _browser_paths() -> tuple[str, str] | None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    return (chrome, driver) if chrome and driver else None


@pytest.fixture
def browser():
    paths = _browser_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        paths, why = None, f"selenium is not installed: {exc}"
    else:
        why = "Debian's chromium and chromium-driver are not installed"
    if paths is None:
        if os.environ.get("MUTUNE_REQUIRE_BROWSER") == "1":
            pytest.fail(why + " (MUTUNE_REQUIRE_BROWSER=1)")
        pytest.skip(why)
    opts = webdriver.ChromeOptions()
    opts.binary_location = paths[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1600"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(paths[1]), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.browser
def test_dashboard_in_headless_chromium(seeded, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    def wait_for(element_id: str):
        # a click navigates: wait for the next page's element (a loaded 2-core machine is slow)
        return WebDriverWait(browser, 30).until(
            ec.presence_of_element_located((By.ID, element_id)))

    srv, token, mine, theirs = seeded
    artifacts = Path(os.environ.get("MUTUNE_TEST_ARTIFACTS", REPO / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)

    browser.get(srv.url + "/")
    assert browser.current_url.endswith("/login")
    wait_for("token").send_keys(token)
    browser.find_element(By.ID, "submit").click()
    row = wait_for(f"sweep-{mine}")
    assert row.find_element(By.CLASS_NAME, "status").text == "completed"
    assert row.find_element(By.CLASS_NAME, "gpu-hours").text == fmt(COST["total_gpu_hours"],
                                                                     ".6f")
    assert row.find_element(By.CLASS_NAME, "saved-fraction").text == pct(COST["saved_fraction"])
    assert not browser.find_elements(By.ID, f"sweep-{theirs}")
    browser.save_screenshot(str(artifacts / "dashboard-sweeps.png"))

    row.find_element(By.LINK_TEXT, str(mine)).click()
    assert wait_for("sweep-id").text == str(mine)
    assert browser.find_element(By.ID, "target-val-loss").text == fmt(TARGET["val_loss"], ".4f")
    assert browser.find_element(By.ID, "cost-saved_gpu_hours").text == \
        fmt(COST["saved_gpu_hours"], ".6f")
    rule = browser.find_element(By.ID, "rule-lr")
    lo, hi = RULES[0]["slope_interval"]
    assert rule.find_element(By.CLASS_NAME, "slope-interval").text == f"[{fmt(lo)}, {fmt(hi)}]"
    assert rule.find_element(By.CLASS_NAME, "transferred").text == \
        fmt(RULES[0]["transferred_value"])
    plot = browser.find_element(By.ID, "loss-vs-lr")
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth",
                                  plot) > 300       # the PNG loaded and decoded
    shot = artifacts / "dashboard-sweep.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


@pytest.mark.browser
def test_a_command_line_sweep_shows_on_the_dashboard_with_its_summary(tmp_path, browser):
    """A sweep recorded the way `mutune run` records it (no cost.project) belongs to the
    default project, which `mutune token create` gives a token by default: its dashboard
    lists the sweep, and the sweep page opens with the report's summary."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    from typer.testing import CliRunner

    from mutune.pipeline import run_pipeline
    from mutune.search.backends.simulated_run import SimulatedBackend, SyntheticLoss
    from mutune.services.cli import app
    from mutune.services.report.summary import summarize
    from tests.conftest import make_tiny_config

    db = f"sqlite:///{tmp_path / 'mutune.db'}"
    cfg = make_tiny_config()
    assert cfg.cost.project is None
    with Store.open(db) as store:
        sweep_id = run_pipeline(cfg, store, out_dir=tmp_path / "out",
                                backend=SimulatedBackend(SyntheticLoss())).sweep_id
        summary = summarize(build_report(store.sweep_rows(sweep_id)))
    made = CliRunner().invoke(app, ["token", "create", "--db", db])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    srv = start_server(db, tmp_path)
    try:
        browser.get(srv.url + "/login")
        WebDriverWait(browser, 30).until(ec.presence_of_element_located((By.ID, "token")))\
            .send_keys(token)
        browser.find_element(By.ID, "submit").click()
        row = WebDriverWait(browser, 30).until(
            ec.presence_of_element_located((By.ID, f"sweep-{sweep_id}")))
        assert row.find_element(By.CLASS_NAME, "status").text == "completed"
        row.find_element(By.LINK_TEXT, str(sweep_id)).click()
        shown = WebDriverWait(browser, 30).until(
            ec.presence_of_element_located((By.ID, "summary")))
        items = [li.text for li in shown.find_elements(By.TAG_NAME, "li")]
        assert items == [*summary.answer, *summary.attention] and summary.answer
    finally:
        srv.kill(signal.SIGTERM)
