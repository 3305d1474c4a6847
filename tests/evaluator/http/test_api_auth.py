"""Tokens file validation, bearer auth, scopes, the loopback rule and tenant visibility, both as
pure functions and against the real server (every endpoint)."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_health.errors import ApiError, ConfigError
from gpu_health.evaluator.http.api.auth import (
    LOOPBACK_PRINCIPAL,
    authenticate,
    hash_token,
    is_loopback,
    load_tokens,
    parse_tokens,
    tokens_hash_main,
)
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.api_support import (
    DOC,
    build_dataset,
    check_against_doc,
    get_json,
    make_ctx,
    serve,
    token_set,
    write_tokens_file,
)

NODE_ENDPOINTS = {  # path -> the minimal query naming node n
    "/api/v1/gpu-health/predictions": {"node_id": "{n}"},
    "/api/v1/gpu-health/capabilities": {"node_id": "{n}"},
    "/api/v1/gpu-health/samples": {"node_id": "{n}", "gpu_index": "0"},
    "/api/v1/gpu-health/ecc-rate": {"node_id": "{n}", "gpu_index": "0"},
}
# The read endpoints (GET); the POST action (alert resolve) has its own tests in
# test_api_alert_resolve.py.
ALL_ENDPOINTS = [p for p in DOC["paths"]
                 if p != "/api/v1/openapi.json" and "get" in DOC["paths"][p]]


def _query(path: str, node: str) -> dict[str, str]:
    return {k: v.format(n=node) for k, v in NODE_ENDPOINTS.get(path, {}).items()}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    database = DuckDBDatabase(tmp_path_factory.mktemp("auth") / "api.duckdb")
    build_dataset(database)
    yield database
    database.close()


# -- tokens file ------------------------------------------------------------------------------


def test_tokens_file_round_trip(tmp_path: Path) -> None:
    tokens = token_set(tmp_path)
    admin = tokens.find("admin-secret")
    assert admin is not None and admin.tenants is None and admin.scopes == {"nodes:read"}
    team = tokens.find("team-ab-secret")
    assert team is not None and team.tenants == {"a", "b"}
    assert tokens.find("nope") is None and tokens.find("") is None


def test_a_tokens_file_others_can_write_is_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: whoever can write it can grant themselves every tenant at the next start."""
    path = write_tokens_file(tmp_path / "tokens.yaml")
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="gpu_health.evaluator.http.api.auth"):
        load_tokens(path)
        assert caplog.records == []
        path.chmod(0o666)
        load_tokens(path)
    [record] = caplog.records
    assert "writable by users other than its owner (mode -rw-rw-rw-)" in record.getMessage()


def test_uppercase_hash_is_accepted() -> None:
    doc = {"tokens": [{"name": "x", "sha256": hash_token("t").upper(), "scopes": ["nodes:read"],
                       "tenants": ["*"]}]}
    assert parse_tokens(doc, "f").find("t") is not None


def test_every_problem_is_listed() -> None:
    digest = hash_token("t")
    doc = {"tokens": [
        {"name": "ok", "sha256": digest, "scopes": ["nodes:read"], "tenants": ["*"]},
        {"name": "ok", "sha256": digest, "scopes": ["nodes:read"], "tenants": ["a"]},
        {"name": "plain", "token": "hunter2", "sha256": "xyz", "scopes": ["nodes:write"],
         "tenants": ["*", "a"]},
        {"name": "", "sha256": hash_token("u"), "scopes": [], "tenants": "a"},
        "not-a-mapping",
    ]}
    with pytest.raises(ConfigError) as err:
        parse_tokens(doc, "tokens.yaml")
    problems = "\n".join(err.value.problems)
    for expected in (
        "tokens[2]: unknown key 'token' (store sha256 of the token",
        "tokens[2].sha256: must be 64 hex digits",
        "tokens[2].scopes: unknown scope 'nodes:write'",
        "tokens[2].tenants: '*' must be the only entry",
        "tokens[3].name: must be a non-empty string",
        "tokens[3].scopes: must be a non-empty list",
        "tokens[3].tenants: must be a non-empty list",
        "tokens[4]: must be a mapping",
        "duplicate name 'ok'",
        "duplicate sha256",
    ):
        assert expected in problems, (expected, problems)


@pytest.mark.parametrize("doc", [None, [], {"tokens": []}, {"tokens": [], "extra": 1}])
def test_bad_document_shapes(doc: object) -> None:
    with pytest.raises(ConfigError):
        parse_tokens(doc, "f")


