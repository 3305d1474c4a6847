"""Every route, enumerated from the router, with the tokens of two tenants and with none: no
body of one tenant carries the other's node, UUID or target URL; public routes carry neither.

A real evaluator (``build_service``) with a tokens file scrapes two real stand-in exporters
(tenant a: node-a, tenant b: node-b), stores their samples, holds a prediction and an open
alert for each node and a fresh /metrics snapshot, and is served on 127.0.0.1.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.http.access import RULES, Rule, routes
from gpu_health.evaluator.http.api.auth import hash_token
from gpu_health.evaluator.http.server import bind, listening
from tests.evaluator.api_support import add_prediction
from tests.evaluator.ingest_support import Card, FakeClock, StandIn, a100, render, stand_in

T0 = FakeClock().now
SECRETS = {"a": "token-of-tenant-a", "b": "token-of-tenant-b", "admin": "token-of-admin"}
OTHER = {"a": "b", "b": "a"}


def marks(tenant: str, server: StandIn) -> tuple[str, ...]:
    """What identifies the tenant's node anywhere in a body."""
    return (f"node-{tenant}", f"GPU-{tenant.upper()}{tenant.upper()}",
            f"127.0.0.1:{server.port}/t/node-{tenant}")


def tokens_file(path: Path) -> Path:
    entries = [{"name": name, "sha256": hash_token(secret),
                "scopes": ["nodes:read", "alerts:write"],
                "tenants": ["*"] if name == "admin" else [name]}
               for name, secret in SECRETS.items()]
    path.write_text(yaml.safe_dump({"tokens": entries}), encoding="utf-8")
    return path


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with stand_in() as s:
        for tenant in ("a", "b"):
            s.bodies[f"node-{tenant}"] = render(
                [Card(0, f"GPU-{tenant.upper()}{tenant.upper()}", a100(5, 0))])
        yield s


def service(tmp_path: Path, server: StandIn, listen: str = "127.0.0.1:0") -> Service:
    targets = [{"targets": [f"127.0.0.1:{server.port}"],
                "labels": {"node": f"node-{t}", "tenant": t,
                           "__metrics_path__": f"/t/node-{t}/metrics"}} for t in ("a", "b")]
    config = parse_config({
        "static_configs": targets, "storage": {"path": "ev.duckdb"},
        "web": {"listen_address": listen},
        "api": {"tokens_file": str(tokens_file(tmp_path / "tokens.yml"))},
        "alerting": {"alertmanagers": []}, "rules": {"active": "v1-ecc-growth"},
    }, base=tmp_path)
    return build_service(config, {}, clock=FakeClock(T0 + timedelta(hours=1)),
                         start_loops=False)


async def fill(svc: Service) -> None:
    """Samples, a prediction and an open alert per node, and a /metrics snapshot."""
    assert svc.pipeline is not None
    assert (await svc.pipeline.run_cycle()).rows_written == 2
    for tenant in ("a", "b"):
        add_prediction(svc.db, f"p-{tenant}", f"node-{tenant}", 0, T0,
                       gpu_uuid=f"GPU-{tenant.upper()}{tenant.upper()}")
    assert svc.alerts is not None
    await svc.alerts.tick()
    assert await svc.prediction_state.refresh() is not None


def requests_for(method: str, path: str, tenant: str | None) -> list[tuple[str, str, Any]]:
    """(method, url path, json body) trying the route plainly and aimed at the other node."""
    other = f"node-{OTHER[tenant]}" if tenant else "node-a"
    filled = re.sub(r"\{[^}]+\}", other, path)
    if method == "POST":
        return [(method, filled, {"reason": "checked"})]
    return [(method, filled, None), (method, f"{filled}?node_id={other}&gpu_index=0", None)]


