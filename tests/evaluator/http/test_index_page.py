"""The evaluator's pages on a real server (open loopback mode). ``GET /endpoints``: the index
names every GET route (read from the router) with its access rule, and every link on it
answers 200; ``GET /`` is the GPU health page, with its headers and immutable assets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gpu_health.evaluator.http.access import routes
from gpu_health.evaluator.http.ui.routes import CSP, load_bundle
from tests.evaluator.http.test_process_endpoints import _config, _serve, _service
from tests.evaluator.ingest_support import Card, StandIn, a100, render, stand_in


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(2)])
        yield s


@pytest.fixture
async def running(server: StandIn, tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    """The composed evaluator service serving on 127.0.0.1, and its base URL."""
    service = _service(_config(tmp_path, server))
    runner, base = await _serve(service.app)
    try:
        yield service, base
    finally:
        await runner.cleanup()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


async def test_every_link_resolves_and_every_route_is_named(running: tuple[Any, str]) -> None:
    service, base = running
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/endpoints") as r:
            assert r.status == 200 and r.content_type == "text/html"
            assert r.headers["Content-Security-Policy"] == "default-src 'none'"
            assert r.headers["X-Content-Type-Options"] == "nosniff"
            page = await r.text()
        parser = _Links()
        parser.feed(page)
        assert len(parser.hrefs) >= 8
        for href in parser.hrefs:
            async with http.get(base + href) as r:
                assert r.status == 200, href
    listed = {path for method, path in routes(service.app.web_app) if method == "GET"}
    for path in {p for p in listed - {"/endpoints"} if not p.startswith("/ui/")}:
        assert f"<li>{path}" in page or f'href="{path}"' in page, path
    assert "/api/v1/gpu-health/samples needs node_id, gpu_index" in page
    assert "(token with nodes:read)" in page and "awaiting calibration" in page


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


async def test_the_evaluator_serves_the_page_and_its_assets(running: tuple[Any, str]) -> None:
    _, base = running
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/ui/"):
            async with http.get(base + path) as r:
                assert r.status == 200 and r.content_type == "text/html"
                assert r.headers["Content-Security-Policy"] == CSP
                assert r.headers["X-Content-Type-Options"] == "nosniff"
                assert r.headers["Cache-Control"] == "no-cache"
                page = await r.text()
        tags = Tags()
        tags.feed(page)
        assets = [a.get("src") or a.get("href") for t, a in tags.found
                  if t in ("script", "link")]
        assert len(assets) == 3
        for asset in assets:
            assert asset and asset.startswith(f"/ui/{load_bundle().digest}/")
            async with http.get(base + asset) as r:
                assert r.status == 200
                assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
                etag = r.headers["ETag"]
            async with http.get(base + asset, headers={"If-None-Match": etag}) as r:
                assert r.status == 304
        for missing in (f"/ui/{load_bundle().digest}/nope.js", "/ui/0000000000000000/app.js",
                        f"/ui/{load_bundle().digest}/..%2Froutes.py"):
            async with http.get(base + missing) as r:
                assert r.status == 404 and (await r.json())["error"] == "not found"
        async with http.get(base + "/endpoints") as r:
            assert 'href="/"' in await r.text()  # the index links the page
        assert 'href="/endpoints"' in page  # and the page the index