def test_unreadable_or_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_tokens(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tokens: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_tokens(bad)


def test_tokens_hash_cli() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert tokens_hash_main(io.StringIO("s3cret\n"), out, err) == 0
    assert out.getvalue() == hash_token("s3cret") + "\n"
    assert yaml.safe_load(out.getvalue()) != "s3cret"
    assert tokens_hash_main(io.StringIO("\n"), io.StringIO(), err) == 2
    assert tokens_hash_main(io.StringIO(" padded \n"), io.StringIO(), err) == 2


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("", False), ("::", False),
     ("10.0.0.1", False), ("evaluator.internal", False)],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_authenticate_header_forms(tmp_path: Path) -> None:
    tokens = token_set(tmp_path)
    assert authenticate("bearer  admin-secret", tokens, "0.0.0.0").name == "admin"
    for header in (None, "", "Basic YWRtaW4=", "Bearer", "Bearer a b", "admin-secret",
                   "Bearer wrong"):
        with pytest.raises(ApiError) as err:
            authenticate(header, tokens, "0.0.0.0")
        assert err.value.status == 401
    assert authenticate(None, None, "127.0.0.1") is LOOPBACK_PRINCIPAL
    with pytest.raises(ApiError, match="tokens file"):
        authenticate("Bearer admin-secret", None, "0.0.0.0")


# -- against the server -----------------------------------------------------------------------


async def test_401_and_403_on_every_endpoint(db: Database, tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path), listen_host="0.0.0.0")) as client:
        for path in ALL_ENDPOINTS:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
                # Bad parameters too: auth is checked first, so they cannot be probed.
                async with client.get(path, params={"bogus": "1"}, headers=headers) as r:
                    assert r.status == 401, path
                    assert r.headers["WWW-Authenticate"].startswith("Bearer")
                    check_against_doc(path, 401, await r.json())
            body = await get_json(client, path, _query(path, "n1"), token="writer", expect=403)
            assert "nodes:read" in body["error"]


async def test_without_tokens_file_loopback_is_open_and_logged(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gpu_health.evaluator.http.api"):
        async with serve(make_ctx(db, tokens=None, listen_host="127.0.0.1")) as client:
            for path in ALL_ENDPOINTS:
                await get_json(client, path, _query(path, "n3"), token=None)
    assert any("OPEN without authentication" in r.getMessage() for r in caplog.records)


async def test_without_tokens_file_elsewhere_everything_is_401(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="gpu_health.evaluator.http.api"):
        async with serve(make_ctx(db, tokens=None, listen_host="0.0.0.0")) as client:
            for path in ALL_ENDPOINTS:
                body = await get_json(client, path, _query(path, "n1"), token="admin",
                                      expect=401)
                assert "tokens file" in body["error"]
            doc = await get_json(client, "/api/v1/openapi.json", token=None)
            assert doc["openapi"].startswith("3.1")
    assert any("refused with 401" in r.getMessage() for r in caplog.records)


async def test_invisible_node_is_404_like_a_missing_node(db: Database, tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path))) as client:
        for path in NODE_ENDPOINTS:
            missing = await get_json(client, path, _query(path, "no-such-node"), token="team-a",
                                     expect=404)
            for node in ("n2", "n3", "sim-node"):  # other tenant, no tenant, not a target
                body = await get_json(client, path, _query(path, node), token="team-a",
                                      expect=404)
                assert body == missing == {"error": "node not found", "param": "node_id"}
            await get_json(client, path, _query(path, "n1"), token="team-a")
            for node in ("n1", "n2", "n3", "sim-node"):
                await get_json(client, path, _query(path, node), token="admin")
            await get_json(client, path, _query(path, "n2"), token="team-ab")


async def test_lists_only_show_visible_nodes(db: Database, tmp_path: Path) -> None:
    async with serve(make_ctx(db, tokens=token_set(tmp_path))) as client:
        async def nodes(path: str, token: str, **params: str) -> set[str]:
            body = await get_json(client, path, params, token=token)
            return {item["node_id"] for item in body["items"]}

        preds, caps = "/api/v1/gpu-health/predictions", "/api/v1/gpu-health/capabilities"
        assert await nodes(preds, "team-a") == {"n1"}
        assert await nodes(preds, "team-ab") == {"n1", "n2"}
        assert await nodes(preds, "admin") == {"n1", "n2", "n3"}
        assert await nodes(preds, "admin", source="simulated") == {"sim-node"}
        assert await nodes(preds, "team-a", source="simulated") == set()
        assert await nodes(caps, "team-a") == {"n1"}
        assert await nodes(caps, "admin") == {"n1", "n2", "n3"}
        assert await nodes(caps, "admin", source="simulated") == {"n1", "sim-node"}
        total = await get_json(client, preds, {"gpu_index": "0"}, token="team-a")
        assert total["total"] == 2
