"""The evaluator's ``--web.config.file`` on a real HTTPS listener (openssl certificates, an
aiohttp client): TLS, basic auth on every route (the exporter-toolkit's rule), the file
re-read when it changes (off the event loop), the refusal to combine it with a tokens file,
and exit 2 on a bad file."""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import bcrypt
import pytest
import yaml

from gpu_health.errors import ConfigError
from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.http.server import bind, listening
from gpu_health.webguard import WebGuard
from tests.evaluator.http.test_process_endpoints import _config
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in
from tests.tls_support import Pki, make_pki


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        s.bodies["gpu-01"] = render([Card(0, "GPU-0", a100(0))])
        yield s


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def web_config(path: Path, pki: Pki, users: dict[str, str]) -> Path:
    path.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(pki.server_cert), "key_file": str(pki.server_key)},
        "basic_auth_users": {u: bcrypt.hashpw(p.encode(), bcrypt.gensalt(4)).decode()
                             for u, p in users.items()}}))
    return path


async def test_tls_and_basic_auth_on_every_route(server: StandIn, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    file = web_config(tmp_path / "web.yml", pki, {"prometheus": "s3cret"})
    guard = WebGuard(file)
    service = build_service(_config(tmp_path, server), {}, clock=FakeClock(),
                            start_loops=False, guard=guard)
    async with listening(service.web_app, bind("127.0.0.1", 0), guard) as port:
        base = f"https://127.0.0.1:{port}"
        tls = aiohttp.TCPConnector(ssl=pki.client())
        async with aiohttp.ClientSession(connector=tls) as http:
            for path in ("/healthz", "/metrics", "/", "/api/v1/gpu-health/predictions"):
                async with http.get(base + path) as r:
                    assert r.status == 401, path
                    assert r.headers["WWW-Authenticate"] == 'Basic realm="gpu-health"'
                async with http.get(base + path, headers=basic("prometheus", "s3cret")) as r:
                    assert r.status == 200, path
            async with http.get(base + "/healthz", headers=basic("prometheus", "nope")) as r:
                assert r.status == 401
            web_config(file, pki, {"prometheus": "s3cret", "grafana": "pw"})  # no restart
            await asyncio.to_thread(guard.settle, 10)  # re-read in a worker thread
            async with http.get(base + "/readyz", headers=basic("grafana", "pw")) as r:
                assert r.status in (200, 503)  # answered: readiness is another matter
        async with aiohttp.ClientSession() as plain:
            with pytest.raises(aiohttp.ClientError):
                async with plain.get(f"http://127.0.0.1:{port}/healthz"):
                    pass
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ssl.create_default_context())) as untrusted:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                async with untrusted.get(base + "/healthz"):
                    pass
    service.db.close()


def test_basic_auth_and_a_tokens_file_are_refused_together(server: StandIn,
                                                           tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    guard = WebGuard(web_config(tmp_path / "web.yml", pki, {"prometheus": "s3cret"}))
    (tmp_path / "tokens.yml").write_text(yaml.safe_dump({"tokens": [
        {"name": "a", "sha256": "ab" * 32, "scopes": ["nodes:read"], "tenants": ["*"]}]}))
    config = _config(tmp_path, server, api={"tokens_file": "tokens.yml"})
    with pytest.raises(ConfigError, match="configure one of them"):
        build_service(config, {}, clock=FakeClock(), start_loops=False, guard=guard)


def test_a_bad_web_config_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "web.yml"
    bad.write_text("tls_server_config: {cert_file: a.crt, key_file: b.key}\n")
    script = Path(sys.executable).parent / "gpu-health-evaluator"
    result = subprocess.run([str(script), "run", "--web.config.file", str(bad)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "cannot load certificates" in result.stderr
