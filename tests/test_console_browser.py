"""The web console in a real headless browser (Debian's chromium and its chromedriver, driven
by selenium; nothing is downloaded) against the real `stackroute serve` on loopback, with a
keyword engine standing in for the model (tests/console_kit.py).

Login with the API key, the sessions list, a session paused at a gate shown as a tree of
frames with the gate's exact call, Approve, the session finishing; the catalogs page with its
lint finding and a request routed step by step. Screenshots of each page go to the test's
temp folder, and to STACKROUTE_SCREENSHOT_DIR when set (docs/screenshots/ was made so).

Without a system browser the test is skipped with the command that installs one; under CI
(CI=true) a missing browser fails it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_kit import BANK

TESTS_DIR = Path(__file__).resolve().parent
API_KEY = "console-test-key-7f3a"
CHROMIUM = ("chromium", "chromium-browser")
CHROMEDRIVER = "/usr/bin/chromedriver"
START_TIMEOUT_S = 90.0
WAIT_S = 60.0


def _browser() -> tuple[str, str] | None:
    binary = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver = CHROMEDRIVER if os.path.exists(CHROMEDRIVER) else shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


def _require_browser() -> tuple[str, str]:
    found = _browser()
    if found is not None:
        return found
    message = ("no system browser: the console test needs Debian's chromium and "
               "chromium-driver (apt-get install -y chromium chromium-driver)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; under CI=true a missing browser is a failure")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`stackroute serve` (the installed command) with the bank catalog and an API key."""
    _require_browser()
    folder = tmp_path_factory.mktemp("console")
    catalog = folder / "bank.json"
    catalog.write_text(json.dumps(BANK), encoding="utf-8")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "STACKROUTE_LEAF_ISOLATION": "thread", "STACKROUTE_API_KEY": API_KEY}
    command = [str(Path(sys.executable).with_name("stackroute")), "serve",
               "--engine", "console_kit:build_keyword_engine", "--catalog", str(catalog),
               "--db", str(folder / "stackroute.db"), "--port", str(port),
               "--log-level", "warning"]
    log = open(folder / "serve.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                               cwd=folder)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base_url, process, folder / "serve.log")
        client = httpx.Client(base_url=base_url, timeout=30,
                              headers={"Authorization": f"Bearer {API_KEY}"})
        catalog_id = client.get("/v1/catalogs").json()["catalogs"][0]["id"]
        yield {"base_url": base_url, "client": client, "catalog_id": catalog_id}
        client.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"stackroute serve exited with {process.returncode}:\n"
                               + log.read_text(errors="replace")[-4000:])
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("stackroute serve was not ready in time:\n"
                       + log.read_text(errors="replace")[-4000:])


