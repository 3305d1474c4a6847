"""The whole chain on 127.0.0.1: exporter (fake nvidia-smi replaying a degrading card), evaluator
(``gpu-health-evaluator run`` on a DuckDB file seeded through the store), a real Prometheus
scraping both with the project's alerting rules, a real Alertmanager, and the webhook receiver.

Seeded history (``real``, every 30 min for 8 days, ending a minute before start-up): the
correctable count grows 12 a day until two days ago, then 48 a day. The last three 24 h
increments are 12 < 48 = 48, not strictly increasing, so the seed alone predicts nothing. The
test then makes the fake tool report +60 (the next, accelerating reading): 12 < 48 < 108, 108 >=
32 and 3.5x the 7-day mean, so ``v1-ecc-growth`` fires on the live sample.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from gpu_health.evaluator.http.api.auth import hash_token
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from gpu_health.evaluator.store.readings.samples import insert_samples
from tests.e2e.stack import Procs, Webhook, free_port, http, wait_for

REPO = Path(__file__).resolve().parents[2]
NODE = "e2e-node-01"
TENANT = "e2e"
TOKEN = "e2e-oncall-secret"
TOKEN_NAME = "oncall-sre"
NODE_METRICS = "/api/v1/gpu-health/metrics"
CORRECTED_END = 10_000
JUMP = 60
SCAN_MINUTES = "0.05"  # the worker ticks every 3 s
RESEND = "2s"


def binary(name: str) -> str:
    path = shutil.which(name, path="/usr/bin:/usr/local/bin:" + os.environ.get("PATH", ""))
    if path is None:
        raise AssertionError(f"{name} is not installed: the e2e test needs the Debian packages "
                             "prometheus and prometheus-alertmanager (.ci/run installs them)")
    return path


def console_script(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise AssertionError(f"{path} missing: pip install -e '.[test]' into this interpreter")
    return str(path)


def seeded_corrected(hours_before_end: float) -> int:
    """The seed curve: 48 a day over the last two days, 12 a day before that."""
    h = hours_before_end
    if h <= 48:
        return CORRECTED_END - math.floor(2 * h)
    return CORRECTED_END - 96 - math.floor(0.5 * (h - 48))


def seed(db_path: Path, uuid: str, end: datetime) -> int:
    rows = []
    for k in range(8 * 48 + 1):
        hours = k / 2
        rows.append(Sample(CardKey(NODE, 0, "real"), uuid, end - timedelta(hours=hours), Counters(
            ecc_uncorrected_total=0, ecc_corrected_total=seeded_corrected(hours),
            retired_pages=None, remapped_rows_pending=0, remapped_rows_failure=0)))
    db = DuckDBDatabase(db_path)
    try:
        return insert_samples(db, rows)
    finally:
        db.close()


@dataclass
class Chain:
    procs: Procs
    webhook: Webhook
    folder: Path
    state_file: Path
    exporter: str
    evaluator: str
    prometheus: str
    alertmanager: str
    uuid: str = ""

    def set_card(self, corrected: int, uncorrected: int) -> None:
        """Rewrite the fake tool's state atomically (it re-reads the file on every call)."""
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cards": {"0": {
            "ecc.errors.corrected.aggregate.total": corrected,
            "ecc.errors.uncorrected.aggregate.total": uncorrected}}}))
        tmp.replace(self.state_file)

    def api(self, path: str, **params: str) -> Any:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        status, body = http("GET", f"{self.evaluator}/api/v1/gpu-health/{path}?{query}",
                            headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200, (status, body)
        return body

    def metric(self, url: str, series: str) -> float | None:
        if url == self.evaluator:  # with a tokens file, node data is on the token path only
            status, body = http("GET", f"{url}{NODE_METRICS}",
                                headers={"Authorization": f"Bearer {TOKEN}"})
        else:
            status, body = http("GET", f"{url}/metrics")
        if status != 200 or not isinstance(body, str):
            return None
        for line in body.splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def am_alerts(self) -> list[dict[str, Any]]:
        status, body = http("GET", f"{self.alertmanager}/api/v2/alerts"
                                   "?filter=alertname%3D%22GPU_FAULT_PREDICTED%22")
        assert status == 200, (status, body)
        return list(body)

    def query(self, expr: str) -> tuple[int, Any]:
        from urllib.parse import quote

        return http("GET", f"{self.prometheus}/api/v1/query?query={quote(expr)}")

    def wait(self, what: str, probe: Any, deadline_s: float = 30.0) -> Any:
        return wait_for(what, probe, deadline_s, self.procs)


def _write_configs(folder: Path, ports: dict[str, int], webhook: Webhook) -> None:
    (folder / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "webhook", "group_by": ["alertname", "node"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "webhook", "webhook_configs": [
            {"url": webhook.url, "send_resolved": True}]}],
    }))
    (folder / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(REPO / "rules" / "prometheus" / f"{name}.rules.yml")
                       for name in ("gpu-health", "gpu-hardware")],
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [f"127.0.0.1:{ports['am']}"]}]}]},
        "scrape_configs": [
            {"job_name": "gpu-health-exporter", "static_configs": [
                {"targets": [f"127.0.0.1:{ports['exporter']}"],
                 "labels": {"node": NODE, "tenant": TENANT}}]},
            # As docs/security.md says: with a tokens file, Prometheus scrapes the node data
            # from the token path with a nodes:read token.
            {"job_name": "gpu-health-evaluator", "honor_labels": True,
             "metrics_path": NODE_METRICS,
             "authorization": {"type": "Bearer",
                               "credentials_file": str(folder / "prometheus-token")},
             "static_configs": [{"targets": [f"127.0.0.1:{ports['evaluator']}"]}]},
        ],
    }))
    (folder / "prometheus-token").write_text(TOKEN)
    (folder / "tokens.yml").write_text(yaml.safe_dump({"tokens": [
        {"name": TOKEN_NAME, "sha256": hash_token(TOKEN), "scopes": ["nodes:read",
                                                                     "alerts:write"],
         "tenants": ["*"]}]}))
    (folder / "evaluator.yml").write_text(yaml.safe_dump({
        "scrape": {"interval": "1s", "timeout": "1s"},
        "static_configs": [{"targets": [f"127.0.0.1:{ports['exporter']}"],
                            "labels": {"node": NODE, "tenant": TENANT}}],
        "storage": {"path": "gpu-health.duckdb"},
        "web": {"listen_address": f"127.0.0.1:{ports['evaluator']}",
                "external_url": f"http://127.0.0.1:{ports['evaluator']}"},
        "alerting": {"alertmanagers": [f"http://127.0.0.1:{ports['am']}"],
                     "resend_interval": RESEND, "timeout": "1s"},
        "rules": {"dir": str(REPO / "rules"), "active": "v1-ecc-growth"},
        "api": {"tokens_file": "tokens.yml"},
    }))


