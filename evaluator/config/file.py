"""Evaluator settings: the YAML config file and the environment.

Nothing here reads the environment or argv itself: ``evaluator/main.py`` reads them once and
passes the mapping in (argv is parsed by ``evaluator/cli.py``).

``load_config`` validates the whole file and raises one :class:`ConfigError` listing every
problem. Relative paths written in the file resolve against the file's folder (as Prometheus
does for ``file_sd`` files); built-in defaults resolve against the working directory so the
README demo runs without a file. See docs/evaluator-ingest.md for the reference.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import yaml

from gpu_health.contract import SOURCE_REAL
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.alerting import AlertingConfig, parse_alerting
from gpu_health.evaluator.config.api import ApiConfig, parse_api
from gpu_health.evaluator.config.discovery import (
    DnsSDConfig,
    FileSDConfig,
    HttpSDConfig,
    parse_dns_sd,
    parse_file_sd,
    parse_http_sd,
)
from gpu_health.evaluator.config.remediation import SlurmRemediation, parse_remediation
from gpu_health.evaluator.config.rules import RulesConfig, parse_rules
from gpu_health.evaluator.config.scrape import ScrapeConfig, parse_scrape
from gpu_health.evaluator.config.source import IngestConfig, parse_ingest
from gpu_health.evaluator.config.storage import HaConfig, StorageConfig, parse_ha, parse_storage
from gpu_health.evaluator.config.targets import TargetGroup, parse_groups
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.config.web import ListenerConfig, parse_web
from gpu_health.evaluator.config.writes import (
    DEFAULT_KEEPALIVE,
    KEEPALIVE,
    DedupConfig,
    parse_dedup,
)
from gpu_health.yamlload import load_yaml

log = logging.getLogger(__name__)

DEFAULT_TARGET: Final = "127.0.0.1:10346"
DEFAULT_RETENTION_DAYS: Final = 180
MAX_RETENTION_DAYS: Final = 36_500
RETENTION_ENV: Final = "GPU_HEALTH_RETENTION_DAYS"
TOP_KEYS: Final = (
    "scrape", "static_configs", "file_sd_configs", "http_sd_configs", "dns_sd_configs",
    "storage", "web", "dedup",
    *KEEPALIVE.keys, "alerting", "rules", "api", "ingest", "ha", "remediation",
)


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the evaluator reads at start-up (frozen; a new file means a restart): one
    field per top-level key of the file, each section its own dataclass declared beside its
    table (``config/<section>.py``), then what does not come from the file."""

    scrape: ScrapeConfig = field(default_factory=ScrapeConfig)
    static_configs: tuple[TargetGroup, ...] = ()
    file_sd_configs: tuple[FileSDConfig, ...] = ()
    http_sd_configs: tuple[HttpSDConfig, ...] = ()
    dns_sd_configs: tuple[DnsSDConfig, ...] = ()
    storage: StorageConfig = field(default_factory=StorageConfig)
    web: ListenerConfig = field(default_factory=ListenerConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    keepalive: timedelta = DEFAULT_KEEPALIVE
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)  # scrape, or a Prometheus source
    ha: HaConfig = field(default_factory=HaConfig)
    remediation: SlurmRemediation = field(default_factory=SlurmRemediation)
    # Not from the file: GPU_HEALTH_RETENTION_DAYS, the file itself (None: built-in defaults),
    # and the source label of scraped rows, which only the demo sets ('simulated', when it
    # scrapes an exporter driven by the fake vendor tools: fake readings are not real data).
    retention_days: int = DEFAULT_RETENTION_DAYS
    source: Path | None = None
    ingest_source: str = SOURCE_REAL

    @property
    def alertmanagers(self) -> tuple[str, ...]:
        return self.alerting.alertmanagers


def default_config(retention_days: int = DEFAULT_RETENTION_DAYS) -> Config:
    """No --config: one static target on this host, storage under ./data."""
    return Config(
        static_configs=(TargetGroup((DEFAULT_TARGET,)),), retention_days=retention_days
    )


