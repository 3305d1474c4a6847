"""Live cycles against a real Prometheus scraping stand-in dcgm-exporter and nvidia_gpu_exporter
targets every second (the evaluator reads with a 1-second step and the real clock).

The expositions follow the shapes the captures in ``../shared/fixtures/dcgm/`` show (written
here, not copied): dcgm-exporter with its default counters (no ECC, no retired pages, no
row-remap-pending line; ``Hostname`` label) and one with the ECC and retired-pages lines enabled
(the newer ``hostname`` label); nvidia_gpu_exporter with only ``uuid`` (no ``GPU-``) on the
per-GPU series, every count a gauge, and the index on ``nvidia_smi_gpu_info``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gpu_health.clock import system_clock
from gpu_health.evaluator.compose import Service, build_service
from gpu_health.evaluator.config.file import parse_config
from tests.evaluator.ingest.prometheus.servers import (
    PROMETHEUS,
    PROMETHEUS_MISSING,
    Exposition,
    exporters,
    prometheus,
)

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason=PROMETHEUS_MISSING)

UUID_A = "GPU-265c9814-6156-355b-e589-ff2064894f16"
UUID_B0 = "GPU-b9f9e81b-bee7-34bc-af17-132ef6592740"
UUID_B1 = "GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49"
NV_UUID = "00000000-0000-0000-0000-000000000000"


def dcgm_default(xid: int) -> str:
    """dcgm-exporter with etc/default-counters.csv: XID, remapped rows, remap failure only."""
    labels = (f'gpu="0",UUID="{UUID_A}",pci_bus_id="00000000:07:00.0",device="nvidia0",'
              'modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu-a",'
              'DCGM_FI_DRIVER_VERSION="535.129.03"')
    return (
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}\n"
        "# HELP DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS Number of remapped rows for "
        "uncorrectable errors\n"
        "# TYPE DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter\n"
        f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{labels}}} 0\n"
        "# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed\n"
        "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge\n"
        f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{labels}}} 0\n")


def dcgm_enabled(cards: int) -> str:
    """dcgm-exporter with the ECC aggregate and retired-pages lines uncommented."""
    lines = []
    for name, kind, value in (("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", 12),
                              ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", 0),
                              ("DCGM_FI_DEV_RETIRED_SBE", "counter", 1),
                              ("DCGM_FI_DEV_RETIRED_DBE", "counter", 0),
                              ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 0)):
        lines.append(f"# TYPE {name} {kind}")
        for gpu, uuid in list(enumerate((UUID_B0, UUID_B1)))[:cards]:
            lines.append(f'{name}{{gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",'
                         f'modelName="NVIDIA H100 80GB HBM3",hostname="gpu-b"}} {value + gpu}')
    return "\n".join(lines) + "\n"


def nvidia_smi() -> str:
    u = f'uuid="{NV_UUID}"'
    return (
        "# TYPE nvidia_smi_gpu_info gauge\n"
        f'nvidia_smi_gpu_info{{driver_version="590.48.01",index="2",name="NVIDIA H100 80GB HBM3",'
        f'{u}}} 1\n'
        "# TYPE nvidia_smi_ecc_errors_corrected_aggregate_total gauge\n"
        f"nvidia_smi_ecc_errors_corrected_aggregate_total{{{u}}} 3\n"
        "# TYPE nvidia_smi_ecc_errors_uncorrected_aggregate_total gauge\n"
        f"nvidia_smi_ecc_errors_uncorrected_aggregate_total{{{u}}} 0\n"
        "# TYPE nvidia_smi_remapped_rows_pending gauge\n"
        f"nvidia_smi_remapped_rows_pending{{{u}}} 0\n"
        "# TYPE nvidia_smi_remapped_rows_failure gauge\n"
        f"nvidia_smi_remapped_rows_failure{{{u}}} 0\n")


def service(tmp: Path, url: str, name: str, metrics: str, selector: str) -> Service:
    config = parse_config({
        "storage": {"path": f"{name}.duckdb"}, "web": {"listen_address": "127.0.0.1:0"},
        "ingest": {"source": "prometheus", "prometheus": {
            "url": url, "metrics": metrics, "selector": selector, "step": "1s", "lag": "2s",
            "max_catchup": "1m"}}}, base=tmp)
    return build_service(config, {}, clock=system_clock, start_loops=False)


async def cycles_until(svc: Service, what: str, probe: Any, deadline_s: float = 60.0) -> Any:
    """Run live cycles until ``probe()`` is truthy (each cycle reads the steps now due)."""
    assert svc.source is not None
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        await svc.app.run_tick("ingest")
        found = probe()
        if found:
            return found
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}: {svc.source.describe()}")
        await asyncio.sleep(0.2)  # a poll interval, not a wait for time to pass


def rows(svc: Service, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in svc.db.fetchall(sql)]


def test_dcgm_and_nvidia_smi_through_a_real_prometheus(tmp_path: Path) -> None:
    a, b, nv = Exposition(dcgm_default(0)), Exposition(dcgm_enabled(2)), Exposition(nvidia_smi())
    with exporters([a, b, nv]), prometheus(tmp_path, {"dcgm": [a.address, b.address],
                                                      "nvidia": [nv.address]}) as url:
        dcgm = service(tmp_path, url, "dcgm", "dcgm", 'job="dcgm"')
        smi = service(tmp_path, url, "smi", "nvidia_smi", 'job="nvidia"')
        asyncio.run(_scenario(dcgm, smi, a, b))


async def _scenario(dcgm: Service, smi: Service, a: Exposition, b: Exposition) -> None:
    async with TestClient(TestServer(dcgm.web_app)) as client:
        assert dcgm.source is not None and smi.source is not None
        await smi.source.__aenter__()
        await cycles_until(smi, "nvidia_smi rows", lambda: rows(
            smi, "SELECT 1 FROM gpu_health_samples LIMIT 1"))
        await cycles_until(dcgm, "both dcgm nodes", lambda: len(rows(
            dcgm, "SELECT DISTINCT node_id FROM gpu_health_samples")) == 2)
        a.text = dcgm_default(48)
        await cycles_until(dcgm, "the XID event", lambda: rows(
            dcgm, "SELECT 1 FROM gpu_health_xid_samples WHERE xid = 48 AND count = 1"))
        # A series that disappears is marked stale by Prometheus at the next scrape: the card
        # leaves the readings within seconds, not after the 5-minute lookback.
        b.text = dcgm_enabled(1)
        gone = datetime.now(UTC) + timedelta(seconds=3)
        await cycles_until(dcgm, "card 1 of gpu-b gone", lambda: _cards_at(dcgm, "gpu-b", gone),
                           deadline_s=30)
        response = await client.get("/targets")
        body = await response.json()
        assert response.status == 200
        assert body["source"]["kind"] == "prometheus" and body["source"]["failing"] is False
        assert {t["node"] for t in body["targets"]} == {"gpu-a", "gpu-b"}
        assert all(t["url"].endswith("#" + t["node"]) for t in body["targets"])
        assert (await client.get("/readyz")).status == 200
        metrics = await (await client.get("/metrics")).text()
        assert "gpu_health_evaluator_source_points_read_total" in metrics
        _check_rows(dcgm, smi)
        await smi.app.close()


def _check_rows(dcgm: Service, smi: Service) -> None:
    # Default counters: only the remap failure is known; the rest stays NULL, never 0.
    assert rows(dcgm, "SELECT DISTINCT gpu_uuid, ecc_uncorrected_total, ecc_corrected_total, "
                      "retired_pages, remapped_rows_pending, remapped_rows_failure FROM "
                      "gpu_health_samples WHERE node_id = 'gpu-a'") == \
        [(UUID_A, None, None, None, None, 0)]
    # Enabled lines: ECC and retired pages (SBE + DBE) known; row-remap-pending has no field.
    assert rows(dcgm, "SELECT DISTINCT gpu_index, ecc_uncorrected_total, ecc_corrected_total, "
                      "retired_pages, remapped_rows_pending FROM gpu_health_samples WHERE "
                      "node_id = 'gpu-b' ORDER BY 1") == [(0, 0, 12, 1, None), (1, 1, 13, 3, None)]
    # The XID gauge's change 0 -> 48 is one event of XID 48.
    assert rows(dcgm, "SELECT xid, count FROM gpu_health_xid_samples WHERE node_id = 'gpu-a' "
                      "AND xid = 48 ORDER BY sampled_at") == [(48, 0), (48, 1)]
    # nvidia_gpu_exporter: the GPU- prefix back, the index from gpu_info, node from instance.
    assert rows(smi, "SELECT DISTINCT node_id, gpu_index, gpu_uuid, ecc_corrected_total, "
                     "retired_pages FROM gpu_health_samples") == \
        [("127.0.0.1", 2, f"GPU-{NV_UUID}", 3, None)]


def _cards_at(svc: Service, node: str, after: datetime) -> bool:
    assert svc.source is not None
    seen = svc.source.status.seen.get(node)
    if seen is None or seen[1] < after:
        return False
    return [c.gpu_index for c in seen[0].extraction.cards] == [0]