@pytest.fixture(scope="module")
def browser(server: dict[str, Any]) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1100", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, css: str, *, text: str | None = None, timeout_s: float = WAIT_S) -> Any:
    """The first element matching `css` (whose text contains `text`), once it is displayed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout_s)
    if text is None:
        return wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))
    wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return driver.find_element(By.CSS_SELECTOR, css)


def _sign_in_if_asked(driver: Any, target_css: str) -> None:
    """Wait for the page at `target_css`, signing in first if the login form shows (the key
    stays in the tab's sessionStorage, so a second page in the same tab is not asked)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(d: Any) -> str | None:
        if d.find_elements(By.CSS_SELECTOR, "#login:not([hidden])"):
            return "login"
        return "page" if d.find_elements(By.CSS_SELECTOR, target_css) else None

    if WebDriverWait(driver, WAIT_S).until(ready) == "login":
        driver.find_element(By.ID, "api-key").send_keys(API_KEY)
        driver.find_element(By.ID, "login-submit").click()
    _wait(driver, target_css)


def _screenshot(driver: Any, tmp_path: Path, name: str) -> None:
    """Save the whole page (up to 3000 px high) as NAME.png."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 1400, "height": min(max(height, 800), 3000), "deviceScaleFactor": 1,
        "mobile": False})
    path = tmp_path / f"{name}.png"
    try:
        driver.save_screenshot(str(path))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    wanted = os.environ.get("STACKROUTE_SCREENSHOT_DIR")
    if wanted:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(wanted) / path.name)


def _create(client: httpx.Client, catalog_id: str, task: str) -> str:
    r = client.post("/v1/sessions", json={"catalog": catalog_id, "task": task})
    assert r.status_code == 201, r.text
    session_id: str = r.json()["id"]
    return session_id


def _wait_status(client: httpx.Client, session_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        view: dict[str, Any] = client.get(f"/v1/sessions/{session_id}").json()
        if view["status"] == status:
            return view
        assert time.monotonic() < deadline, f"session is {view['status']}, not {status}"
        time.sleep(0.05)


def test_console_session_gate_approve_in_a_real_browser(
        server: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    client, catalog_id = server["client"], server["catalog_id"]
    done_id = _create(client, catalog_id, "how many funds are in my account?")
    _create(client, catalog_id, "do I need an umbrella in Lisbon?")
    gated_id = _create(client, catalog_id, "send 5 euros to Asha")
    gated = _wait_status(client, gated_id, "paused")
    _wait_status(client, done_id, "done")
    assert gated["pending"]["path"] == "payments/send_money" and gated["pending"]["is_gated"]

    # The page loads without the key and asks for it; the key is not in what was served.
    browser.get(f"{server['base_url']}/ui")
    _wait(browser, "#login-form")
    assert API_KEY not in browser.page_source
    browser.find_element(By.ID, "api-key").send_keys(API_KEY)
    browser.find_element(By.ID, "login-submit").click()

    # Sessions: every session with its status; the filter narrows the list.
    _wait(browser, f'tr[data-session-id="{gated_id}"][data-status="paused"]')
    _wait(browser, f'tr[data-session-id="{done_id}"][data-status="done"]')
    rows = browser.find_elements(By.CSS_SELECTOR, "#sessions-body tr[data-session-id]")
    assert len(rows) == 3

    # Live: a new session appears while it runs, its events stream in, and it ends.
    slow_id = _create(client, catalog_id, "slowly check the funds of my account")
    running = f'tr[data-session-id="{slow_id}"][data-status="running"]'
    _wait(browser, running)
    WebDriverWait(browser, WAIT_S, ignored_exceptions=(  # its events stream in
        NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: int(d.find_element(By.CSS_SELECTOR, f"{running} td.live").text or 0) > 0)
    _screenshot(browser, tmp_path, "sessions")
    _wait(browser, f'tr[data-session-id="{slow_id}"][data-status="done"]')
    browser.find_element(By.ID, "filter-text").send_keys("Asha")
    _wait(browser, "#sessions-count", text="1 of 4 shown")
    browser.find_element(By.ID, "filter-text").clear()

    # One session: the tree of frames, the routing calls' bars, the gate's exact call.
    browser.find_element(By.CSS_SELECTOR, f'a[href="#/session/{gated_id}"]').click()
    _wait(browser, ".gate #approve")
    frames = browser.find_elements(By.CSS_SELECTOR, "details.frame")
    assert [f.get_attribute("data-frame-id") for f in frames] == ["0", "1"]  # root, payments
    cards = browser.find_elements(By.CSS_SELECTOR, ".route-card")
    assert len(cards) == 2  # the root chose payments, payments chose send_money
    chosen = [c.find_element(By.CSS_SELECTOR, ".option.chosen").get_attribute("data-option")
              for c in cards]
    assert chosen == ["payments", "send_money"]
    options = cards[1].find_elements(By.CSS_SELECTOR, ".option")
    menu = [e["menu"] for e in gated["trace"] if e["kind"] == "route"][1]
    assert [o.get_attribute("data-option") for o in options] == menu
    assert menu[:3] == ["send_money", "transfer_money", "balance"]
    assert options[0].find_element(By.CSS_SELECTOR, ".p").text == "0.800"
    assert "prefilled" in cards[1].text and "cached" in cards[1].text and "ms" in cards[1].text
    gate = browser.find_element(By.CSS_SELECTOR, ".gate")
    assert gate.find_element(By.CSS_SELECTOR, ".gate-path").text == "payments/send_money"
    assert json.loads(gate.find_element(By.CSS_SELECTOR, ".gate-arguments").text) == {
        "payee": "Asha", "amount": 5}
    _screenshot(browser, tmp_path, "session-gate")

    # Approve: the page sends the pending call's digest; the session finishes.
    browser.find_element(By.ID, "approve").click()
    _wait(browser, '#view[data-status="done"]')
    _wait(browser, ".ev-result", text="send_money")
    assert not browser.find_elements(By.CSS_SELECTOR, ".gate")
    final = client.get(f"/v1/sessions/{gated_id}").json()
    assert final["status"] == "done"
    assert [c["path"] for c in final["calls"]] == ["payments/send_money"]
    assert final["calls"][0]["arguments"] == {"payee": "Asha", "amount": 5}
    _screenshot(browser, tmp_path, "session-done")

    # Reject: the run goes on without the call.
    rejected_id = _create(client, catalog_id, "send 5 euros to Asha, again")
    _wait_status(client, rejected_id, "paused")
    browser.get(f"{server['base_url']}/ui#/session/{rejected_id}")
    _wait(browser, ".gate #reject").click()
    _wait(browser, '#view[data-status="done"]')
    assert _wait(browser, ".ev-gate_reject").text.split()[1:3] == ["REJECTED", "call"]
    final = client.get(f"/v1/sessions/{rejected_id}").json()
    assert final["status"] == "done" and final["calls"] == []


def test_console_catalog_lint_search_and_try_in_a_real_browser(
        server: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    catalog_id = server["catalog_id"]
    browser.get(f"{server['base_url']}/ui#/catalogs")
    _sign_in_if_asked(browser, f'tr[data-catalog-id="{catalog_id}"]')
    browser.find_element(By.CSS_SELECTOR, f'a[href="#/catalog/{catalog_id}"]').click()

    # The lint finding (two leaves with one description) sits on both leaves it concerns.
    _wait(browser, ".finding-list .finding", text="duplicate_leaves")
    for leaf in ("payments/send_money", "payments/transfer_money"):
        mark = _wait(browser, f'.leaf[data-path="{leaf}"] .finding-mark')
        assert mark.text == "⚑ 1"
    assert not browser.find_elements(By.CSS_SELECTOR, '.leaf[data-path="weather"] .finding-mark')

    # Search a leaf.
    browser.find_element(By.ID, "leaf-search").send_keys("forecast")
    _wait(browser, "#search-count", text="1 matching leaves")
    shown = browser.find_elements(By.CSS_SELECTOR, "#catalog-tree .leaf")
    assert [e.get_attribute("data-path") for e in shown] == ["weather"]
    browser.find_element(By.ID, "leaf-search").clear()
    browser.execute_script("document.getElementById('leaf-search')"
                           ".dispatchEvent(new Event('input'))")

    # Try a request: it routes one call at a time down to the leaf.
    browser.find_element(By.ID, "try-query").send_keys("send 5 euros to Asha")
    browser.find_element(By.ID, "try-submit").click()
    _wait(browser, ".try-end", text="call payments/send_money")
    steps = browser.find_elements(By.CSS_SELECTOR, "#try-steps .route-card .decision")
    assert [s.text for s in steps] == ["payments", "send_money"]
    on_route = browser.find_elements(By.CSS_SELECTOR, "#catalog-tree .on-route")
    assert {e.text for e in on_route} == {"bank", "payments", "send_money"}
    _screenshot(browser, tmp_path, "catalog")


def test_console_asks_for_a_missing_value_in_a_real_browser(
        server: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    """"send money to Asha" holds no amount: the page shows a form for it instead of Approve;
    a refused answer shows the server's words and keeps the form; the right one moves the call
    to its gate (send_money is sensitive), where Approve runs it."""
    from selenium.webdriver.common.by import By

    client, catalog_id = server["client"], server["catalog_id"]
    asking_id = _create(client, catalog_id, "send money to Asha")
    asking = _wait_status(client, asking_id, "paused")
    assert asking["pending"]["missing_values"] == ["amount"]
    browser.get(f"{server['base_url']}/ui#/session/{asking_id}")
    _sign_in_if_asked(browser, '.gate[data-asking="values"]')

    gate = browser.find_element(By.CSS_SELECTOR, ".gate")
    assert gate.find_element(By.CSS_SELECTOR, ".gate-missing").text == "amount"
    amount = gate.find_element(By.CSS_SELECTOR, '.value-field[data-name="amount"] input')
    assert amount.get_attribute("type") == "number"
    assert not browser.find_elements(By.ID, "approve")  # no approval while a value is missing
    assert browser.find_element(By.ID, "reject").is_displayed()  # declining stays possible

    # Sent empty: the server names what is still needed; the form stays.
    browser.find_element(By.ID, "send-values").click()
    assert "still needs amount" in _wait(browser, "#values-error", text="amount").text
    assert client.get(f"/v1/sessions/{asking_id}").json()["pending"] == asking["pending"]
    _screenshot(browser, tmp_path, "session-values")

    amount.send_keys("500")
    browser.find_element(By.ID, "send-values").click()
    _wait(browser, '.gate[data-asking="approval"] #approve')
    assert _wait(browser, ".gate-supplied").text == "amount"
    gate = browser.find_element(By.CSS_SELECTOR, ".gate")
    assert json.loads(gate.find_element(By.CSS_SELECTOR, ".gate-arguments").text) == {
        "payee": "Asha", "amount": 500}
    browser.find_element(By.ID, "approve").click()
    _wait(browser, '#view[data-status="done"]')
    final = client.get(f"/v1/sessions/{asking_id}").json()
    assert [c["path"] for c in final["calls"]] == ["payments/send_money"]
    assert final["calls"][0]["arguments"] == {"payee": "Asha", "amount": 500}
    assert final["calls"][0]["supplied_values"] == ["amount"]
