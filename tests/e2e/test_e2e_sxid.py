"""A node's NVSwitch errors from the kernel log to the store: the real exporter process follows a
kmsg file (records written here in the kernel's ``pri,seq,usec,flags;message`` layout, the
messages as the real log in ../shared/fixtures/nvidia/kmsg-xid79-sxid20034.log shows them); the
evaluator's own scraper reads it over HTTP and its ingestor writes change-only rows to a real
DuckDB file."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpu_health.evaluator.config.targets import Target
from gpu_health.evaluator.ingest.cycle import Ingestor
from gpu_health.evaluator.ingest.dedup import DedupCache
from gpu_health.evaluator.ingest.scrape import Scraper
from gpu_health.evaluator.store.engines.duckdb import DuckDBDatabase
from tests.e2e.chain import REPO, console_script
from tests.e2e.stack import Procs, free_port, http, wait_for

# One error is a "Fatal" line and detail lines with the same switch and code (that real log).
FATAL = "nvidia-nvswitch{n}: SXid (PCI:0000:0{bus}:00.0): 20034, Fatal, Link 63 LTSSM Fault Up"
DETAIL = ("nvidia-nvswitch{n}: SXid (PCI:0000:0{bus}:00.0): 20034, Severity 1 Engine instance 63 "
          "Sub-engine instance 00")


def _record(seq: int, message: str) -> str:
    return f"4,{seq},{6781741548768 + seq},-;{message}\n"


def test_an_nvswitch_error_in_the_kernel_log_is_stored_for_its_node(tmp_path: Path) -> None:
    kmsg, port = tmp_path / "kmsg", free_port()
    kmsg.write_text("")
    procs = Procs(tmp_path)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        procs.start("exporter", [
            console_script("gpu-health-exporter"), f"--web.listen-address=127.0.0.1:{port}",
            "--collect-interval=2s", "--tool-timeout=2s",
            f"--nvidia-smi={REPO / 'tests' / 'fakebin' / 'nvidia-smi'}", "--xpu-smi=",
            "--cnmon=", f"--kmsg-path={kmsg}", "--dmesg=", "--journalctl=",
            "--xid-interval=100ms"], env=dict(os.environ))

        def exported(fragment: str) -> bool | None:
            status, body = http("GET", url)
            return True if status == 200 and fragment in str(body) else None

        wait_for("the kernel log followed", lambda: exported(
            'gpu_health_exporter_xid_log_readable{source="kmsg"} 1.0'), 60, procs)
        with kmsg.open("a") as fh:
            fh.write(_record(1, FATAL.format(n=0, bus=5)) + _record(2, DETAIL.format(n=0, bus=5)))
        wait_for("the switch error exported", lambda: exported('sxid="20034"'), 60, procs)
        db = DuckDBDatabase(tmp_path / "store.duckdb")
        assert asyncio.run(_scrapes(db, port, [kmsg])) == [
            ("n1", "real", 0, "0000:05:00", 20034, True, 1),
            ("n1", "real", 0, "0000:05:00", 20034, True, 2),
            ("n1", "real", 1, "0000:06:00", 20034, True, 1)]
        db.close()
    finally:
        procs.stop_all()


async def _scrapes(db: DuckDBDatabase, port: int, kmsg: list[Path]) -> list[tuple[object, ...]]:
    """Three scrapes: the first error, the same again (no row), then two more errors."""
    now = [datetime.now(UTC)]
    ingestor = Ingestor(db, DedupCache(), keepalive=timedelta(minutes=5))
    target = Target(f"127.0.0.1:{port}", "n1")
    async with Scraper(timeout=5, max_concurrency=1, max_response_bytes=1 << 20,
                       clock=lambda: now[0]) as scraper:
        for step in range(3):
            if step == 2:
                with kmsg[0].open("a") as fh:
                    fh.write(_record(3, FATAL.format(n=0, bus=5))
                             + _record(4, FATAL.format(n=1, bus=6)))
                await _until_exported(scraper, target, 3)
            now[0] += timedelta(minutes=1)
            await ingestor.ingest(await scraper.scrape_all([target]))
    return db.fetchall("SELECT node_id, source, nvswitch, pci_bus_id, sxid, fatal, count "
                       "FROM gpu_health_sxid_samples ORDER BY sampled_at, nvswitch")


async def _until_exported(scraper: Scraper, target: Target, total: int) -> None:
    """Poll the exporter until its SXid counts add up to ``total`` (the follower's next read)."""
    for _ in range(600):
        result = await scraper.scrape(target)
        if result.ok and sum(n for _, n in result.extraction.sxids) == total:
            return
        await asyncio.sleep(0.05)  # polling the exporter's follower thread, not waiting for time
    raise AssertionError("the exporter did not count the new switch errors")
