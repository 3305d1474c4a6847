"""The ``storage`` and ``ha`` sections: DuckDB (embedded default) or PostgreSQL (docs/ha.md).

    storage:
      path: data/gpu-health.duckdb           # DuckDB: one evaluator process
    # or
    storage:
      url: postgresql://gpuhealth@db:5432/gpuhealth   # several evaluators, one leader
      password_file: /run/secrets/pg-password         # or libpq's PGPASSWORD / PGPASSFILE
      connect_timeout: 10s
      statement_timeout: 5m
    ha:
      lease_ttl: 15s      # a leader that stops renewing is replaced within 2 x lease_ttl
      member_id: eval-a   # default: host name, port and a random suffix (unique per start)

``storage.url`` may also be a DuckDB path. A password inside the URL is refused: the URL is
printed in logs, the password file's content never is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from evaluator.config.source import secret_file
from evaluator.config.values import Checker

_STORAGE_KEYS: Final = ("path", "url", "password_file", "connect_timeout", "statement_timeout")
_HA_KEYS: Final = ("lease_ttl", "member_id")
_SCHEMES: Final = ("postgresql", "postgres")


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    url: str
    password: str | None = None  # from password_file
    connect_timeout: float = 10.0
    statement_timeout: float = 300.0

    def __repr__(self) -> str:  # never print the secret (a config dump in a log)
        return f"PostgresConfig(url={self.url!r})"


_PG: Final = PostgresConfig("")  # its defaults, the only place they are written


@dataclass(frozen=True, slots=True)
class HaConfig:
    lease_ttl: float = 15.0
    member_id: str | None = None


def parse_storage(c: Checker, raw: Mapping[str, Any], base: Path,
                  default: Path) -> tuple[Path, PostgresConfig | None]:
    """(DuckDB path, PostgreSQL settings or None) from the ``storage`` section."""
    section = c.section(raw, "storage", _STORAGE_KEYS)
    path_text = c.optional_string(section, "path", "storage.path")
    url = c.optional_string(section, "url", "storage.url")
    if url is None or urlsplit(url).scheme not in _SCHEMES:
        if section.keys() & {"password_file", "connect_timeout", "statement_timeout"}:
            c.problem("storage: password_file, connect_timeout and statement_timeout apply "
                      "to a postgresql:// url only")
        if url is not None and path_text is not None:
            c.problem("storage: give path or url, not both")
        text = url if url is not None else path_text
        return (default if text is None else base / text), None
    if path_text is not None:
        c.problem("storage: give path or url, not both")
    parts = urlsplit(url)
    if parts.password is not None:
        c.problem("storage.url: the password must not be in the URL (it would be logged); "
                  "use storage.password_file or libpq's PGPASSWORD")
    if not parts.hostname:
        c.problem("storage.url: needs a host, e.g. postgresql://user@db:5432/gpuhealth")
    return default, PostgresConfig(
        url=url,
        password=secret_file(c, section, "password_file", "storage.password_file", base),
        connect_timeout=c.duration(section, "connect_timeout", "storage.connect_timeout",
                                   _PG.connect_timeout),
        statement_timeout=c.duration(section, "statement_timeout", "storage.statement_timeout",
                                     _PG.statement_timeout),
    )


def parse_ha(c: Checker, raw: Mapping[str, Any], postgres: PostgresConfig | None) -> HaConfig:
    section = c.section(raw, "ha", _HA_KEYS)
    if section and postgres is None:
        c.problem("ha: several evaluators need a shared store (storage.url: postgresql://...)")
    ingest = raw.get("ingest")
    if postgres is not None and isinstance(ingest, Mapping) and \
            ingest.get("source") == "prometheus":
        # Each evaluator would read the whole fleet and write it twice; sharing a Prometheus
        # source between leader and followers is not built (docs/ha.md).
        c.problem("storage.url: a PostgreSQL store serves evaluators that scrape exporters "
                  "(ingest.source: scrape); with ingest.source: prometheus keep the DuckDB "
                  "store")
    ttl = c.duration(section, "lease_ttl", "ha.lease_ttl", HaConfig().lease_ttl)
    if not 3.0 <= ttl <= 600.0:
        c.problem(f"ha.lease_ttl: {ttl:g}s is outside 3s..10m")
    member = c.optional_string(section, "member_id", "ha.member_id")
    if member is not None and not (0 < len(member) <= 128 and member.isprintable()):
        c.problem("ha.member_id: 1 to 128 printable characters")
    return HaConfig(lease_ttl=ttl, member_id=member)
