"""The ``ingest`` section: where readings come from (docs/prometheus-source.md).

``source: scrape`` (the default: scrape the targets of ``static_configs`` / ``file_sd_configs``
/ ``http_sd_configs``) or ``source: prometheus`` with a ``prometheus`` block:

    ingest:
      source: prometheus
      prometheus:
        url: http://prometheus:9090        # Prometheus, Thanos Querier, Mimir, VictoriaMetrics
        metrics: dcgm                      # ours | dcgm | nvidia_smi
        selector: 'job="dcgm-exporter"'    # extra label matchers on every query
        labels: {node: Hostname, index: gpu, uuid: UUID, tenant: cluster}
        step: 60s                          # default: scrape.interval
        lag: 2m                            # how far behind now a cycle reads
        max_catchup: 1h                    # after an outage, older steps stay a gap
        history: 30d                       # on an empty store: import, then replay
        timeout: 30s
        bearer_token_file: /run/secrets/prom-token
        basic_auth: {username: gpu-health, password_file: /run/secrets/prom-password}
        ca_file: /etc/ssl/prom-ca.pem

Secrets are read from files once at start-up (a missing or empty file is a config problem) and
only ever go into the request header built by ``evaluator/outbound.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

SOURCES: Final = ("scrape", "prometheus")
METRIC_SET_NAMES: Final = ("ours", "dcgm", "nvidia_smi")
LABEL_KEYS: Final = ("node", "index", "uuid", "tenant")
INGEST: Final = Table("ingest", (
    Setting("source", "custom", "scrape"),  # one of SOURCES
    Setting("prometheus", "custom", None),  # the block below, with source: prometheus
))
MAX_POINTS: Final = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points"
PROMETHEUS: Final = Table("ingest.prometheus", (
    Setting("url", "custom", None),  # required: an http(s) URL
    Setting("metrics", "custom", "dcgm"),  # one of METRIC_SET_NAMES
    Setting("selector", "custom", ""),  # label matchers without braces
    Setting("labels", "custom", ()),  # (node|index|uuid|tenant, label name)
    Setting("step", "custom", None),  # None: scrape.interval
    Setting("lag", "duration", 120.0),
    Setting("max_catchup", "duration", 3600.0),
    Setting("history", "custom", None),  # None: no import on an empty store
    Setting("timeout", "duration", 30.0),
    Setting("max_points", "int", 10_000, 1, MAX_POINTS),
    Setting("max_series", "int", 1_000_000, 1, 100_000_000),
    Setting("max_response_bytes", "size", 512 * 1024 * 1024),
    Setting("bearer_token_file", "custom", None),  # read once into bearer_token
    Setting("basic_auth", "custom", None),  # username and password_file
    Setting("ca_file", "custom", None),
    Setting("insecure_skip_verify", "bool", False),
))
_P: Final = PROMETHEUS


@dataclass(frozen=True, slots=True)
class PrometheusSourceConfig:
    url: str
    metrics: str = _P.defaults["metrics"]
    selector: str = _P.defaults["selector"]
    labels: tuple[tuple[str, str], ...] = _P.defaults["labels"]
    step: float | None = _P.defaults["step"]
    lag: float = _P.defaults["lag"]
    max_catchup: float = _P.defaults["max_catchup"]
    history: float | None = _P.defaults["history"]
    timeout: float = _P.defaults["timeout"]
    max_points: int = _P.defaults["max_points"]
    max_series: int = _P.defaults["max_series"]
    max_response_bytes: int = _P.defaults["max_response_bytes"]
    bearer_token: str | None = None  # read from bearer_token_file
    basic_auth: tuple[str, str] | None = None  # (user, password from password_file)
    ca_file: Path | None = _P.defaults["ca_file"]
    insecure_skip_verify: bool = _P.defaults["insecure_skip_verify"]

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    def __repr__(self) -> str:  # never print the secrets (a config dump in a log)
        return (f"PrometheusSourceConfig(url={self.url!r}, metrics={self.metrics!r}, "
                f"selector={self.selector!r})")


@dataclass(frozen=True, slots=True)
class IngestConfig:
    source: str = INGEST.defaults["source"]
    prometheus: PrometheusSourceConfig | None = INGEST.defaults["prometheus"]


def parse_ingest(c: Checker, raw: Mapping[str, Any], base: Path) -> IngestConfig:
    """The ``ingest`` section; every problem is recorded, defaults stand in for bad values."""
    section = c.section(raw, "ingest", INGEST.keys)
    source = c.string(section, "source", "ingest.source", INGEST.defaults["source"])
    if source not in SOURCES:
        c.problem(f"ingest.source must be one of {', '.join(SOURCES)}, got {source!r}")
        return IngestConfig()
    block = c.section(section, "prometheus", PROMETHEUS.keys, where="ingest.prometheus")
    if source == "scrape":
        if block:
            c.problem("ingest.prometheus is set but ingest.source is 'scrape': set "
                      "ingest.source: prometheus to use it")
        return IngestConfig()
    if not block:
        c.problem("ingest.source is 'prometheus' but ingest.prometheus (with url) is missing")
        return IngestConfig()
    for key in ("static_configs", "file_sd_configs", "http_sd_configs", "dns_sd_configs"):
        if raw.get(key):
            c.problem(f"{key} is set but ingest.source is 'prometheus': the evaluator reads the "
                      "cards from Prometheus and scrapes no target; remove one of the two")
    return IngestConfig("prometheus", _prometheus(c, block, base))


def _prometheus(c: Checker, raw: Mapping[str, Any], base: Path) -> PrometheusSourceConfig:
    w = "ingest.prometheus"
    metrics = c.string(raw, "metrics", f"{w}.metrics", _P.defaults["metrics"])
    if metrics not in METRIC_SET_NAMES:
        c.problem(f"{w}.metrics must be one of {', '.join(METRIC_SET_NAMES)}, got {metrics!r}")
    history = c.duration(raw, "history", f"{w}.history", 0.0) if "history" in raw else None
    return PrometheusSourceConfig(
        url=c.url(raw, "url", f"{w}.url"),
        metrics=metrics,
        selector=_selector(c, raw),
        labels=_labels(c, raw),
        step=c.duration(raw, "step", f"{w}.step", 60.0) if "step" in raw else None,
        history=history or None,
        bearer_token=secret_file(c, raw, "bearer_token_file", f"{w}.bearer_token_file", base),
        basic_auth=_basic_auth(c, raw, base),
        ca_file=_file(c, raw, "ca_file", f"{w}.ca_file", base),
        **PROMETHEUS.read(c, raw),
    )


def _selector(c: Checker, raw: Mapping[str, Any]) -> str:
    text = (c.optional_string(raw, "selector", "ingest.prometheus.selector") or "").strip()
    if text.startswith("{") or text.endswith("}"):
        c.problem("ingest.prometheus.selector: write the matchers without braces, e.g. "
                  "job=\"dcgm\",cluster=\"a\"")
    return text.strip("{}")


def _labels(c: Checker, raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    labels = c.section(raw, "labels", LABEL_KEYS, where="ingest.prometheus.labels")
    out = []
    for key in LABEL_KEYS:
        name = c.optional_string(labels, key, f"ingest.prometheus.labels.{key}")
        if name is not None:
            out.append((key, name))
    return tuple(out)


def _file(c: Checker, raw: Mapping[str, Any], key: str, where: str, base: Path) -> Path | None:
    text = c.optional_string(raw, key, where)
    if text is None:
        return None
    path = base / text
    if not path.is_file():
        c.problem(f"{where}: no file {path}")
    return path


def secret_file(c: Checker, raw: Mapping[str, Any], key: str, where: str,
                base: Path) -> str | None:
    """The stripped content of the file named by ``raw[key]`` (a problem when unreadable)."""
    path = _file(c, raw, key, where, base)
    if path is None or not path.is_file():
        return None
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        c.problem(f"{where}: cannot read {path}: {type(exc).__name__}")
        return None
    if not value:
        c.problem(f"{where}: {path} is empty")
    return value or None


def _basic_auth(c: Checker, raw: Mapping[str, Any], base: Path) -> tuple[str, str] | None:
    where = "ingest.prometheus.basic_auth"
    section = c.section(raw, "basic_auth", ("username", "password_file"), where=where)
    if not section:
        return None
    if "bearer_token_file" in raw:
        c.problem("ingest.prometheus: set bearer_token_file or basic_auth, not both")
    user = c.string(section, "username", f"{where}.username", "")
    password = secret_file(c, section, "password_file", f"{where}.password_file", base)
    if not user or password is None:
        c.problem(f"{where} needs username and password_file")
        return None
    return user, password
