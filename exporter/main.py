"""``gpu-health-exporter`` entry point: wire settings, sources, cache, loop and outputs.

Modes: serve ``/metrics`` + ``/healthz``, tick every interval and follow the kernel log for
NVIDIA Xid lines in a second thread (default); ``--once`` collects once (no Xid following: a
single tick has no "since start" to count) and prints the exposition (or writes ``--textfile``)
and exits 0 even when a vendor failed; ``--textfile`` without ``--once`` rewrites the file
atomically after every tick. Exit status 2
means bad arguments (every problem is listed); 1 means the HTTP port or the textfile could not
be used.
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from prometheus_client import generate_latest, write_to_textfile
from prometheus_client.registry import CollectorRegistry

from gpu_health.clock import Clock, system_clock
from gpu_health.errors import ConfigError
from gpu_health.logformat import formatter, level_number
from gpu_health.runner import ToolRunner
from gpu_health.webguard import WebGuard

from .cache import ReadingCache
from .collection_loop import CollectionLoop
from .collector import build_registry
from .http import make_app, serve
from .settings import Settings, parse_args
from .sources import SOURCE_CLASSES, VendorSource
from .sources.nvidia import NvidiaSource
from .xid_follower import XidFollower
from .xid_store import XidCollector, XidStore

log = logging.getLogger("exporter")

KERNEL_LOG_MAX_BYTES = 32 * 1024 * 1024  # the largest ring buffer (log_buf_len) is 32 MiB


@dataclass(frozen=True, slots=True)
class Exporter:
    """Everything one exporter process is made of (tests build one with their own clock)."""

    settings: Settings
    sources: tuple[VendorSource, ...]
    cache: ReadingCache
    registry: CollectorRegistry
    loop: CollectionLoop
    xid: XidFollower | None = None  # None when NVIDIA or every kernel-log source is off


def build(settings: Settings, clock: Clock = system_clock) -> Exporter:
    runner = ToolRunner(
        timeout_s=settings.tool_timeout_s,
        max_output_bytes=settings.max_output_bytes,
        env=settings.tool_env,
    )
    sources = tuple(
        cls(settings.binaries.get(cls.vendor, cls.default_binary), runner)
        for cls in SOURCE_CLASSES
    )
    cache = ReadingCache(timedelta(seconds=settings.stale_after_s))
    registry = build_registry(cache, sources, clock, settings.node_name)
    after_tick = None
    if settings.textfile is not None:
        after_tick = functools.partial(write_textfile, settings.textfile, registry)
    loop = CollectionLoop(sources, cache, clock, settings.collect_interval_s, after_tick)
    return Exporter(settings, sources, cache, registry, loop,
                    build_xid(settings, cache, registry, clock))


def build_xid(
    settings: Settings, cache: ReadingCache, registry: CollectorRegistry, clock: Clock
) -> XidFollower | None:
    """The Xid follower and its metrics, for nodes where NVIDIA is collected."""
    nvidia = settings.binaries.get(NvidiaSource.vendor, NvidiaSource.default_binary)
    sources = settings.kmsg_path or settings.dmesg or settings.journalctl
    if settings.once or not nvidia or not sources:
        return None
    store = XidStore()
    registry.register(XidCollector(store))
    # dmesg prints the whole ring buffer, which may exceed the vendor tools' output cap.
    runner = ToolRunner(timeout_s=settings.tool_timeout_s, env=settings.tool_env,
                        max_output_bytes=max(settings.max_output_bytes, KERNEL_LOG_MAX_BYTES))
    return XidFollower(
        store, runner, lambda: cache.collected(NvidiaSource.vendor, clock()),
        kmsg_path=settings.kmsg_path, dmesg=settings.dmesg, journalctl=settings.journalctl,
        interval_s=settings.xid_interval_s, max_bytes_per_poll=settings.xid_max_bytes_per_poll,
        max_line_bytes=settings.xid_max_line_bytes)


def write_textfile(path: Path, registry: CollectorRegistry) -> None:
    """Atomic: written beside ``path`` and renamed, so node_exporter never reads half a file."""
    write_to_textfile(str(path), registry)


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_args(argv)
    except ConfigError as exc:
        print(f"gpu-health-exporter: {exc}", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings.log_format))
    logging.basicConfig(level=level_number(settings.log_level), handlers=[handler])
    for notice in settings.notices:
        log.warning("%s", notice)
    exporter = build(settings)
    if settings.once:
        return run_once(exporter)
    return run_server(exporter)


def run_once(exporter: Exporter) -> int:
    """One tick, then print (or write the textfile). Vendor failures do not change the status."""
    try:
        exporter.loop.tick()
        if exporter.settings.textfile is not None:
            write_textfile(exporter.settings.textfile, exporter.registry)
        else:
            sys.stdout.buffer.write(generate_latest(exporter.registry))
            sys.stdout.flush()
    except OSError as exc:
        log.error("cannot write the exposition: %s", exc)
        return 1
    finally:
        exporter.loop.stop()
    return 0


def describe(guard: WebGuard) -> str:
    tls = "on" if guard.tls else "off"
    users = "on" if guard.basic_auth else "off"
    return f" (web config {guard.path}: TLS {tls}, basic auth {users})"


def run_server(exporter: Exporter) -> int:
    settings = exporter.settings

    def health() -> tuple[bool, str]:
        return exporter.loop.health(exporter.loop.clock(), settings.stale_after_s)

    try:
        guard = None if settings.web_config is None else WebGuard(settings.web_config)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    try:
        server, _ = serve(settings.listen_host, settings.listen_port,
                          make_app(exporter.registry, health), registry=exporter.registry,
                          guard=guard)
    except OSError as exc:
        log.error("cannot listen on %s:%d: %s", settings.listen_host, settings.listen_port, exc)
        return 1
    log.info("listening on %s:%d%s", settings.listen_host or "*", server.server_port,
             "" if guard is None else describe(guard))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    exporter.loop.start()
    if exporter.xid is not None:
        exporter.xid.start()
    stop.wait()
    log.info("stopping")
    server.shutdown()
    exporter.loop.stop(timeout_s=settings.tool_timeout_s + 1)
    if exporter.xid is not None:
        exporter.xid.stop(timeout_s=settings.tool_timeout_s + 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
