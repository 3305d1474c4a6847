"""Failed authentications are limited per client (1,000 wrong tokens at 1,476/s):
after 20 within 10 s the client gets 429 with Retry-After, a valid token included, until the
window passes; other clients and public routes are not affected. Real HTTP, injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from gpu_health.errors import ConfigError
from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import load_config, parse_config
from gpu_health.evaluator.http.access import new_application
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.http.throttle import FailureThrottle
from gpu_health.evaluator.store import Database
from tests.evaluator.api_support import auth, dataset_db, make_ctx, token_set, write_tokens_file

PATH = "/api/v1/gpu-health/capabilities"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    yield from dataset_db(tmp_path_factory, "throttle")


async def test_a_client_guessing_tokens_is_slowed_down_then_let_back(
        db: Database, tmp_path: Path) -> None:
    clock, registry = Clock(), CollectorRegistry()
    tokens = token_set(tmp_path)
    app = new_application(RequestMetrics(CollectorRegistry()), tokens=tokens,
                          listen_host="127.0.0.1", throttle=FailureThrottle(registry, clock=clock))
    add_api_routes(app, make_ctx(db, tokens=tokens))
    wrong = {"Authorization": "Bearer guess"}
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for _ in range(20):
            assert (await client.get(PATH, headers=wrong)).status == 401
        blocked = await client.get(PATH, headers=wrong)
        assert blocked.status == 429 and blocked.headers["Retry-After"] == "10"
        assert "too many failed authentications" in (await blocked.json())["error"]
        assert (await client.get(PATH, headers=auth("admin"))).status == 429  # all of it
        clock.now += 10.5  # the oldest failure leaves the window
        assert (await client.get(PATH, headers=auth("admin"))).status == 200
        assert (await client.get("/api/v1/openapi.json")).status == 200  # public: never
    assert registry.get_sample_value("gpu_health_evaluator_auth_throttled_total") == 2


async def test_the_limit_and_window_are_config_keys_of_the_running_service(
        tmp_path: Path) -> None:
    """``api.auth_failure_limit`` and ``api.auth_failure_window`` reach the composed service."""
    token_file = write_tokens_file(tmp_path / "tokens.yaml", ["admin"])
    token_file.chmod(0o600)
    config_file = tmp_path / "evaluator.yml"
    config_file.write_text(
        "storage: {path: ev.duckdb}\nalerting: {alertmanagers: []}\n"
        "api: {tokens_file: tokens.yaml, auth_failure_limit: 3, auth_failure_window: 1m}\n",
        encoding="utf-8")
    service = build_service(load_config(config_file, {}), {}, start_loops=False)
    wrong = {"Authorization": "Bearer guess"}
    try:
        async with TestClient(TestServer(service.web_app, host="127.0.0.1")) as client:
            for _ in range(3):
                assert (await client.get(PATH, headers=wrong)).status == 401
            blocked = await client.get(PATH, headers=wrong)
            assert blocked.status == 429 and blocked.headers["Retry-After"] == "60"
            assert "(3 within 60s)" in (await blocked.json())["error"]
    finally:
        service.db.close()
    with pytest.raises(ConfigError) as caught:
        parse_config({"api": {"auth_failure_limit": 0, "auth_failure_window": "soon"}},
                     base=tmp_path)
    text = " ".join(caught.value.problems)
    assert "api.auth_failure_limit" in text and "api.auth_failure_window" in text


def test_the_remembered_clients_are_bounded() -> None:
    throttle = FailureThrottle(CollectorRegistry(), limit=2, max_clients=3, clock=Clock())
    for i in range(10):
        throttle.failed(f"10.0.0.{i}")
    assert list(throttle._failures) == ["10.0.0.7", "10.0.0.8", "10.0.0.9"]