async def call(http: aiohttp.ClientSession, base: str, method: str, path: str, body: Any,
               token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.request(method, base + path, json=body, headers=headers) as response:
        return response.status, await response.text()


async def test_no_route_shows_one_tenant_the_other_s_nodes(server: StandIn,
                                                             tmp_path: Path) -> None:
    svc = service(tmp_path, server)
    async with listening(svc.web_app, bind("127.0.0.1", 0)) as port, \
            aiohttp.ClientSession() as http:
        await fill(svc)
        base = f"http://127.0.0.1:{port}"
        walked = sorted(set(routes(svc.web_app)))
        assert len(walked) >= 11  # ops, targets, node metrics, the API and its action
        rules = svc.web_app[RULES]
        seen_own: set[str] = set()
        for method, path in walked:
            for tenant in ("a", "b", None):
                token = SECRETS[tenant] if tenant else None
                for verb, url, body in requests_for(method, path, tenant):
                    status, text = await call(http, base, verb, url, body, token)
                    hidden = [*marks("a", server), *marks("b", server)] if tenant is None \
                        else list(marks(OTHER[tenant], server))
                    leaked = [m for m in hidden if m in text]
                    assert not leaked, (tenant, verb, url, status, leaked, text[:300])
                    if tenant and f"node-{tenant}" in text:
                        seen_own.add(f"{tenant} {path}")
                    if rules[path] is not Rule.PUBLIC and tenant is None:
                        assert status == 401, (verb, url, status)
        # the walk is not vacuous: each tenant does see its own node where it should
        for tenant in ("a", "b"):
            for path in ("/targets", "/api/v1/gpu-health/metrics",
                         "/api/v1/gpu-health/predictions", "/api/v1/gpu-health/capabilities"):
                assert f"{tenant} {path}" in seen_own, (tenant, path)
        status, text = await call(http, base, "GET", "/api/v1/gpu-health/metrics", None,
                                  SECRETS["admin"])
        assert status == 200 and all(m in text for m in (*marks("a", server),
                                                          *marks("b", server)))


async def test_public_metrics_carry_no_node_data_with_a_tokens_file(server: StandIn,
                                                                    tmp_path: Path) -> None:
    svc = service(tmp_path, server)
    async with listening(svc.web_app, bind("127.0.0.1", 0)) as port, \
            aiohttp.ClientSession() as http:
        await fill(svc)
        status, text = await call(http, f"http://127.0.0.1:{port}", "GET", "/metrics", None,
                                  None)
    assert status == 200
    assert "gpu_health_evaluator_rows_written_total" in text  # the process's own health
    assert not re.search(r'(node|target|uuid)="', text)
    assert "gpu_health_prediction_open{" not in text


async def test_every_route_has_a_rule_and_an_unruled_route_is_refused(tmp_path: Path,
                                                                      server: StandIn) -> None:
    svc = service(tmp_path, server)
    rules = svc.web_app[RULES]
    assert {path for _, path in routes(svc.web_app)} <= set(rules)

    async def sneaky(_request: Any) -> Any:
        raise AssertionError("never reached")

    svc.web_app.router.add_get("/sneaky", sneaky)
    with pytest.raises(Exception, match="routes without an access rule: /sneaky"):
        async with listening(svc.web_app, bind("127.0.0.1", 0)):
            pass


async def test_off_loopback_without_tokens_everything_but_health_is_refused(
        tmp_path: Path, server: StandIn, caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config({"web": {"listen_address": "0.0.0.0:0"},
                           "storage": {"path": "ev.duckdb"}}, base=tmp_path)
    with caplog.at_level("WARNING"):
        svc = build_service(config, {}, clock=FakeClock(), start_loops=False)
    refusals = [r for r in caplog.records if "tokens_file" in r.getMessage()]
    assert [r.levelname for r in refusals] == ["ERROR"]  # said once, as an error
    assert svc.app.open_mode is False
    async with listening(svc.web_app, bind("127.0.0.1", 0)) as port, \
            aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{port}"
        for path in ("/targets", "/api/v1/gpu-health/metrics",
                     "/api/v1/gpu-health/predictions"):
            assert (await call(http, base, "GET", path, None, None))[0] == 401
        status, text = await call(http, base, "GET", "/metrics", None, None)
        assert status == 200 and "gpu_health_evaluator_targets" in text
        assert not re.search(r'(node|target)="', text)