def retention_days_from_env(environ: Mapping[str, str]) -> int:
    """GPU_HEALTH_RETENTION_DAYS, or 180 with a warning when it is not a positive integer.

    A typo must never turn into "delete everything": zero, negative, fractional or non-numeric
    values fall back to the default; absurdly large ones are capped (datetime cannot go back
    further than year 1, and a century keeps everything anyway).
    """
    raw = environ.get(RETENTION_ENV)
    if raw is None:
        return DEFAULT_RETENTION_DAYS
    text = raw.strip()
    # An empty value is a typo too (``GPU_HEALTH_RETENTION_DAYS=`` in a unit file): warn.
    if not (text.isascii() and text.isdigit()) or int(text) <= 0:
        log.warning(
            "%s=%r is not a positive whole number of days; using the default %d",
            RETENTION_ENV, raw, DEFAULT_RETENTION_DAYS,
        )
        return DEFAULT_RETENTION_DAYS
    if int(text) > MAX_RETENTION_DAYS:
        log.warning("%s=%s is above %d; using %d", RETENTION_ENV, text, MAX_RETENTION_DAYS,
                    MAX_RETENTION_DAYS)
        return MAX_RETENTION_DAYS
    return int(text)


def load_config(path: Path | None, environ: Mapping[str, str]) -> Config:
    """Read and validate ``path`` (None: built-in defaults); ConfigError lists every problem.
    ``environ`` is the environment ``gpu_health.evaluator.main`` read once."""
    retention = retention_days_from_env(environ)
    if path is None:
        return default_config(retention)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_config(raw, base=Path(path).resolve().parent, source=Path(path),
                        retention_days=retention)


def parse_config(
    raw: object, *, base: Path, source: Path | None = None,
    retention_days: int = DEFAULT_RETENTION_DAYS,
) -> Config:
    """Validate an already-loaded YAML document (None or {} gives the defaults)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError("the config file must be a YAML mapping of the top-level keys "
                          + ", ".join(TOP_KEYS))
    c = Checker()
    c.unknown_keys(raw, TOP_KEYS, "")
    static, problems = parse_groups(raw.get("static_configs"), "static_configs")
    for problem in problems:
        c.problem(problem)
    storage = parse_storage(c, raw, base)
    config = Config(
        scrape=parse_scrape(c, raw.get("scrape")),
        static_configs=tuple(static),
        file_sd_configs=parse_file_sd(c, raw.get("file_sd_configs"), base),
        http_sd_configs=parse_http_sd(c, raw.get("http_sd_configs")),
        dns_sd_configs=parse_dns_sd(c, raw.get("dns_sd_configs")),
        storage=storage,
        web=parse_web(c, raw),
        dedup=parse_dedup(c, raw),
        keepalive=_keepalive(c, raw),
        alerting=parse_alerting(c, raw),
        rules=parse_rules(c, raw, base),
        api=parse_api(c, raw, base),
        ingest=parse_ingest(c, raw, base),
        ha=parse_ha(c, raw, storage.postgres),
        remediation=parse_remediation(c, raw),
        retention_days=retention_days,
        source=source,
    )
    c.raise_if_any()
    return config


def _keepalive(c: Checker, raw: Mapping[str, Any]) -> timedelta:
    """``keepalive``; its old name ``keepalive_seconds`` (which took a duration all along) is
    read with a warning."""
    default = KEEPALIVE.defaults["keepalive"]
    if "keepalive_seconds" not in raw:
        return timedelta(seconds=c.duration(raw, "keepalive", "keepalive", default))
    if "keepalive" in raw:
        c.problem("keepalive_seconds is the old name of keepalive: give keepalive only")
    else:
        log.warning("config: keepalive_seconds is renamed keepalive (it takes a duration, "
                    "e.g. 5m); the old name still works")
    return timedelta(seconds=c.duration(raw, "keepalive_seconds", "keepalive_seconds", default))
