"""The page's test bench: a real evaluator HTTP server on 127.0.0.1 (the API, the page and
/endpoints over a real DuckDB file, with a fixed clock) in a thread of its own, a dataset that
shows every behaviour of the page, and a headless Debian chromium driven by chromedriver.

Selenium is synchronous, so the aiohttp server runs on its own event loop in a thread; the
browser talks to it over real TCP like any other client.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from gpu_health.evaluator.http.access import new_application
from gpu_health.evaluator.http.api.auth import TokenSet
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.http.index import add_index_route
from gpu_health.evaluator.http.ui import add_ui_routes
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.readings.maintenance import NodeRecord, upsert_nodes
from tests.evaluator.api_support import NOW, RULE_VERSION, add_prediction, add_samples
from tests.evaluator.api_support import sample as make_sample

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[4]
# A node name that is also markup: the page must show these characters, never run them.
EVIL = 'x<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
GAP_HOURS = range(30, 36)  # hours before NOW where n1/0 has no sample: six unknown hours


def artifacts() -> Path:
    """Where the screenshots go: $GPU_HEALTH_UI_ARTIFACTS (docs/ui.md's come from
    ``make ui-screenshots``), else .test-artifacts/ui in the checkout (git-ignored)."""
    folder = Path(os.environ.get("GPU_HEALTH_UI_ARTIFACTS") or REPO / ".test-artifacts" / "ui")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian chromium, chromium-driver; "
                    ".ci/run installs them)")


def _card_rows() -> list[Any]:
    hour = timedelta(hours=1)
    rows = [  # n1/0: a full card every 10 minutes for 10 days, corrected count rising, a gap
        make_sample("n1", 0, NOW - timedelta(minutes=10 * i), uuid="GPU-n1-0",
                    ecc_uncorrected_total=0, ecc_corrected_total=5000 - i // 3, retired_pages=0,
                    remapped_rows_pending=0, remapped_rows_failure=0)
        for i in range(6 * 24 * 10) if (10 * i) // 60 not in GAP_HOURS
    ]
    # n1/1: only the uncorrected counter (one fault: 2 -> 3), stalled for the last 3 hours
    rows += [make_sample("n1", 1, NOW - 3 * hour - timedelta(minutes=10 * i), uuid=None,
                         ecc_uncorrected_total=3 if i < 50 else 2) for i in range(9 * 6 * 24)]
    rows += [make_sample("n2", 0, NOW - timedelta(hours=h), uuid="GPU-n2-0",
                         ecc_corrected_total=7) for h in range(10 * 24)]
    rows += [make_sample(EVIL, 0, NOW - timedelta(hours=h), uuid="GPU-evil",
                         ecc_corrected_total=1) for h in range(3)]
    rows += [make_sample("sim-node", 0, NOW - timedelta(hours=h), uuid="GPU-sim",
                         source="simulated", ecc_corrected_total=100 + 3 * (h % 5))
             for h in range(48)]
    return rows


def _predictions(db: Database) -> None:
    """60 real predictions (14 hit, 10 miss, 33 pending, 3 voided: two pages of 50) with window
    N = 7 days; one with a signal this page does not know; two simulated ones."""
    day = timedelta(days=1)
    statuses = ["hit"] * 14 + ["miss"] * 10 + ["pending"] * 33 + ["voided"] * 3
    for i, status in enumerate(statuses):
        node, gpu = [("n1", 0), ("n2", 0), (EVIL, 0)][i % 3]
        matured = status in ("hit", "miss")
        t0 = NOW - (9 * day if matured else day) + timedelta(minutes=i)
        add_prediction(db, f"p{i:02d}", node, gpu, t0, status=status,
                       signal="mystery_signal" if i == 20 else "ecc_corrected_growth",
                       rule_version="v0-old" if i == 21 else RULE_VERSION,
                       resolved_at=t0 + 2 * day if status != "pending" else None,
                       outcome=f"{status} judged" if status != "pending" else None,
                       evidence=f"24h +{40 + i} corrected")
    for i in range(2):
        add_prediction(db, f"sim{i}", "sim-node", 0, NOW - day, source="simulated",
                       signal="ecc_corrected_growth", evidence="simulated degrading card")


def build_ui_dataset(db: Database) -> None:
    """n1 and the markup-named node (tenant a), n2 (tenant b); sim-node only simulated.

    n1 lists 4 cards of which 2 ever had a known counter; n1/0 has six hours without a sample;
    n1/1 reports only the uncorrected counter and stalled 3 hours ago."""
    upsert_nodes(db, [NodeRecord("n1", "a", "n1:10346", NOW, 4, "real"),
                      NodeRecord("n2", "b", "n2:10346", NOW, 1, "real"),
                      NodeRecord(EVIL, "a", "evil:10346", NOW, 1, "real")])
    add_samples(db, _card_rows())
    _predictions(db)


def make_app(db: Database, tokens: TokenSet | None) -> web.Application:
    ctx = ApiContext(db=db, clock=lambda: NOW, current_rule_version=RULE_VERSION, tokens=tokens,
                     listen_host="127.0.0.1", registry=CollectorRegistry())
    app = new_application(RequestMetrics(ctx.registry), tokens=tokens, listen_host="127.0.0.1")
    add_api_routes(app, ctx)
    add_index_route(app)
    add_ui_routes(app)
    return app


@contextmanager
def serve_in_thread(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (ephemeral port) from a thread; yields the base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    ready = threading.Event()
    found: dict[str, str] = {}

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        found["base"] = f"http://127.0.0.1:{port}"
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()),
                                              loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(30), "the UI test server did not start"
    try:
        yield found["base"]
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def chrome() -> Any:
    """A headless chromium with the performance log on (every network request is listed)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")
                                                             or CHROMEDRIVER))