def _exporter_uuid(chain: Chain) -> str | None:
    status, body = http("GET", f"{chain.exporter}/metrics")
    if status != 200 or not isinstance(body, str):
        return None
    match = re.search(r'gpu_health_ecc_corrected_total\{gpu="0",uuid="([^"]+)"', body)
    return match.group(1) if match else None


def start_chain(folder: Path) -> Iterator[Chain]:
    """Start everything (the evaluator last, on the seeded store); stop everything after."""
    ports = {name: free_port() for name in ("exporter", "evaluator", "prometheus", "am")}
    procs, webhook = Procs(folder), Webhook()
    chain = Chain(procs, webhook, folder, folder / "nvidia-state.json",
                  f"http://127.0.0.1:{ports['exporter']}", f"http://127.0.0.1:{ports['evaluator']}",
                  f"http://127.0.0.1:{ports['prometheus']}", f"http://127.0.0.1:{ports['am']}")
    try:
        webhook.start()
        _write_configs(folder, ports, webhook)
        chain.set_card(CORRECTED_END, 0)
        procs.start("alertmanager", [
            binary("prometheus-alertmanager"), f"--config.file={folder / 'alertmanager.yml'}",
            f"--storage.path={folder / 'am-data'}", "--cluster.listen-address=",
            f"--web.listen-address=127.0.0.1:{ports['am']}"])
        procs.start("prometheus", [
            binary("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{ports['prometheus']}"])
        env = {**os.environ, "FAKE_NVIDIA_STATE": str(chain.state_file), "PYTHONUNBUFFERED": "1"}
        procs.start("exporter", [
            console_script("gpu-health-exporter"),
            f"--web.listen-address=127.0.0.1:{ports['exporter']}", "--collect-interval=1s",
            "--stale-after=5s", "--tool-timeout=1s",
            f"--nvidia-smi={REPO / 'tests' / 'fakebin' / 'nvidia-smi'}",
            "--xpu-smi=", "--cnmon="], env=env)
        chain.uuid = chain.wait("the exporter to report card 0", lambda: _exporter_uuid(chain))
        seed(folder / "gpu-health.duckdb", chain.uuid,
             datetime.now(UTC) - timedelta(minutes=1))
        procs.start("evaluator", [
            console_script("gpu-health-evaluator"), "run",
            f"--config={folder / 'evaluator.yml'}"],
            env={**env, "GPU_HEALTH_RULE_SCAN_INTERVAL_MINUTES": SCAN_MINUTES}, cwd=folder)
        for name, url in (("alertmanager", f"{chain.alertmanager}/-/ready"),
                          ("prometheus", f"{chain.prometheus}/-/ready"),
                          ("evaluator", f"{chain.evaluator}/readyz")):
            chain.wait(f"{name} to be ready", lambda u=url: http("GET", u)[0] == 200)
        yield chain
    finally:
        procs.stop_all()
        webhook.stop()
