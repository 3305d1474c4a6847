"""The OpenAPI document is valid, is what the server serves, and matches the server: every
declared parameter is accepted (with its documented example) and nothing else is."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_spec_validator import validate

from gpu_health.evaluator.http.api.openapi import document
from gpu_health.evaluator.http.api.routes import ENDPOINTS, Action
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.api_support import (
    DOC,
    NOW,
    add_node,
    add_samples,
    build_dataset,
    get_json,
    make_ctx,
    sample,
    serve,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    database = DuckDBDatabase(tmp_path_factory.mktemp("openapi") / "api.duckdb")
    build_dataset(database)
    add_node(database, "gpu-node-01", "a")  # the documented example node
    add_samples(database, [sample("gpu-node-01", 0, NOW, ecc_corrected_total=1)])
    yield database
    database.close()


READ_PATHS = [e.path for e in ENDPOINTS if not isinstance(e, Action)]


def _parameters(path: str) -> list[dict[str, Any]]:
    refs = DOC["paths"][path]["get"].get("parameters", [])
    return [DOC["components"]["parameters"][r["$ref"].rsplit("/", 1)[1]] for r in refs]


def _required(path: str) -> dict[str, str]:
    return {p["name"]: str(p["example"]) for p in _parameters(path) if p["required"]}


def test_document_is_valid_openapi_3_1() -> None:
    validate(DOC)
    assert DOC["openapi"] == "3.1.0"
    assert DOC["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_document_and_routes_declare_the_same_endpoints_and_parameters() -> None:
    documented = {p for p in DOC["paths"] if p != "/api/v1/openapi.json"}
    assert documented == {e.path for e in ENDPOINTS}
    for endpoint in ENDPOINTS:
        if isinstance(endpoint, Action):  # POST with path variables and a JSON body
            operation = DOC["paths"][endpoint.path][endpoint.method.lower()]
            assert all(p["in"] == "path" for p in operation["parameters"]), endpoint.path
            continue
        assert {p["name"] for p in _parameters(endpoint.path)} == endpoint.params, endpoint.path


async def test_served_document(db: Database) -> None:
    async with serve(make_ctx(db)) as client:
        served = await get_json(client, "/api/v1/openapi.json", token=None)
    assert served == document()


@pytest.mark.parametrize("path", READ_PATHS)
async def test_every_declared_parameter_is_accepted(db: Database, path: str) -> None:
    async with serve(make_ctx(db)) as client:
        await get_json(client, path, _required(path))
        for param in _parameters(path):
            query = {**_required(path), param["name"]: str(param["example"])}
            await get_json(client, path, query)
        everything = {p["name"]: str(p["example"]) for p in _parameters(path)}
        await get_json(client, path, everything)


@pytest.mark.parametrize("path", READ_PATHS)
async def test_undeclared_parameters_are_refused(db: Database, path: str) -> None:
    async with serve(make_ctx(db)) as client:
        for name in ("bogus", "Limit", "node", "source[]", "tenant"):
            body = await get_json(client, path, {**_required(path), name: "1"}, expect=400)
            assert body["param"] == name and name in body["error"]


def test_the_documented_actions_are_the_policy_vocabulary() -> None:
    """A new action (reboot_node) must reach the document that clients validate."""
    from gpu_health.evaluator.rules.actions import ACTIONS

    card = DOC["components"]["schemas"]
    action = next(s["properties"]["action"]["properties"]["action"] for s in card.values()
                  if "action" in s.get("properties", {}))
    assert action["enum"] == list(ACTIONS)
