"""Helpers for the API tests (tests/evaluator/test_api_*.py): a real DuckDB file, rows written
through the store, a real aiohttp server on 127.0.0.1, tokens files, and response validation
against the served OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from jsonschema import Draft202012Validator, FormatChecker
from prometheus_client import CollectorRegistry

from gpu_health.clock import to_naive_utc
from gpu_health.evaluator.http.access import new_application
from gpu_health.evaluator.http.api.auth import TokenSet, hash_token, load_tokens
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.openapi import document
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.errors import RequestMetrics
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
RULE_VERSION = "v1-ecc-growth"
DOC = document()

# name -> (secret token, scopes, tenants)
TOKENS: dict[str, tuple[str, list[str], list[str]]] = {
    "admin": ("admin-secret", ["nodes:read"], ["*"]),
    "team-a": ("team-a-secret", ["nodes:read"], ["a"]),
    "team-ab": ("team-ab-secret", ["nodes:read", "alerts:write"], ["a", "b"]),
    "writer": ("writer-secret", ["alerts:write"], ["*"]),
}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


def write_tokens_file(path: Path, names: Sequence[str] = tuple(TOKENS)) -> Path:
    entries = [
        {"name": n, "sha256": hash_token(TOKENS[n][0]), "scopes": TOKENS[n][1],
         "tenants": TOKENS[n][2]}
        for n in names
    ]
    path.write_text(yaml.safe_dump({"tokens": entries}), encoding="utf-8")
    return path


def token_set(tmp_path: Path) -> TokenSet:
    return load_tokens(write_tokens_file(tmp_path / "tokens.yaml"))


def add_node(db: Database, node_id: str, tenant: str | None) -> None:
    db.execute("INSERT INTO gpu_health_nodes (node_id, tenant, target, last_seen) "
               "VALUES ($node, $tenant, $target, $now)",
               {"node": node_id, "tenant": tenant, "target": f"{node_id}:10346",
                "now": to_naive_utc(NOW)})


def sample(node: str, gpu: int, at: datetime, *, uuid: str | None = "GPU-x",
           source: str = "real", **counters: int | None) -> Sample:
    return Sample(CardKey(node, gpu, source), uuid, at, Counters(**counters))


def add_samples(db: Database, samples: Sequence[Sample]) -> None:
    insert_samples(db, samples)


_PREDICTION_DEFAULTS: dict[str, Any] = {
    "gpu_uuid": "GPU-x", "source": "real", "rule_version": RULE_VERSION, "window_days": 7,
    "signal": "corrected_growth", "layer": "trend", "evidence": "24h +40 corrected",
    "uncorrected_at_t0": 0, "status": "pending", "resolved_at": None, "outcome": None,
}


def add_prediction(db: Database, pid: str, node: str, gpu: int, t0: datetime,
                   **overrides: Any) -> None:
    row = {**_PREDICTION_DEFAULTS, "id": pid, "node_id": node, "gpu_index": gpu, "t0": t0,
           "window_end": t0 + timedelta(days=7), "predicted_at": t0, **overrides}
    values = {k: to_naive_utc(v) if isinstance(v, datetime) else v for k, v in row.items()}
    db.execute(
        f"INSERT INTO gpu_health_predictions ({', '.join(row)}) "
        f"VALUES ({', '.join('$' + k for k in row)})",
        values,
    )


def make_ctx(db: Database, *, tokens: TokenSet | None = None, listen_host: str = "127.0.0.1",
             now: datetime = NOW, registry: CollectorRegistry | None = None) -> ApiContext:
    return ApiContext(
        db=db, clock=lambda: now, current_rule_version=RULE_VERSION, tokens=tokens,
        listen_host=listen_host, registry=registry or CollectorRegistry(),
    )


@asynccontextmanager
async def serve(ctx: ApiContext) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    """A real HTTP server on 127.0.0.1 (ephemeral port) serving the API, and a client for it."""
    app = new_application(RequestMetrics(ctx.registry), tokens=ctx.tokens,
                          listen_host=ctx.listen_host)
    add_api_routes(app, ctx)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


def response_schema(path: str, status: int) -> dict[str, Any]:
    response = DOC["paths"][path]["get"]["responses"][str(status)]
    if "$ref" in response:
        response = DOC["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def check_against_doc(path: str, status: int, body: object) -> None:
    """The body must match the document's schema for this path and status (status declared)."""
    schema = {**response_schema(path, status), "components": DOC["components"]}
    Draft202012Validator(schema, format_checker=FormatChecker()).validate(body)


