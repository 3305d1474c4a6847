"""The one error path of the evaluator's HTTP server, on a real server (``listening``) on
127.0.0.1: every error body is JSON, never echoes the request, and is counted once, whether it
comes from a handler, the router or aiohttp's own request parser; a taken port fails at once."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gpu_health.errors import ListenError, StoreError
from gpu_health.evaluator.app import EvaluatorApp
from gpu_health.evaluator.http.access import Rule, allow
from gpu_health.evaluator.http.errors import UNPARSEABLE
from gpu_health.evaluator.http.ops import add_ops_routes
from gpu_health.evaluator.http.server import bind, listening
from gpu_health.evaluator.main import main

SECRET = "s3cr3t-header-value-" + "x" * 9000  # over aiohttp's 8190-byte field limit


def host() -> EvaluatorApp:
    app = EvaluatorApp(start_loops=False)
    add_ops_routes(app.web_app, app)

    async def broken(_request: web.Request) -> web.Response:
        raise StoreError("the disk caught fire at /var/lib/secret", reason="query")

    async def bug(_request: web.Request) -> web.Response:
        raise KeyError("internal detail")

    for path, handler in (("/broken", broken), ("/bug", bug)):
        app.web_app.router.add_get(path, handler)
        allow(app.web_app, path, Rule.PUBLIC)
    return app


def counted(app: EvaluatorApp, name: str, **labels: str) -> float | None:
    return app.registry.get_sample_value(name, labels)


async def raw_request(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


async def test_handler_router_and_bug_errors_are_one_json_shape() -> None:
    app = host()
    sock = bind("127.0.0.1", 0)
    async with listening(app.web_app, sock) as port, aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{port}"
        for path, status, reason in (("/broken", 500, "query"), ("/bug", 500, "internal"),
                                     ("/nope?x=<script>", 404, "http_404")):
            async with http.get(base + path) as response:
                assert response.status == status
                assert response.content_type == "application/json"
                body = await response.json()
            assert set(body) == {"error", "param"}
            assert "secret" not in body["error"] and "<script>" not in body["error"]
            assert counted(app, "gpu_health_evaluator_http_errors_total", reason=reason) == 1
        async with http.post(base + "/metrics") as response:
            assert response.status == 405 and (await response.json())["param"] is None
    assert counted(app, "gpu_health_evaluator_http_requests_total", endpoint="unmatched",
                   code="404") == 1


async def test_an_unparseable_request_gets_json_without_its_bytes() -> None:
    app = host()
    async with listening(app.web_app, bind("127.0.0.1", 0)) as port:
        answer = await raw_request(
            port, f"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {SECRET}\r\n\r\n".encode())
        garbage = await raw_request(port, b"\x16\x03\x01 not http at all\r\n\r\n")
    for data in (answer, garbage):
        head, _, body = data.partition(b"\r\n\r\n")
        assert re.match(rb"HTTP/1\.[01] 400 ", head), data[:200]
        assert b"application/json" in head
        parsed = json.loads(body)
        assert parsed == {"error": UNPARSEABLE, "param": None}
        assert b"s3cr3t" not in data and b"not http" not in data


def test_a_taken_port_fails_before_anything_starts(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind("127.0.0.1", port).close()
        config = tmp_path / "ev.yml"
        config.write_text(f"web: {{listen_address: '127.0.0.1:{port}'}}\n"
                          "storage: {path: ev.duckdb}\nrules: {active: v1-ecc-growth}\n")
        assert main(["run", "--config", str(config)], environ={}) == 1
        assert not (tmp_path / "ev.duckdb").exists()  # refused before the store was opened
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
