"""Target discovery: static, file_sd (re-read on change, bad file keeps last good), http_sd."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpu_health.evaluator.config.file import parse_config
from gpu_health.evaluator.config.targets import TargetGroup, merge_groups, split_address
from gpu_health.evaluator.ingest.discovery import Discovery
from gpu_health.evaluator.selfmetrics import SelfMetrics
from tests.evaluator.ingest_support import FakeClock, stand_in


def _bump(path: Path, text: str) -> None:
    # Same-size rewrites within one mtime tick are possible on fast disks: move mtime on.
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _discovery(raw: dict[str, object], base: Path) -> tuple[Discovery, SelfMetrics]:
    metrics = SelfMetrics(CollectorRegistry())
    return Discovery(parse_config(raw, base=base), metrics=metrics), metrics


def test_split_address() -> None:
    assert split_address("gpu-01:10346") == ("gpu-01", 10346)
    assert split_address("[fe80::1]:10346") == ("fe80::1", 10346)
    assert split_address("10.0.0.1") is None and split_address("::1:80") is None


def test_node_label_then_host_fallback_and_conflicts() -> None:
    merged = merge_groups([
        [TargetGroup(("10.0.0.1:10346", "10.0.0.2:10346"), (("tenant", "acme"),))],
        [TargetGroup(("10.0.0.3:10346",), (("node", "10.0.0.1"),)),
         TargetGroup(("10.0.0.1:10346",), (("node", "other"),))],  # same URL: first wins
    ])
    assert [(t.node_id, t.tenant) for t in merged.targets] == [
        ("10.0.0.1", "acme"), ("10.0.0.2", "acme")
    ]
    assert len(merged.conflicts) == 2 and "10.0.0.3" in merged.conflicts[0]
    assert "listed again as node 'other'" in merged.conflicts[1]  # reported, not dropped silently


async def test_the_same_url_in_two_file_sd_groups_with_another_tenant_is_a_conflict(
        tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([
        {"targets": ["gpu-9:10346"], "labels": {"node": "gpu-9", "tenant": "a"}},
        {"targets": ["gpu-9:10346"], "labels": {"node": "gpu-9", "tenant": "b"}},
        {"targets": ["gpu-9:10346"], "labels": {"node": "gpu-9", "tenant": "a"}},  # same: fine
    ]))
    discovery = Discovery(parse_config({"file_sd_configs": [{"files": ["*.json"]}],
                                        "static_configs": []}, base=tmp_path))
    targets = await discovery.refresh(FakeClock()())
    assert [(t.node_id, t.tenant) for t in targets] == [("gpu-9", "a")]
    assert len(discovery.conflicts) == 1 and "tenant 'b'" in discovery.conflicts[0]


async def test_file_sd_reads_changes_and_keeps_last_good(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sd = tmp_path / "sd"
    sd.mkdir()
    good = [{"targets": ["gpu-01:10346"], "labels": {"node": "n1", "tenant": "acme"}}]
    (sd / "a.json").write_text(json.dumps(good))
    (sd / "b.yml").write_text("- targets: ['gpu-02:10346']\n")
    disc, metrics = _discovery({"file_sd_configs": [{"files": ["sd/*.json", "sd/*.yml"]}]},
                               tmp_path)
    clock = FakeClock()
    assert not disc.ready
    await disc.refresh(clock())
    assert disc.ready and [t.node_id for t in disc.targets] == ["n1", "gpu-02"]

    good.append({"targets": ["gpu-03:10346"], "labels": {"node": "n3"}})
    _bump(sd / "a.json", json.dumps(good))
    await disc.refresh(clock.advance(seconds=5))
    assert [t.node_id for t in disc.targets] == ["n1", "n3", "gpu-02"]

    with caplog.at_level(logging.WARNING):
        _bump(sd / "a.json", '[{"targets": ["gpu-01:10346"],')  # truncated JSON
        await disc.refresh(clock.advance(seconds=5))
    assert [t.node_id for t in disc.targets] == ["n1", "n3", "gpu-02"]  # last good kept
    assert "not valid JSON" in caplog.text and "keeping last good targets" in caplog.text
    assert any("a.json" in e for e in disc.last_errors.values())
    assert metrics.discovery_errors.labels("file_sd", "syntax")._value.get() == 1

    _bump(sd / "a.json", json.dumps([{"targets": ["not an address"]}]))
    await disc.refresh(clock.advance(seconds=5))
    assert len(disc.targets) == 3  # an invalid group rejects the file, as in Prometheus
    assert metrics.discovery_errors.labels("file_sd", "invalid")._value.get() == 1

    (sd / "b.yml").unlink()
    await disc.refresh(clock.advance(seconds=5))
    assert [t.node_id for t in disc.targets] == ["n1", "n3"]


async def test_http_sd_and_static_merge_and_failures_keep_last_good(tmp_path: Path) -> None:
    async with stand_in() as server:
        url = f"http://127.0.0.1:{server.port}/t/sd/metrics"
        disc, metrics = _discovery({
            "static_configs": [{"targets": ["gpu-00:10346"]}],
            "http_sd_configs": [{"url": url, "refresh_interval": "30s"}],
        }, tmp_path)
        await disc.start()
        try:
            clock = FakeClock()
            server.bodies["sd"] = "!500"
            await disc.refresh(clock())
            assert not disc.ready and [t.node_id for t in disc.targets] == ["gpu-00"]
            server.bodies["sd"] = json.dumps(
                [{"targets": ["gpu-07:10346"], "labels": {"__meta_x": "y", "node": "n7"}}])
            await disc.refresh(clock.advance(seconds=5))  # retried before the interval
            assert disc.ready and [t.node_id for t in disc.targets] == ["gpu-00", "n7"]
            server.bodies["sd"] = "{not json"
            await disc.refresh(clock.advance(seconds=10))
            assert server.requests["sd"] == 2  # not due yet
            await disc.refresh(clock.advance(seconds=30))
            assert [t.node_id for t in disc.targets] == ["gpu-00", "n7"]
            assert metrics.discovery_errors.labels("http_sd", "syntax")._value.get() == 1
        finally:
            await disc.close()


async def test_an_http_sd_answer_is_read_as_json_only(tmp_path: Path) -> None:
    """Prometheus's HTTP SD answer is JSON. It was read as YAML (a name meant to end in .json
    did not): 20,000 targets took 3 s of the GIL per refresh and /healthz up to 6 s
    (bench/discovery.py). A YAML answer is now refused as not JSON."""
    async with stand_in() as server:
        disc, metrics = _discovery({"http_sd_configs": [
            {"url": f"http://127.0.0.1:{server.port}/t/sd/metrics"}]}, tmp_path)
        await disc.start()
        try:
            server.bodies["sd"] = "- targets: ['gpu-07:10346']\n"
            await disc.refresh(FakeClock()())
        finally:
            await disc.close()
    [message] = disc.last_errors.values()
    assert "/t/sd/metrics: not valid JSON" in message
    assert metrics.discovery_errors.labels("http_sd", "syntax")._value.get() == 1


async def test_file_sd_not_ready_until_every_matched_file_was_valid_once(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "good.json").write_text('[{"targets": ["gpu-01:10346"]}]')
    disc, _ = _discovery({"file_sd_configs": [{"files": ["*.json"]}]}, tmp_path)
    await disc.refresh(FakeClock()())
    assert not disc.ready and [t.node_id for t in disc.targets] == ["gpu-01"]
    (tmp_path / "bad.json").unlink()
    await disc.refresh(FakeClock()())
    assert disc.ready


async def test_a_self_redirecting_http_sd_is_called_a_redirect_loop(tmp_path: Path) -> None:
    """Before: it read `loop: 0, message=''`."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound(str(request.url))

    app = web.Application()
    app.router.add_get("/sd", loop)
    async with TestServer(app, host="127.0.0.1") as server:
        disc, metrics = _discovery(
            {"http_sd_configs": [{"url": str(server.make_url("/sd"))}]}, tmp_path)
        await disc.start()
        try:
            await disc.refresh(FakeClock()())
        finally:
            await disc.close()
    [message] = disc.last_errors.values()
    assert message.endswith("/sd: redirect loop (more than 10 redirects)")
    assert metrics.discovery_errors.labels("http_sd", "redirects")._value.get() == 1


