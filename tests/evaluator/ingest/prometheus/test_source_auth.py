"""The Prometheus source's credentials and TLS, against real HTTP servers on 127.0.0.1: a
bearer token or basic auth from files, a custom CA for a server with a self-signed certificate
(made here with the ``openssl`` command, which .ci/run installs), and the clear failures
without them."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.errors import SourceError
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.prometheus.source import PrometheusSource
from gpu_health.evaluator.store import Database
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.evaluator.ingest.prometheus.servers import (
    VM,
    VM_MISSING,
    Switch,
    victoria_metrics,
    vm_import,
)
from tests.evaluator.ingest.prometheus.test_source_victoriametrics import (
    START,
    Clock,
    _lines,
)

pytestmark = pytest.mark.skipif(VM is None, reason=VM_MISSING)


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with victoria_metrics(tmp_path_factory.mktemp("vm-auth")) as url:
        vm_import(url, _lines())
        yield url


def source(tmp: Path, url: str, **prom: object) -> tuple[PrometheusSource, Database]:
    config = parse_config({"ingest": {"source": "prometheus", "prometheus": {
        "url": url, "metrics": "dcgm", "step": "60s", "lag": "2m", **prom}}}, base=tmp)
    assert config.ingest.prometheus is not None
    db = DuckDBDatabase(tmp / "auth.duckdb")
    ingestor = Ingestor(db, DedupCache(1000, timedelta(hours=1)), keepalive=timedelta(minutes=5))
    return PrometheusSource(config.ingest.prometheus, step=timedelta(minutes=1), db=db,
                            ingestor=ingestor, clock=Clock(START)), db


async def one_cycle(src: PrometheusSource) -> int:
    async with src:
        report = await src.run_cycle()
    assert report is not None
    return report.cards


def test_bearer_token_and_basic_auth_from_files(vm: str, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "password").write_text("s3cret")
    for prom, header in (({"bearer_token_file": "token"}, "Bearer t0ken"),
                         ({"basic_auth": {"username": "gpu", "password_file": "password"}},
                          "Basic Z3B1OnMzY3JldA==")):
        proxy = Switch(vm, authorization=header).start()
        try:
            src, db = source(tmp_path, proxy.url, **prom)
            assert asyncio.run(one_cycle(src)) == 6
            assert set(proxy.seen_authorization) == {header}
            db.close()
            (tmp_path / "auth.duckdb").unlink()
            src, db = source(tmp_path, proxy.url)  # no credentials: 401, a clear error
            with pytest.raises(SourceError, match="HTTP 401") as err:
                asyncio.run(one_cycle(src))
            assert err.value.reason == "http_error" and "t0ken" not in str(err.value)
            db.close()
            (tmp_path / "auth.duckdb").unlink()
        finally:
            proxy.stop()


def test_a_custom_ca_verifies_the_server(vm: str, tmp_path: Path) -> None:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    proxy = Switch(vm, tls=tls).start()
    try:
        src, db = source(tmp_path, proxy.url, ca_file="cert.pem")
        assert asyncio.run(one_cycle(src)) == 6
        db.close()
        (tmp_path / "auth.duckdb").unlink()
        src, db = source(tmp_path, proxy.url)  # the system CAs do not know it
        with pytest.raises(SourceError) as err:
            asyncio.run(one_cycle(src))
        assert err.value.reason == "unreachable" and "certificate" in str(err.value).lower()
        db.close()
    finally:
        proxy.stop()
