"""The GPU health page in a real headless chromium against a real evaluator server: every
behaviour of the reference design's page asserted from the DOM, a screenshot per block
(ui_support.artifacts()), and no request to any host but the evaluator."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.api_support import TOKENS, token_set
from tests.evaluator.http.ui.ui_support import (
    EVIL,
    artifacts,
    build_ui_dataset,
    chrome,
    make_app,
    require_browser,
    serve_in_thread,
)

pytestmark = pytest.mark.timeout(120)
WAIT = 20  # seconds a DOM condition may take to appear (polled, not slept)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    require_browser()
    database = DuckDBDatabase(tmp_path_factory.mktemp("ui") / "ui.duckdb")
    build_ui_dataset(database)
    yield database
    database.close()


@pytest.fixture(scope="module")
def base(db: Database) -> Iterator[str]:
    with serve_in_thread(make_app(db, None)) as url:
        yield url


@pytest.fixture(scope="module")
def tenant_base(db: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_in_thread(make_app(db, token_set(tmp_path_factory.mktemp("tokens")))) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    driver = chrome()
    yield driver
    driver.quit()


@pytest.fixture
def page(browser: Any, base: str) -> Iterator[Any]:
    browser.execute_cdp_cmd("Network.enable", {})
    yield browser
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    browser.execute_script("sessionStorage.clear()")


def _open(driver: Any, url: str) -> None:
    driver.get("about:blank")  # a new document even when only the #fragment differs
    driver.get(url)
    _until(driver, "document.querySelector('#capabilities table, #capabilities .failed') "
                   "!== null && document.querySelector('#ecc .loading') === null")


def _until(driver: Any, script: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT, poll_frequency=0.05).until(
        lambda d: d.execute_script(f"return Boolean({script})"))


def _text(driver: Any, selector: str) -> str:
    return str(driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null",
        selector))


def _texts(driver: Any, selector: str) -> list[str]:
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", selector))


def _shot(driver: Any, selector: str, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, selector).screenshot(str(artifacts() / f"{name}.png"))


def _api(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + "/api/v1/gpu-health/" + path, timeout=10) as response:
        return json.load(response)


def test_notice_while_loading_after_success_and_after_failure(page: Any, base: str) -> None:
    page.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 1500, "downloadThroughput": -1, "uploadThroughput": -1})
    page.get(base + "/")
    local = _text(page, "#notice")
    assert "awaiting calibration" in local  # the page's own text, before any answer
    assert page.execute_script("return document.getElementById('notice').dataset.origin") \
        == "local"
    assert "loading" in _text(page, "#stats")
    _until(page, "document.getElementById('notice').dataset.origin === 'api'")
    assert _text(page, "#notice") == _api(base, "prediction-stats")["disclaimer"]  # verbatim
    page.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    page.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*prediction-stats*"]})
    _open(page, base + "/")
    _until(page, "document.querySelector('#stats .failed') !== null")
    assert _text(page, "#notice") == local  # the fallback, never an empty notice
    assert "could not load" in _text(page, "#stats")


def test_statistics_cards_sufficient_and_not(page: Any, base: str) -> None:
    _open(page, base + "/")
    sufficient = "article[data-window='7']"
    assert "58.3%" in _text(page, f"{sufficient} [data-ratio='precision']")
    assert "95% CI 38.8% – 75.5%" in _text(page, f"{sufficient} [data-ratio='precision']")
    short = "article[data-window='30']"
    assert "Not enough samples" in _text(page, short)
    assert _texts(page, f"{short} .reasons li") == [
        "0 matured predictions (hit + miss), needs 20"]
    assert not _texts(page, f"{short} .ratio")  # no ratio at all, so never a 0%
    for card in (sufficient, short):  # raw counts always
        assert "monitorablecards4" in _text(page, f"{card} dl.counts").replace(" ", "")
        assert "observeddays10.0" in _text(page, f"{card} dl.counts").replace(" ", "")
    assert "pending33" in _text(page, f"{sufficient} dl").replace(" ", "")
    _shot(page, "article[data-window='7']", "stats-sufficient")
    _shot(page, "article[data-window='30']", "stats-insufficient")
    _shot(page, "#stats-block", "stats")


def test_prediction_list_filter_resets_to_page_one(page: Any, base: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(page, base + "/")
    assert _text(page, "#page-info") == "page 1 of 2 · 60 predictions"
    assert len(_texts(page, "tr.prediction")) == 50
    page.find_element(By.ID, "page-next").click()
    _until(page, "document.getElementById('page-info').textContent.startsWith('page 2')")
    assert len(_texts(page, "tr.prediction")) == 10
    Select(page.find_element(By.ID, "status-filter")).select_by_value("hit")
    _until(page, "document.getElementById('page-info').textContent === '14 predictions'")
    assert set(_texts(page, "tr.prediction .badge")) == {"hit"}
    assert not page.find_element(By.ID, "page-prev").is_displayed()  # back on page 1
    Select(page.find_element(By.ID, "status-filter")).select_by_value("")
    _until(page, "document.querySelectorAll('tr.prediction').length === 50")
    unknown_type = _text(page, "tr[data-id='p20'] td.type")
    assert unknown_type.startswith("unrecognised") and "mystery_signal" in unknown_type
    assert "not the current version" in _text(page, "tr[data-id='p21'] td.version")
    _shot(page, "#predictions-block", "predictions")


def test_empty_list_says_no_prediction_is_not_healthy(page: Any, base: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(page, base + "/")
    Select(page.find_element(By.ID, "status-filter")).select_by_value("voided")
    _until(page, "document.getElementById('page-info').textContent === '3 predictions'")
    page.find_element(By.CSS_SELECTOR, "input[value=simulated]").click()
    _open_after_switch(page)
    Select(page.find_element(By.ID, "status-filter")).select_by_value("voided")
    _until(page, "document.querySelector('#predictions .empty') !== null")
    assert "does not mean every card is healthy" in _text(page, "#predictions .empty")


def _open_after_switch(driver: Any) -> None:
    _until(driver, "document.querySelector('#capabilities table') !== null && "
                   "document.querySelector('#ecc .loading') === null")


def test_ecc_rate_shades_unknown_hours_and_says_unknown_for_a_missing_counter(
        page: Any, base: str) -> None:
    _open(page, base + "/#card=n1/0")
    corrected = "#ecc [data-series='ecc_corrected_total']"
    unknown = page.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' rect.unknown')]"
        ".map(r => r.dataset.reason)", corrected)
    assert len(unknown) >= 6 and set(unknown) == {"stale_or_missing"}
    known = _texts(page, f"{corrected} rect.bar title")
    assert known and all("+2" in t for t in known)  # a measured +2 per hour
    assert "of 168 hours computable" in _text(page, f"{corrected} .coverage")
    _shot(page, "#ecc-block", "ecc-rate")
    _open(page, base + "/#card=n1/1")
    assert _text(page, "#ecc [data-series='ecc_corrected_total'] .big-unknown") == "unknown"


def test_capability_matrix_stalled_and_unsampled_cards(page: Any, base: str) -> None:
    _open(page, base + "/")
    assert "collection stalled" in _text(page, "tr.card-row[data-node='n1'][data-gpu='1']")
    assert "collection stalled" not in _text(page, "tr.card-row[data-node='n1'][data-gpu='0']")
    assert "2 more cards, all counters unknown" in _text(page, "tr.unsampled-row[data-node='n1']")
    assert _text(page, "#capabilities-note") == _api(base, "capabilities")["note"]
    _shot(page, "#capabilities-block", "capabilities")


def test_simulated_switch_clears_first_then_shows_banner_and_badges(page: Any,
                                                                   base: str) -> None:
    from selenium.webdriver.common.by import By

    _open(page, base + "/")
    page.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 1500, "downloadThroughput": -1, "uploadThroughput": -1})
    page.find_element(By.CSS_SELECTOR, "input[value=simulated]").click()
    main = _text(page, "main")
    assert "n1" not in main and "GPU-n1-0" not in main  # the real rows are gone at once
    assert page.find_element(By.ID, "simulated-banner").is_displayed()
    assert all(b.is_displayed() for b in page.find_elements(By.CSS_SELECTOR, ".badge.simulated"))
    _open_after_switch(page)
    assert set(_texts(page, "tr.card-row .node")) == {"sim-node"}
    assert {t.split(" ")[0] for t in _texts(page, "tr.prediction .card-cell")} == {"sim-node"}
    page.save_screenshot(str(artifacts() / "simulated.png"))
    page.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    page.find_element(By.CSS_SELECTOR, "input[value=real]").click()
    _open_after_switch(page)
    assert not page.find_element(By.ID, "simulated-banner").is_displayed()
    assert "sim-node" not in _text(page, "main")


def test_a_link_opens_the_page_on_the_simulated_source(page: Any, base: str) -> None:
    """The demo's banner links ``/?source=simulated``; the address follows the switch."""
    from selenium.webdriver.common.by import By

    _open(page, base + "/?source=simulated")
    assert page.find_element(By.CSS_SELECTOR, "input[value=simulated]").is_selected()
    assert page.find_element(By.ID, "simulated-banner").is_displayed()
    assert set(_texts(page, "tr.card-row .node")) == {"sim-node"}
    page.find_element(By.CSS_SELECTOR, "input[value=real]").click()
    _open_after_switch(page)
    assert "source=" not in page.current_url and "sim-node" not in _text(page, "main")
    _open(page, base + "/?source=bogus")  # anything else is the real data
    assert page.find_element(By.CSS_SELECTOR, "input[value=real]").is_selected()
    assert not page.find_element(By.ID, "simulated-banner").is_displayed()