async def test_an_http_sd_answer_over_the_target_limit_is_refused_whole_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: 50,000 targets under the byte cap took RSS to 850 MB and logged 50,000
    warnings; a source over scrape.target_limit (20,000 by default) is refused whole."""
    many = json.dumps([{"targets": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:10346"
                                    for i in range(50_000)]}])
    async with stand_in() as server:
        disc, metrics = _discovery({"http_sd_configs": [
            {"url": f"http://127.0.0.1:{server.port}/t/sd/metrics", "refresh_interval": "1s"}]},
            tmp_path)
        await disc.start()
        try:
            clock = FakeClock()
            server.bodies["sd"] = json.dumps([{"targets": ["gpu-07:10346"]}])
            await disc.refresh(clock())
            server.bodies["sd"] = many
            with caplog.at_level(logging.WARNING, logger="gpu_health.evaluator.ingest.discovery"):
                for _ in range(3):
                    await disc.refresh(clock.advance(seconds=2))
        finally:
            await disc.close()
    assert [t.node_id for t in disc.targets] == ["gpu-07"]  # the last good list stays
    assert metrics.discovery_errors.labels("http_sd", "target_limit")._value.get() == 3
    [line] = [r.getMessage() for r in caplog.records]  # one line, not one per refresh
    assert "50000 targets, more than scrape.target_limit (20000): refused whole" in line


async def test_a_file_sd_symlink_loop_is_reported_once_and_does_not_hold_readiness(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: /readyz stayed 503 forever and the loop was logged every 5 s."""
    (tmp_path / "good.json").write_text('[{"targets": ["gpu-01:10346"]}]')
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    disc, metrics = _discovery({"file_sd_configs": [{"files": ["*.json"]}]}, tmp_path)
    with caplog.at_level(logging.WARNING, logger="gpu_health.evaluator.ingest.discovery"):
        for _ in range(3):
            await disc.refresh(FakeClock()())
    assert disc.ready and [t.node_id for t in disc.targets] == ["gpu-01"]
    [line] = [r.getMessage() for r in caplog.records]
    assert "loop.json: cannot read" in line
    assert metrics.discovery_errors.labels("file_sd", "read")._value.get() == 3


async def test_a_file_sd_fifo_or_device_is_refused_without_waiting(tmp_path: Path) -> None:
    """A FIFO matched by a file_sd glob would hold the discovery thread forever; /dev/zero
    would be read without end. Both are refused and the other files' targets are served."""
    sd = tmp_path / "sd"
    sd.mkdir()
    (sd / "a.json").write_text(json.dumps([{"targets": ["gpu-01:10346"]}]))
    os.mkfifo(sd / "b.json")
    (sd / "c.json").symlink_to("/dev/zero")
    disc, _ = _discovery({"file_sd_configs": [{"files": ["sd/*.json"]}]}, tmp_path)
    await asyncio.wait_for(disc.refresh(FakeClock()()), timeout=30)
    assert [t.node_id for t in disc.targets] == ["gpu-01"]
    errors = " ".join(disc.last_errors.values())
    assert "b.json: not a regular file" in errors and "c.json: not a regular file" in errors
