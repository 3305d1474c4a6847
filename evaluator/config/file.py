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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import yaml

from gpu_health.contract import SOURCE_REAL
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.alerting import AlertingConfig, parse_alerting, parse_external_url
from gpu_health.evaluator.config.api import API, ApiLimits, parse_api_limits
from gpu_health.evaluator.config.discovery import (
    DnsSDConfig,
    FileSDConfig,
    HttpSDConfig,
    parse_dns_sd,
    parse_file_sd,
    parse_http_sd,
)
from gpu_health.evaluator.config.remediation import SlurmRemediation, parse_remediation
from gpu_health.evaluator.config.rules import DEFAULT_VERSION, RULES_DIR
from gpu_health.evaluator.config.scrape import ScrapeConfig, parse_scrape
from gpu_health.evaluator.config.source import IngestConfig, parse_ingest
from gpu_health.evaluator.config.storage import (
    STORAGE,
    HaConfig,
    PostgresConfig,
    parse_ha,
    parse_storage,
)
from gpu_health.evaluator.config.table import Setting, Table
from gpu_health.evaluator.config.targets import TargetGroup, parse_groups
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.config.writes import (
    DEFAULT_KEEPALIVE,
    KEEPALIVE,
    DedupConfig,
    parse_dedup,
)
from gpu_health.yamlload import load_yaml

log = logging.getLogger(__name__)

DEFAULT_STORAGE: Final = Path("data/gpu-health.duckdb")
DEFAULT_LISTEN: Final = "127.0.0.1:10347"
# Shadow versions run live beside the active one, each a whole prediction pass per tick (50 took
# a 1,600-card tick from 0.63 s to 19.8 s): a few are for comparing, not for a search.
MAX_SHADOW: Final = 8
DEFAULT_TARGET: Final = "127.0.0.1:10346"
DEFAULT_RETENTION_DAYS: Final = 180
MAX_RETENTION_DAYS: Final = 36_500
RETENTION_ENV: Final = "GPU_HEALTH_RETENTION_DAYS"
_VERSION_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_TOP_KEYS: Final = (
    "scrape", "static_configs", "file_sd_configs", "http_sd_configs", "dns_sd_configs",
    "storage", "web", "dedup",
    *KEEPALIVE.keys, "alerting", "rules", "api", "ingest", "ha", "remediation",
)
WEB: Final = Table("web", (
    Setting("listen_address", "custom", DEFAULT_LISTEN),  # host:port, [v6]:port or :port
    Setting("external_url", "custom", None),  # None: http://<listen address>
))
RULES: Final = Table("rules", (
    Setting("dir", "custom", RULES_DIR),  # relative to the config file
    Setting("active", "custom", DEFAULT_VERSION),  # a rule version name
    Setting("shadow", "custom", ()),  # run beside the active one, never alerted
))


