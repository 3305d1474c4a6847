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

from evaluator.config.values import Checker

SOURCES: Final = ("scrape", "prometheus")
METRIC_SET_NAMES: Final = ("ours", "dcgm", "nvidia_smi")
LABEL_KEYS: Final = ("node", "index", "uuid", "tenant")
_KEYS: Final = ("url", "metrics", "selector", "labels", "step", "lag", "max_catchup", "history",
                "timeout", "max_points", "max_series", "max_response_bytes",
                "bearer_token_file", "basic_auth", "ca_file", "insecure_skip_verify")
MAX_POINTS: Final = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points"


@dataclass(frozen=True, slots=True)
class PrometheusSourceConfig:
    url: str
    metrics: str = "dcgm"
    selector: str = ""
    labels: tuple[tuple[str, str], ...] = ()  # (node|index|uuid|tenant, label name)
    step: float | None = None  # None: scrape.interval
    lag: float = 120.0
    max_catchup: float = 3600.0
    history: float | None = None
    timeout: float = 30.0
    max_points: int = 10_000
    max_series: int = 1_000_000
    max_response_bytes: int = 512 * 1024 * 1024
    bearer_token: str | None = None  # read from bearer_token_file
    basic_auth: tuple[str, str] | None = None  # (user, password from password_file)
    ca_file: Path | None = None
    insecure_skip_verify: bool = False

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    def __repr__(self) -> str:  # never print the secrets (a config dump in a log)
        return (f"PrometheusSourceConfig(url={self.url!r}, metrics={self.metrics!r}, "
                f"selector={self.selector!r})")


@dataclass(frozen=True, slots=True)
class IngestConfig:
    source: str = "scrape"
    prometheus: PrometheusSourceConfig | None = None


def parse_ingest(c: Checker, raw: Mapping[str, Any], base: Path) -> IngestConfig:
    """The ``ingest`` section; every problem is recorded, defaults stand in for bad values."""
    section = c.section(raw, "ingest", ("source", "prometheus"))
    source = c.string(section, "source", "ingest.source", "scrape")
    if source not in SOURCES:
        c.problem(f"ingest.source must be one of {', '.join(SOURCES)}, got {source!r}")
        return IngestConfig()
    block = c.section(section, "prometheus", _KEYS, where="ingest.prometheus")
    if source == "scrape":
        if block:
            c.problem("ingest.prometheus is set but ingest.source is 'scrape': set "
                      "ingest.source: prometheus to use it")
        return IngestConfig()
    if not block:
        c.problem("ingest.source is 'prometheus' but ingest.prometheus (with url) is missing")
        return IngestConfig()
    for key in ("static_configs", "file_sd_configs", "http_sd_configs"):
        if raw.get(key):
            c.problem(f"{key} is set but ingest.source is 'prometheus': the evaluator reads the "
                      "cards from Prometheus and scrapes no target; remove one of the two")
    return IngestConfig("prometheus", _prometheus(c, block, base))


def _prometheus(c: Checker, raw: Mapping[str, Any], base: Path) -> PrometheusSourceConfig:
    w = "ingest.prometheus"
    metrics = c.string(raw, "metrics", f"{w}.metrics", "dcgm")
    if metrics not in METRIC_SET_NAMES:
        c.problem(f"{w}.metrics must be one of {', '.join(METRIC_SET_NAMES)}, got {metrics!r}")
    d = PrometheusSourceConfig(url="")
    history = c.duration(raw, "history", f"{w}.history", 0.0) if "history" in raw else None
    return PrometheusSourceConfig(
        url=c.url(raw, "url", f"{w}.url"),
        metrics=metrics,
        selector=_selector(c, raw),
        labels=_labels(c, raw),
        step=c.duration(raw, "step", f"{w}.step", 60.0) if "step" in raw else None,
        lag=c.duration(raw, "lag", f"{w}.lag", d.lag),
        max_catchup=c.duration(raw, "max_catchup", f"{w}.max_catchup", d.max_catchup),
        history=history or None,
        timeout=c.duration(raw, "timeout", f"{w}.timeout", d.timeout),
        max_points=c.integer(raw, "max_points", f"{w}.max_points", d.max_points, 1, MAX_POINTS),
        max_series=c.integer(raw, "max_series", f"{w}.max_series", d.max_series, 1,
                             100_000_000),
        max_response_bytes=c.size(raw, "max_response_bytes", f"{w}.max_response_bytes",
                                  d.max_response_bytes),
        bearer_token=secret_file(c, raw, "bearer_token_file", f"{w}.bearer_token_file", base),
        basic_auth=_basic_auth(c, raw, base),
        ca_file=_file(c, raw, "ca_file", f"{w}.ca_file", base),
        insecure_skip_verify=c.boolean(raw, "insecure_skip_verify",
                                       f"{w}.insecure_skip_verify", False),
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
