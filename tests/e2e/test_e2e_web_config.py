"""The real Prometheus scrapes the exporter through ``--web.config.file``: HTTPS with a
certificate of our own CA and basic auth with a bcrypt hash, as a fleet would configure it
(``scheme: https``, ``tls_config.ca_file``, ``basic_auth``). A job with a wrong password is
down with a 401, never silently up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bcrypt
import pytest
import yaml

from tests.e2e.chain import binary, console_script
from tests.e2e.stack import Procs, free_port, http, wait_for
from tests.shared import REPO
from tests.tls_support import make_pki

pytestmark = pytest.mark.e2e


def test_prometheus_scrapes_through_tls_and_basic_auth(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    exporter_port, prom_port = free_port(), free_port()
    (tmp_path / "web.yml").write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(pki.server_cert), "key_file": str(pki.server_key)},
        "basic_auth_users": {"prometheus": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()},
    }))
    target = {"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"node": "n1"}}
    tls = {"ca_file": str(pki.ca)}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            {"job_name": "gpu-health-exporter", "scheme": "https", "tls_config": tls,
             "basic_auth": {"username": "prometheus", "password": "s3cret"},
             "static_configs": [target]},
            {"job_name": "wrong-password", "scheme": "https", "tls_config": tls,
             "basic_auth": {"username": "prometheus", "password": "nope"},
             "static_configs": [target]}]}))
    procs = Procs(tmp_path)
    try:
        procs.start("exporter", [
            console_script("gpu-health-exporter"),
            f"--web.listen-address=127.0.0.1:{exporter_port}",
            f"--web.config.file={tmp_path / 'web.yml'}", "--collect-interval=1s",
            "--stale-after=5s", "--tool-timeout=1s",
            f"--nvidia-smi={REPO / 'tests' / 'fakebin' / 'nvidia-smi'}", "--xpu-smi=", "--cnmon=",
            "--kmsg-path=", "--dmesg=", "--journalctl="], env=dict(os.environ))
        procs.start("prometheus", [
            binary("prometheus"), f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}"])
        base = f"http://127.0.0.1:{prom_port}"

        def targets() -> dict[str, Any] | None:
            status, body = http("GET", f"{base}/api/v1/targets")
            if status != 200:
                return None
            found = {t["labels"]["job"]: t for t in body["data"]["activeTargets"]}
            done = all(t["health"] != "unknown" for t in found.values())
            return found if len(found) == 2 and done else None

        found = wait_for("both targets scraped", targets, 60, procs)
        assert found["gpu-health-exporter"]["health"] == "up", found
        assert found["wrong-password"]["health"] == "down"
        assert "401" in found["wrong-password"]["lastError"]

        def card() -> list[Any] | None:
            status, body = http("GET", f"{base}/api/v1/query?query="
                                + quote('gpu_health_gpu_info{job="gpu-health-exporter"}'))
            return body["data"]["result"] or None if status == 200 else None

        [series] = wait_for("the card's series in Prometheus", card, 60, procs)
        assert series["metric"]["node"] == "n1"
    finally:
        procs.stop_all()