def split_listen(text: str) -> tuple[str, int] | None:
    """``host:port``, ``[v6]:port`` or ``:port`` (all interfaces); port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else (host or "0.0.0.0")
    if (
        not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535
        or (":" in host and not bracketed)
    ):
        return None
    return host, int(port)


_LISTEN_HOST, _LISTEN_PORT = split_listen(DEFAULT_LISTEN) or ("", 0)  # the default parses


@dataclass(frozen=True, slots=True)
class RulesConfig:
    dir: Path = RULES.defaults["dir"]
    active: str = RULES.defaults["active"]
    shadow: tuple[Path, ...] = RULES.defaults["shadow"]  # docs/calibration.md


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the evaluator reads at start-up (frozen; a new file means a restart)."""

    scrape: ScrapeConfig = field(default_factory=ScrapeConfig)
    static_configs: tuple[TargetGroup, ...] = ()
    file_sd_configs: tuple[FileSDConfig, ...] = ()
    http_sd_configs: tuple[HttpSDConfig, ...] = ()
    dns_sd_configs: tuple[DnsSDConfig, ...] = ()
    storage_path: Path = DEFAULT_STORAGE
    storage_memory_limit: int | None = STORAGE.defaults["memory_limit"]  # bytes; DuckDB only
    listen_host: str = _LISTEN_HOST
    listen_port: int = _LISTEN_PORT
    dedup: DedupConfig = field(default_factory=DedupConfig)
    keepalive: timedelta = DEFAULT_KEEPALIVE
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    remediation: SlurmRemediation = field(default_factory=SlurmRemediation)
    web_external_url: str | None = WEB.defaults["external_url"]  # None: http://<listen address>
    rules: RulesConfig = field(default_factory=RulesConfig)
    api_tokens_file: Path | None = None
    api_limits: ApiLimits = field(default_factory=ApiLimits)
    retention_days: int = DEFAULT_RETENTION_DAYS
    source: Path | None = None  # the file this came from (None: built-in defaults)
    # Source label of scraped rows. Not a config-file key: only the demo sets 'simulated', when
    # it scrapes an exporter driven by the fake vendor tools (fake readings are not real data).
    ingest_source: str = SOURCE_REAL
    ingest: IngestConfig = field(default_factory=IngestConfig)  # scrape, or a Prometheus source
    postgres: PostgresConfig | None = None  # storage.url: postgresql://... (else DuckDB)
    ha: HaConfig = field(default_factory=HaConfig)

    @property
    def listen_address(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"

    @property
    def alertmanagers(self) -> tuple[str, ...]:
        return self.alerting.alertmanagers

    @property
    def external_url(self) -> str:
        """Base URL of this evaluator as others reach it (alert links point here)."""
        return self.web_external_url or f"http://{self.listen_address}"


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
                          + ", ".join(_TOP_KEYS))
    c = Checker()
    c.unknown_keys(raw, _TOP_KEYS, "")
    scrape = parse_scrape(c, raw.get("scrape"))
    static, problems = parse_groups(raw.get("static_configs"), "static_configs")
    for problem in problems:
        c.problem(problem)
    web_raw = c.section(raw, "web", WEB.keys)
    host, port = _listen(c, web_raw)
    dedup = parse_dedup(c, raw)
    storage_path, memory_limit, postgres = parse_storage(c, raw, base, DEFAULT_STORAGE)
    rules, tokens = _consumers(c, raw, base)
    config = Config(
        scrape=scrape,
        static_configs=tuple(static),
        file_sd_configs=parse_file_sd(c, raw.get("file_sd_configs"), base),
        http_sd_configs=parse_http_sd(c, raw.get("http_sd_configs")),
        dns_sd_configs=parse_dns_sd(c, raw.get("dns_sd_configs")),
        storage_path=storage_path,
        storage_memory_limit=memory_limit,
        postgres=postgres,
        ha=parse_ha(c, raw, postgres),
        listen_host=host,
        listen_port=port,
        dedup=dedup,
        keepalive=_keepalive(c, raw),
        alerting=parse_alerting(c, raw),
        web_external_url=parse_external_url(c, web_raw),
        rules=rules,
        api_tokens_file=tokens,
        api_limits=parse_api_limits(c, api if isinstance(api := raw.get("api"), Mapping)
                                    else {}),  # its keys are checked with api.tokens_file
        retention_days=retention_days,
        source=source,
        ingest=parse_ingest(c, raw, base),
        remediation=parse_remediation(c, raw),
    )
    c.raise_if_any()
    return config


def _consumers(c: Checker, raw: Mapping[str, Any], base: Path) -> tuple[RulesConfig, Path | None]:
    """Sections read by other parts (rules engine, API): basic types only here."""
    rules_raw = c.section(raw, "rules", RULES.keys)
    api_raw = c.section(raw, "api", API.keys)
    active = c.string(rules_raw, "active", "rules.active", RULES.defaults["active"])
    if _VERSION_RE.fullmatch(active) is None:
        c.problem(f"rules.active: {active!r} is not a rule version name")
    tokens = c.optional_string(api_raw, "tokens_file", "api.tokens_file")
    rules_text = c.optional_string(rules_raw, "dir", "rules.dir")
    rules_dir = RULES.defaults["dir"] if rules_text is None else base / rules_text
    shadow = tuple(base / s for s in c.string_list(rules_raw, "shadow", "rules.shadow"))
    if len(shadow) > MAX_SHADOW:
        c.problem(f"rules.shadow: {len(shadow)} versions; at most {MAX_SHADOW} (each is a "
                  "whole extra prediction pass on every tick)")
    return RulesConfig(rules_dir, active, shadow), None if tokens is None else base / tokens


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


def _listen(c: Checker, raw: Mapping[str, Any]) -> tuple[str, int]:
    text = c.string(raw, "listen_address", "web.listen_address", DEFAULT_LISTEN)
    address = split_listen(text)
    if address is None:
        c.problem(f"web.listen_address {text!r} must be 'host:port' (port 0-65535)")
        return _LISTEN_HOST, _LISTEN_PORT
    return address
