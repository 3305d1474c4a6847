"""Schema-driven fuzzing of the API from its published OpenAPI document (schemathesis): every
operation, with requests generated from the document (valid and invalid parameters, bodies and
tokens), against a real evaluator on 127.0.0.1 holding data. No answer is a 500, every error is
JSON of the one error shape, and no error body quotes back what the client sent."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.evaluator.compose import build_service
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.http.api.openapi import document
from gpu_health.evaluator.http.server import bind, listening
from tests.evaluator.api_support import add_node, add_prediction, add_samples, sample
from tests.evaluator.http.test_tenant_isolation import SECRETS, tokens_file
from tests.evaluator.ingest_support import FakeClock

SCHEMA = schemathesis.openapi.from_dict(document())
OPERATIONS = [(op.method.upper(), op.path)
              for op in (cast(Any, result).ok() for result in SCHEMA.get_all_operations())]
T0 = FakeClock().now
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real evaluator with a tokens file and data, served from its own thread and loop."""
    folder: Path = tmp_path_factory.mktemp("fuzz")
    config = parse_config({
        "static_configs": [], "storage": {"path": "ev.duckdb"},
        "api": {"tokens_file": str(tokens_file(folder / "tokens.yml"))},
        "alerting": {"alertmanagers": []}, "rules": {"active": "v1-ecc-growth"},
    }, base=folder)
    svc = build_service(config, {}, clock=FakeClock(T0 + timedelta(days=1)), start_loops=False)
    add_node(svc.db, "gpu-node-01", "a")
    add_samples(svc.db, [sample("gpu-node-01", 0, T0 + timedelta(hours=h),
                                ecc_corrected_total=h, ecc_uncorrected_total=0)
                         for h in range(12)])
    add_prediction(svc.db, "p1", "gpu-node-01", 0, T0)
    ready, stop, port = threading.Event(), threading.Event(), [0]

    def serve() -> None:
        async def run() -> None:
            async with listening(svc.web_app, bind("127.0.0.1", 0)) as bound:
                port[0] = bound
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)  # polling a stop flag set by another thread

        asyncio.run(run())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    yield f"http://127.0.0.1:{port[0]}"
    stop.set()
    thread.join(30)


def quoted_back(case: Any, text: str) -> list[str]:
    """Values the client sent (long enough to be unambiguous) that the body repeats."""
    sent: list[Any] = list((case.query or {}).values()) + list((case.path_parameters or {})
                                                                .values())
    if isinstance(getattr(case, "body", None), dict):
        sent += [*case.body.keys(), *case.body.values()]
    return [str(v) for v in sent if isinstance(v, str | int) and len(str(v)) >= 8
            and str(v) in text]


def _replaced(case: Any, value: str) -> Any:
    """``case`` with every parameter equal to ``value`` set to a same-length value of 'Z's."""
    other = copy.deepcopy(case)
    for params in (other.query, other.path_parameters):
        for key, sent in (params or {}).items():
            if str(sent) == value:
                params[key] = "Z" * len(value)
    return other


def echoed(case: Any, text: str, **call: Any) -> list[str]:
    """Values quoted back by ``text`` that are still there when the same request is sent with
    another value: a value inside a fixed message ("unknown " in "unknown token") is no echo."""
    return [v for v in quoted_back(case, text)
            if v not in _replaced(case, v).call(**call).text]


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
@FUZZ
@given(data=st.data(), token=st.sampled_from([None, "admin", "a", "b", "garbage"]))
def test_no_500_and_every_error_is_json(base_url: str, method: str, path: str,
                                         data: st.DataObject, token: str | None) -> None:
    case = data.draw(SCHEMA[path][method].as_strategy())
    headers = {"Authorization": f"Bearer {SECRETS.get(token or '', token)}"} if token else {}
    call: dict[str, Any] = {"base_url": base_url, "headers": headers, "timeout": 30}
    response = case.call(**call)
    assert response.status_code < 500, (case.query, response.text[:300])
    if response.status_code >= 400:
        content_type = {k.lower(): v for k, v in response.headers.items()}["content-type"]
        first = content_type[0] if isinstance(content_type, list) else content_type
        assert str(first).startswith("application/json"), first
        body = json.loads(response.text)
        assert set(body) == {"error", "param"}, body
        assert not echoed(case, response.text, **call), (case.query, body)
