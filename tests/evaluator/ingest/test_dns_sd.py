"""``dns_sd_configs`` against a real DNS server on loopback (dnsmasq): A, AAAA and SRV records,
refresh, an empty or NXDOMAIN answer as no target, a server that does not answer keeping the last
good targets, the target limit; and real exporter processes on 127.0.0.2-4 found by one name,
each named after the node it says it runs on, their cards stored under those names."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.discovery import DnsSDConfig
from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.discovery import Discovery
from gpu_health.evaluator.ingest.dns_sd import DnsSD
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.ingest.scrape_tick import IngestPipeline
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.dns_support import DnsServer, dns_server
from tests.e2e.stack import Procs, free_port, http, wait_for
from tests.evaluator.ingest_support import T0, FakeClock
from tests.shared import REPO


@pytest.fixture
def dns(tmp_path: Path) -> Iterator[DnsServer]:
    records = [("127.0.0.2", "exporters.test"), ("127.0.0.3", "exporters.test"),
               ("127.0.0.4", "exporters.test"), ("::1", "v6.test"), ("127.0.0.9", "other.test")]
    srv = ["_gpu-health._tcp.svc.test,e1.test,10346", "_gpu-health._tcp.svc.test,e2.test,10400"]
    with dns_server(tmp_path, records, srv) as server:
        yield server


def sd(dns: DnsServer, *names: str, kind: str = "A", port: int | None = 10346,
       limit: int | None = None) -> DnsSD:
    host, p = dns.nameserver.split(":")
    return DnsSD(DnsSDConfig(names=names, type=kind, port=port, refresh_interval=30.0,
                             nameservers=((host, int(p)),), labels=(("tenant", "a"),)), limit)


async def test_a_aaaa_and_srv_records_become_targets(dns: DnsServer) -> None:
    a = sd(dns, "exporters.test")
    assert await a.refresh(T0) == [] and a.produced
    [group] = a.groups
    assert group.targets == ("127.0.0.2:10346", "127.0.0.3:10346", "127.0.0.4:10346")
    assert group.labels == (("tenant", "a"),)
    v6 = sd(dns, "v6.test", kind="AAAA", port=9)
    assert await v6.refresh(T0) == [] and v6.groups[0].targets == ("[::1]:9",)
    srv = sd(dns, "_gpu-health._tcp.svc.test", kind="SRV", port=None)
    assert await srv.refresh(T0) == []
    assert srv.groups[0].targets == ("e1.test:10346", "e2.test:10400")


async def test_refresh_interval_and_a_changed_answer(dns: DnsServer) -> None:
    a = sd(dns, "exporters.test")
    await a.refresh(T0)
    dns.set_hosts([("127.0.0.5", "exporters.test")])
    await a.refresh(T0 + timedelta(seconds=10))  # not due: the last answer stands
    assert len(a.groups[0].targets) == 3
    await a.refresh(T0 + timedelta(seconds=30))
    assert a.groups[0].targets == ("127.0.0.5:10346",)


async def test_nxdomain_and_an_empty_answer_are_no_targets(dns: DnsServer) -> None:
    gone = sd(dns, "nothing-here.test", "exporters.test")
    assert await gone.refresh(T0) == [] and gone.produced
    assert [g.targets for g in gone.groups] == [(), ("127.0.0.2:10346", "127.0.0.3:10346",
                                                     "127.0.0.4:10346")]
    no_v6 = sd(dns, "exporters.test", kind="AAAA")
    assert await no_v6.refresh(T0) == [] and no_v6.groups[0].targets == ()


async def test_no_answer_keeps_the_last_good_targets(dns: DnsServer, tmp_path: Path) -> None:
    a = sd(dns, "exporters.test")
    await a.refresh(T0)
    dns.process.terminate()  # the server is gone: lookups get no answer
    dns.process.wait(10)
    errors = await a.refresh(T0 + timedelta(seconds=30))
    assert [e.reason for e in errors] == ["dns"] and "no answer" in str(errors[0])
    assert len(a.groups[0].targets) == 3  # kept


async def test_more_answers_than_the_target_limit_refuse_that_name(dns: DnsServer) -> None:
    a = sd(dns, "exporters.test", limit=2)
    errors = await a.refresh(T0)
    assert [e.reason for e in errors] == ["target_limit"] and not a.produced


def test_config_problems_are_listed_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"dns_sd_configs": [
            {"names": ["ok.test", "bad name"], "type": "MX"},
            {"names": ["x.test"], "type": "A"},
            {"names": ["y.test"], "nameservers": ["dns.example:53"], "labels": {"node": "n"}}]},
            base=tmp_path)
    text = str(info.value)
    for needle in ("'bad name' is not a DNS name", "type must be one of SRV, A, AAAA",
                   "dns_sd_configs[1].port is required for type A",
                   "is not ip:port", "labels.node"):
        assert needle in text, needle


async def test_exporters_found_by_one_name_are_named_after_their_nodes(
        dns: DnsServer, tmp_path: Path) -> None:
    """Three real exporter processes on 127.0.0.2-4, one A record each under one name; each was
    given its node's name ($NODE_NAME, as the chart sets it from spec.nodeName)."""
    port = free_port()
    procs = Procs(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        for i, ip in enumerate(("127.0.0.2", "127.0.0.3", "127.0.0.4")):
            procs.start(f"exporter-{i}", [
                sys.executable, "-m", "gpu_health.exporter.main",
                f"--web.listen-address={ip}:{port}",
                f"--nvidia-smi={REPO / 'tests/fakebin/nvidia-smi'}", "--kmsg-path=",
                "--dmesg=", "--journalctl="], env={**env, "NODE_NAME": f"gpu-node-{i}"})
        def serving(ip: str) -> bool | None:
            body = http("GET", f"http://{ip}:{port}/metrics")[1]
            return "gpu_health_ecc_corrected_total{" in str(body) or None

        for ip in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            wait_for(f"the exporter on {ip}", functools.partial(serving, ip), 30, procs)
        config = parse_config({"dns_sd_configs": [{
            "names": ["exporters.test"], "type": "A", "port": port,
            "nameservers": [dns.nameserver]}]}, base=tmp_path)
        discovery = Discovery(config)
        await discovery.refresh(T0)
        assert sorted(t.node_id for t in discovery.targets) == ["127.0.0.2", "127.0.0.3",
                                                                 "127.0.0.4"]
        db = DuckDBDatabase(tmp_path / "dns.duckdb")
        clock = FakeClock()
        async with Scraper(timeout=5, max_concurrency=4, max_response_bytes=1 << 20,
                           clock=clock) as scraper:
            pipeline = IngestPipeline(
                targets=lambda: discovery.targets, scraper=scraper, clock=clock,
                names=discovery.names,
                ingestor=Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5)))
            report = await pipeline.run_cycle()
        assert report.targets_up == 3
        stored = db.fetchall("SELECT DISTINCT node_id FROM gpu_health_samples ORDER BY 1")
        assert stored == [("gpu-node-0",), ("gpu-node-1",), ("gpu-node-2",)]
        # what names nodes from the discovered targets (present nodes, /targets) says so too
        assert sorted(t.node_id for t in discovery.targets) == ["gpu-node-0", "gpu-node-1",
                                                                 "gpu-node-2"]
        db.close()
    finally:
        procs.stop_all()
