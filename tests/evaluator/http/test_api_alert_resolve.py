"""POST /api/v1/gpu-health/alerts/{node}/resolve against the real server: auth and scope,
tenant visibility (404 like a missing node), reason validation, the audit entry, 409 without an
open alert, and every answer valid against the served OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from gpu_health.evaluator.http.api.openapi import document
from gpu_health.evaluator.http.api.routes import ENDPOINTS, Action
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.operations.alerts import open_alerts, open_new_alerts
from tests.conftest import NewDb
from tests.evaluator.api_support import (
    NOW,
    auth,
    build_dataset,
    make_ctx,
    serve,
    token_set,
)
from tests.evaluator.store_support import audit_log

PATH = "/api/v1/gpu-health/alerts/{node}/resolve"
DOC = document()


@pytest.fixture
def db(new_db: NewDb) -> Iterator[Database]:
    database = new_db("resolve")
    build_dataset(database)  # n1 (tenant a) has a live real prediction; n2 b; n3 no tenant
    assert [node for _, node, _ in open_new_alerts(database, NOW)] == ["n1"]
    yield database
    database.close()


def check(status: int, body: object) -> None:
    response = DOC["paths"][PATH]["post"]["responses"][str(status)]
    if "$ref" in response:
        response = DOC["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema = {**response["content"]["application/json"]["schema"],
              "components": DOC["components"]}
    Draft202012Validator(schema, format_checker=FormatChecker()).validate(body)


async def post(client: Any, node: str, body: object = None, *, token: str | None = "writer",
               expect: int = 200, raw: bytes | None = None, query: str = "") -> Any:
    headers = auth(token) if token else {}
    kwargs: dict[str, Any] = {"data": raw} if raw is not None else (
        {"json": body} if body is not None else {})
    async with client.post(PATH.format(node=node) + query, headers=headers, **kwargs) as r:
        answer = await r.json()
        assert r.status == expect, (r.status, answer)
    check(expect, answer)
    return answer


def test_the_action_is_in_the_endpoint_table_and_the_document() -> None:
    [action] = [e for e in ENDPOINTS if isinstance(e, Action)]
    assert action.path == PATH and action.scope == "alerts:write" and action.method == "POST"
    operation = DOC["paths"][PATH]["post"]
    assert operation["requestBody"]["required"] is True
    assert set(operation["responses"]) >= {"200", "400", "401", "403", "404", "409"}


async def test_resolve_closes_and_audits_with_the_token_name(db: Database,
                                                             tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path), listen_host="0.0.0.0")) as client:
        body = await post(client, "n1", {"reason": "  GPU 0 replaced, OPS-7  "})
        assert (body["node_id"], body["closed_by"], body["reason"]) == \
            ("n1", "writer", "GPU 0 replaced, OPS-7")
        assert body["prediction_id"] == "p-n1-pending"
        assert body["closed_at"] == "2026-01-10T12:00:00Z"
        again = await post(client, "n1", {"reason": "twice"}, expect=409)
        assert again["param"] == "node"
    assert open_alerts(db, NOW) == []
    entry = audit_log(db, "n1")[0]
    assert (entry.actor, entry.action, entry.reason) == \
        ("writer", "resolve", "GPU 0 replaced, OPS-7")
    # The predictions are untouched: resolving is not a recovery.
    status = db.fetchone("SELECT status FROM gpu_health_predictions WHERE id = $id",
                         {"id": "p-n1-pending"})
    assert status[0] == "pending"


async def test_auth_scope_and_visibility(db: Database, tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path), listen_host="0.0.0.0")) as client:
        async with client.post(PATH.format(node="n1"), json={"reason": "x"}) as r:
            assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
            check(401, await r.json())
        denied = await post(client, "n1", {"reason": "x"}, token="admin", expect=403)
        assert "alerts:write" in denied["error"]
        missing = await post(client, "no-such-node", {"reason": "x"}, token="team-ab",
                             expect=404)
        hidden = await post(client, "n3", {"reason": "x"}, token="team-ab", expect=404)
        assert hidden == missing == {"error": "node not found", "param": "node_id"}
        # Visible, but nothing open there.
        await post(client, "n2", {"reason": "x"}, token="team-ab", expect=409)
        await post(client, "n1", {"reason": "handled"}, token="team-ab")
    assert audit_log(db, "n1")[0].actor == "team-ab"


@pytest.mark.parametrize(("kwargs", "param"), [
    ({}, "reason"),
    ({"body": {}}, "reason"),
    ({"body": {"reason": "   "}}, "reason"),
    ({"body": {"reason": 5}}, "reason"),
    ({"body": {"reason": "x" * 1025}}, "reason"),
    ({"body": ["reason"]}, "reason"),
    ({"body": {"reason": "x", "by": "me"}}, "by"),
    ({"raw": b"{not json"}, "reason"),
    ({"body": {"reason": "x"}, "query": "?force=1"}, "force"),
])
async def test_bad_requests_name_the_parameter(db: Database, tmp_path: Path,
                                               kwargs: dict[str, Any], param: str) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path), listen_host="0.0.0.0")) as client:
        answer = await post(client, "n1", expect=400, **kwargs)
        assert answer["param"] == param
    assert len(open_alerts(db, NOW)) == 1  # nothing was closed


async def test_get_is_not_allowed_and_loopback_without_tokens_works(db: Database) -> None:
    async with serve(make_ctx(db, tokens=None, listen_host="127.0.0.1")) as client:
        async with client.get(PATH.format(node="n1")) as r:
            assert r.status == 405
        body = await post(client, "n1", {"reason": "local operator"}, token=None)
        assert body["closed_by"] == "loopback-without-tokens"
