"""The one outbound HTTP owner: what every client's requests carry, on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gpu_health import __version__
from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.outbound import USER_AGENT, ClientOptions, client_session
from tests.evaluator.ingest_support import FakeClock


@asynccontextmanager
async def recorder() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(text="")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")), seen


async def test_every_session_names_itself_and_carries_its_auth() -> None:
    async with recorder() as (base, seen):
        options = ClientOptions(headers={"Accept": "application/json"},
                                bearer_token="t0ken")
        async with client_session(options) as session, session.get(base + "/x") as response:
            assert response.status == 200
    assert f"gpu-health-evaluator/{__version__}" == USER_AGENT
    assert seen[0]["User-Agent"] == USER_AGENT
    assert seen[0]["Authorization"] == "Bearer t0ken"
    assert seen[0]["Accept"] == "application/json"


async def test_the_scraper_uses_it() -> None:
    async with (
        recorder() as (base, seen),
        Scraper(timeout=5, max_concurrency=2, max_response_bytes=1 << 20,
                clock=FakeClock()) as scraper,
    ):
        await scraper.scrape(Target(base.removeprefix("http://").rstrip("/"), "n1"))
    assert seen[0]["User-Agent"] == USER_AGENT
    assert seen[0]["Accept"].startswith("text/plain;version=0.0.4")


@pytest.mark.parametrize("insecure", [True, False])
async def test_tls_options_reach_the_connector(insecure: bool) -> None:
    async with client_session(ClientOptions(insecure_skip_verify=insecure)) as session:
        connector = session.connector
        assert connector is not None
        assert (getattr(connector, "_ssl", None) is False) is insecure