def test_a_malformed_card_link_opens_the_page_as_if_it_named_none(page: Any,
                                                                    base: str) -> None:
    """``#card=%E0%A4%A/0`` threw a URIError and left the ECC block on "loading..."."""
    _open(page, base + "/#card=%E0%A4%A/0")
    assert "loading" not in _text(page, "#ecc")
    assert page.execute_script("return document.querySelectorAll('.loading').length") == 0


def test_markup_in_a_node_name_is_text(page: Any, base: str) -> None:
    _open(page, base + "/")
    assert EVIL in _texts(page, "tr.card-row .node")
    assert page.execute_script("return window.pwned === undefined")
    assert page.execute_script("return document.querySelectorAll('main img, main script')"
                               ".length") == 0


def test_no_request_leaves_the_evaluator_and_nothing_refreshes(page: Any, base: str) -> None:
    page.get_log("performance")  # drop what earlier tests left
    _open(page, base + "/")
    urls = []
    for entry in page.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    assert urls and all(u.startswith(base + "/") for u in urls), urls
    api = sorted(u.split("?")[0].rsplit("/", 1)[1] for u in urls if "/api/v1/" in u)
    assert api == ["capabilities", "ecc-rate", "prediction-stats", "predictions"]


def test_token_asked_kept_for_the_session_and_tenant_scoped(browser: Any,
                                                            tenant_base: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(tenant_base + "/")
    _until(browser, "!document.getElementById('token-form').hidden")
    assert "could not load" in _text(browser, "#stats")
    browser.find_element(By.ID, "token-input").send_keys(TOKENS["team-a"][0])
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    _open_after_switch(browser)
    assert browser.execute_script("return sessionStorage.getItem('gpu-health-token')") \
        == TOKENS["team-a"][0]
    assert browser.execute_script("return document.cookie") == ""
    assert "n2" not in set(_texts(browser, "tr.card-row .node") + _texts(browser,
                                                                          "tr.prediction .node"))
    assert not _texts(browser, "tr[data-node='n2']")
    _open(browser, tenant_base + "/#card=n2/0")  # another tenant's card: not found, nothing else
    assert _text(browser, "#ecc") == "not found"
    browser.find_element(By.ID, "token-forget").click()
    _until(browser, "!document.getElementById('token-form').hidden")
    assert browser.execute_script("return sessionStorage.length") == 0
    assert not _texts(browser, "tr.card-row")


def test_screenshot_folder_holds_every_block(page: Any, base: str) -> None:
    names = {p.stem for p in Path(artifacts()).glob("*.png")}
    assert {"stats", "predictions", "ecc-rate", "capabilities", "simulated"} <= names
