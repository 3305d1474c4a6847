"""``GET /``: the evaluator's first page names every GET route (read from the router) with its
access rule, and every link on it answers 200 on a real server (open loopback mode)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import pytest

from evaluator.http.access import routes
from tests.evaluator.http.test_process_endpoints import _config, _serve, _service
from tests.evaluator.ingest_support import Card, StandIn, a100, render, stand_in


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["gpu-01"] = render([Card(i, f"GPU-{i}", a100(i)) for i in range(2)])
        yield s


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


async def test_every_link_resolves_and_every_route_is_named(server: StandIn,
                                                            tmp_path: Path) -> None:
    service = _service(_config(tmp_path, server))
    runner, base = await _serve(service.app)
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/") as r:
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
        for path in listed - {"/"}:
            assert f"<li>{path}" in page or f'href="{path}"' in page, path
        assert "/api/v1/gpu-health/samples needs node_id, gpu_index" in page
        assert "(token with nodes:read)" in page and "awaiting calibration" in page
    finally:
        await runner.cleanup()