async def get_json(client: TestClient[web.Request, web.Application], path: str,
                   params: dict[str, str] | None = None, *, token: str | None = "admin",
                   expect: int = 200) -> Any:
    """GET, assert the status, validate the body against the document, return it."""
    headers = auth(token) if token else {}
    async with client.get(path, params=params, headers=headers) as response:
        body = await response.json()
        assert response.status == expect, (response.status, body)
        assert response.content_type == "application/json"
    check_against_doc(path, expect, body)
    return body


def build_dataset(db: Database) -> None:
    """Nodes n1 (tenant a), n2 (tenant b), n3 (no tenant); sim-node only in simulated data.

    n1/0 is a full NVIDIA card sampled every 5 minutes for the last 2 days; n1/1 reports only
    the uncorrected counter and stopped 3 hours before NOW (stalled); n2/0 and n3/0 have a few
    rows; n3/1 has a row dated after NOW; n1/0 and sim-node/0 also have simulated rows.
    """
    for node, tenant in (("n1", "a"), ("n2", "b"), ("n3", None)):
        add_node(db, node, tenant)
    rows = [
        sample("n1", 0, NOW - timedelta(minutes=5 * i), uuid="GPU-n1-0",
               ecc_uncorrected_total=0, ecc_corrected_total=1000 - i, retired_pages=0,
               remapped_rows_pending=0, remapped_rows_failure=0)
        for i in range(576)
    ]
    rows += [sample("n1", 1, NOW - timedelta(hours=3, minutes=5 * i), uuid=None,
                    ecc_uncorrected_total=2) for i in range(10)]
    rows += [sample(n, 0, NOW - timedelta(hours=h), uuid=f"GPU-{n}-0", ecc_corrected_total=5)
             for n in ("n2", "n3") for h in range(3)]
    rows += [sample(n, 0, NOW - timedelta(hours=1), uuid="GPU-sim", source="simulated",
                    ecc_corrected_total=99) for n in ("n1", "sim-node")]
    # A skewed agent clock: one row dated 10 minutes after NOW.
    rows += [sample("n3", 1, NOW + timedelta(minutes=m), uuid="GPU-n3-1", retired_pages=m)
             for m in (-60, 10)]
    add_samples(db, rows)
    day = timedelta(days=1)
    add_prediction(db, "p-n1-hit", "n1", 0, NOW - 9 * day, status="hit", resolved_at=NOW - 8 * day,
                   outcome="uncorrected +1")
    add_prediction(db, "p-n1-pending", "n1", 0, NOW - day, uncorrected_at_t0=None)
    add_prediction(db, "p-n2-miss", "n2", 0, NOW - 8 * day, status="miss",
                   resolved_at=NOW - day, outcome="no increase", rule_version="v0-old")
    add_prediction(db, "p-n3-voided", "n3", 0, NOW - 3 * day, status="voided", gpu_uuid=None)
    add_prediction(db, "p-sim", "sim-node", 0, NOW - 2 * day, source="simulated")


def dataset_db(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Database]:
    """A module fixture's body: a DuckDB store holding :func:`build_dataset`."""
    database = DuckDBDatabase(tmp_path_factory.mktemp(name) / "api.duckdb")
    build_dataset(database)
    yield database
    database.close()
