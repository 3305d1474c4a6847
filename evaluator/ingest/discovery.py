"""Target discovery: static groups, Prometheus ``file_sd`` files, ``http_sd`` endpoints and
``dns_sd`` names (evaluator/ingest/dns_sd.py).

``Discovery.refresh`` is one tick (the app runs it every few seconds). File SD checks every
matching file's (mtime, size) on each tick and re-reads changed files at once, plus every file
once per ``refresh_interval``; HTTP SD fetches once per ``refresh_interval`` (every tick until it
first succeeds). A bad file or response never empties the target list: the provider keeps its
last good groups, logs why, and counts ``discovery_errors_total{mechanism,reason}``. As in
Prometheus, one invalid group rejects the whole file or response.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import aiohttp
import yaml

from gpu_health.errors import DiscoveryError, ScrapeError
from gpu_health.evaluator.config.discovery import FileSDConfig, HttpSDConfig
from gpu_health.evaluator.config.file import Config
from gpu_health.evaluator.config.targets import Target, TargetGroup, merge_groups, parse_groups
from gpu_health.evaluator.ingest.dns_sd import DnsSD
from gpu_health.evaluator.ingest.identity import NodeNames
from gpu_health.evaluator.ingest.scrape import read_capped
from gpu_health.evaluator.outbound import ClientOptions, client_session
from gpu_health.evaluator.selfmetrics import SelfMetrics
from gpu_health.files import read_regular
from gpu_health.yamlload import load_yaml

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0
HTTP_SD_TIMEOUT_S = 30.0


def load_groups_text(text: str, name: str, target_limit: int | None = None, *,
                     as_json: bool | None = None) -> list[TargetGroup]:
    """Target groups from JSON or YAML text (``as_json``; by default a name ending in ``.json``
    is JSON); DiscoveryError lists every problem, or says the source lists more than
    ``target_limit`` targets (refused whole)."""
    is_json = name.endswith(".json") if as_json is None else as_json
    try:
        raw = json.loads(text) if is_json else load_yaml(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise DiscoveryError(f"{name}: not valid {'JSON' if is_json else 'YAML'}: {exc}",
                             reason="syntax") from exc
    if target_limit is not None and isinstance(raw, list):  # counted before validating each
        count = sum(len(g.get("targets") or ()) for g in raw if isinstance(g, dict))
        if count > target_limit:
            raise DiscoveryError(f"{name}: {count} targets, more than scrape.target_limit "
                                 f"({target_limit}): refused whole", reason="target_limit")
    groups, problems = parse_groups(raw, name)
    if problems:
        raise DiscoveryError("; ".join(problems), reason="invalid")
    return groups


class Provider(Protocol):
    mechanism: str
    name: str

    @property
    def produced(self) -> bool: ...

    @property
    def groups(self) -> list[TargetGroup]: ...

    async def refresh(self, now: datetime) -> list[DiscoveryError]: ...


@dataclass(slots=True)
class _FileState:
    stamp: tuple[int, int]
    groups: list[TargetGroup]


class FileSD:
    mechanism = "file_sd"

    def __init__(self, config: FileSDConfig, target_limit: int | None = None,
                 max_bytes: int = 10 * 1024 * 1024) -> None:
        self.config = config
        self.target_limit = target_limit
        self.max_bytes = max_bytes  # as an http_sd answer (a FIFO or /dev/zero is refused)
        self.name = "file_sd:" + ",".join(config.files)
        self._matched: list[str] | None = None  # paths the last scan found (None: no scan yet)
        self._files: dict[str, _FileState] = {}
        self._unreadable: set[str] = set()  # matched, but stat/read fails (a symlink loop)
        self._last_full: datetime | None = None

    @property
    def groups(self) -> list[TargetGroup]:
        return [g for path in sorted(self._files) for g in self._files[path].groups]

    @property
    def produced(self) -> bool:
        """Every file the last scan matched has been read successfully at least once, or
        cannot be read at all (a symlink loop, no permission: reported, never waited for,
        so the other sources' targets are served)."""
        return self._matched is not None and all(
            p in self._files or p in self._unreadable for p in self._matched)

    async def refresh(self, now: datetime) -> list[DiscoveryError]:
        full = self._last_full is None or \
            now - self._last_full >= timedelta(seconds=self.config.refresh_interval)
        if full:
            self._last_full = now
        return await asyncio.to_thread(self._scan, full)

    def _scan(self, full: bool) -> list[DiscoveryError]:
        errors: list[DiscoveryError] = []
        # As in Prometheus, a glob may only appear in the last path element (settings checks it).
        paths = sorted({
            str(p) for pattern in self.config.files
            for p in Path(pattern).parent.glob(Path(pattern).name)
        })
        for gone in set(self._files) - set(paths):
            log.info("file_sd: %s disappeared; its targets are dropped", gone)
            del self._files[gone]
        for path in paths:
            known = self._files.get(path)
            try:
                st = Path(path).stat()
                stamp = (st.st_mtime_ns, st.st_size)
                if known is not None and known.stamp == stamp and not full:
                    continue
                text = read_regular(Path(path), self.max_bytes).decode("utf-8")
                groups = load_groups_text(text, path, self.target_limit)
                self._unreadable.discard(path)
            except DiscoveryError as exc:
                errors.append(exc)
                if known is not None:
                    known.stamp = stamp  # keep last good groups; re-read when the file changes
                continue
            except (OSError, UnicodeDecodeError) as exc:
                errors.append(DiscoveryError(f"{path}: cannot read: {exc}", reason="read"))
                self._unreadable.add(path)
                continue
            self._files[path] = _FileState(stamp, groups)
        self._matched = paths
        return errors


class HttpSD:
    mechanism = "http_sd"

    def __init__(self, config: HttpSDConfig, session: aiohttp.ClientSession,
                 max_bytes: int, target_limit: int | None = None) -> None:
        self.config = config
        self.target_limit = target_limit
        self.name = "http_sd:" + config.url
        self.produced = False
        self.groups: list[TargetGroup] = []
        self._session = session
        self._max_bytes = max_bytes
        self._last_attempt: datetime | None = None

    async def refresh(self, now: datetime) -> list[DiscoveryError]:
        interval = timedelta(seconds=self.config.refresh_interval)
        if self.produced and self._last_attempt is not None and \
                now - self._last_attempt < interval:
            return []
        self._last_attempt = now
        try:
            text = await self._fetch()
            # Off the event loop, as file_sd's scan: tens of thousands of targets take a while
            # to validate, and /healthz must not wait behind them.
            # Prometheus's HTTP SD answer is JSON, and only JSON: read as YAML (pure Python),
            # 20,000 targets took 3 s of the GIL per refresh and held /healthz for seconds.
            self.groups = await asyncio.to_thread(load_groups_text, text, self.config.url,
                                                  self.target_limit, as_json=True)
        except DiscoveryError as exc:
            return [exc]
        self.produced = True
        return []

    async def _fetch(self) -> str:
        timeout = min(HTTP_SD_TIMEOUT_S, self.config.refresh_interval)
        try:
            async with asyncio.timeout(timeout), self._session.get(self.config.url) as resp:
                if resp.status != 200:
                    raise DiscoveryError(f"{self.config.url}: HTTP {resp.status}",
                                         reason="http_status")
                body = await read_capped(resp, self._max_bytes)
        except ScrapeError as exc:
            raise DiscoveryError(f"{self.config.url}: {exc}", reason=exc.reason) from exc
        except TimeoutError as exc:
            raise DiscoveryError(f"{self.config.url}: no answer within {timeout:g}s",
                                 reason="timeout") from exc
        except aiohttp.TooManyRedirects as exc:  # its own text is "0, message=''"
            raise DiscoveryError(f"{self.config.url}: redirect loop (more than "
                                 f"{len(exc.history)} redirects)", reason="redirects") from exc
        except aiohttp.ClientError as exc:
            raise DiscoveryError(f"{self.config.url}: {exc}", reason="connection") from exc
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DiscoveryError(f"{self.config.url}: not UTF-8", reason="syntax") from exc


class Discovery:
    """All configured sources merged into one target list (``targets``)."""

    def __init__(self, config: Config, *, metrics: SelfMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.static = list(config.static_configs)
        self.file_sd = [FileSD(c, config.scrape.target_limit, config.scrape.max_response_bytes)
                        for c in config.file_sd_configs]
        self.http_sd: list[HttpSD] = []
        self.dns_sd = [DnsSD(c, config.scrape.target_limit) for c in config.dns_sd_configs]
        self.names = NodeNames()  # learned by the scrape pipeline
        self._merged: tuple[Target, ...] = ()
        self._named: tuple[tuple[Target, ...], int, tuple[Target, ...]] = ((), 0, ())
        self.conflicts: tuple[str, ...] = ()
        self.last_errors: dict[str, str] = {}
        self.refreshed = False
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self.config.http_sd_configs:
            self._session = client_session(ClientOptions(
                connect_timeout=HTTP_SD_TIMEOUT_S, headers={"Accept": "application/json"}))
            self.http_sd = [HttpSD(c, self._session, self.config.scrape.max_response_bytes,
                                   self.config.scrape.target_limit)
                            for c in self.config.http_sd_configs]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def ready(self) -> bool:
        """True once every source has produced a valid target list (possibly empty): each
        http_sd answered well once, each file matched by file_sd parsed well once."""
        return self.refreshed and all(p.produced for p in self.providers)

    @property
    def providers(self) -> list[Provider]:
        return [*self.file_sd, *self.http_sd, *self.dns_sd]

    @property
    def targets(self) -> tuple[Target, ...]:
        """The merged targets, each without a ``node`` label named after its exporter's own
        node name once it gave one (:class:`NodeNames`); made again only after a change."""
        merged, version, named = self._named
        if merged is not self._merged or version != self.names.version:
            named = self.names.apply(self._merged)
            self._named = (self._merged, self.names.version, named)
        return named

    async def refresh(self, now: datetime) -> tuple[Target, ...]:
        for provider in self.providers:
            errors = await provider.refresh(now)
            said = self.last_errors.get(provider.name)
            if errors:
                self.last_errors[provider.name] = "; ".join(str(e) for e in errors)
            else:
                self.last_errors.pop(provider.name, None)
            for exc in errors:
                if said is None or str(exc) not in said:  # said once, not every refresh
                    log.warning("%s: keeping last good targets: %s", provider.mechanism, exc)
                if self.metrics is not None:
                    self.metrics.discovery_errors.labels(provider.mechanism, exc.reason).inc()
        sources: list[Sequence[TargetGroup]] = [self.static]
        sources.extend(p.groups for p in self.providers)
        merged = merge_groups(sources)
        for conflict in set(merged.conflicts) - set(self.conflicts):
            log.warning("discovery: %s", conflict)
        self._merged, self.conflicts = merged.targets, merged.conflicts
        self.refreshed = True
        if self.metrics is not None:
            self.metrics.targets.set(len(self.targets))
            self.metrics.target_conflicts.set(len(self.conflicts))
        return self.targets
