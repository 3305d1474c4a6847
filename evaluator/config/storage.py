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

from gpu_health.evaluator.config.source import secret_file
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

DEFAULT_STORAGE: Final = Path("data/gpu-health.duckdb")

STORAGE: Final = Table("storage", (
    Setting("path", "custom", DEFAULT_STORAGE),  # DuckDB: one evaluator process
    Setting("url", "custom", None),  # postgresql://... (or a DuckDB path)
    Setting("password_file", "custom", None),  # never the URL: it is logged
    Setting("connect_timeout", "duration", 10.0),
    Setting("statement_timeout", "duration", 300.0),
    # DuckDB's memory_limit (it spills the rest to <file>.tmp); None: DuckDB's own, 80% of RAM
    Setting("memory_limit", "size", None),
))
_PG_ONLY: Final = ("password_file", "connect_timeout", "statement_timeout")
MIN_MEMORY: Final = 64 * 2**20
HA: Final = Table("ha", (
    Setting("lease_ttl", "duration", 15.0),  # 3s..10m
    Setting("member_id", "optional_string", None),  # None: host, port and a random suffix
))
_SCHEMES: Final = ("postgresql", "postgres")


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    url: str
    password: str | None = None  # from password_file
    connect_timeout: float = STORAGE.defaults["connect_timeout"]
    statement_timeout: float = STORAGE.defaults["statement_timeout"]

    def __repr__(self) -> str:  # never print the secret (a config dump in a log)
        return f"PostgresConfig(url={self.url!r})"


@dataclass(frozen=True, slots=True)
class HaConfig:
    lease_ttl: float = HA.defaults["lease_ttl"]
    member_id: str | None = HA.defaults["member_id"]


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """The ``storage`` section: a DuckDB file (``path``, ``memory_limit``: bytes, DuckDB only)
    or, with a ``postgresql://`` url, the PostgreSQL settings (``postgres``)."""

    path: Path = STORAGE.defaults["path"]
    memory_limit: int | None = STORAGE.defaults["memory_limit"]
    postgres: PostgresConfig | None = None


def parse_storage(c: Checker, raw: Mapping[str, Any], base: Path) -> StorageConfig:
    """The ``storage`` section, every problem recorded in ``c``."""
    section = c.section(raw, "storage", STORAGE.keys)
    path_text = c.optional_string(section, "path", "storage.path")
    url = c.optional_string(section, "url", "storage.url")
    if url is None or urlsplit(url).scheme not in _SCHEMES:
        if section.keys() & set(_PG_ONLY):
            c.problem("storage: password_file, connect_timeout and statement_timeout apply "
                      "to a postgresql:// url only")
        if url is not None and path_text is not None:
            c.problem("storage: give path or url, not both")
        text = url if url is not None else path_text
        return StorageConfig(STORAGE.defaults["path"] if text is None else base / text,
                             _memory(c, section))
    if path_text is not None:
        c.problem("storage: give path or url, not both")
    if "memory_limit" in section:
        c.problem("storage.memory_limit applies to a DuckDB file only (PostgreSQL: the "
                  "server's own settings)")
    parts = urlsplit(url)
    if parts.password is not None:
        c.problem("storage.url: the password must not be in the URL (it would be logged); "
                  "use storage.password_file or libpq's PGPASSWORD")
    if not parts.hostname:
        c.problem("storage.url: needs a host, e.g. postgresql://user@db:5432/gpuhealth")
    return StorageConfig(postgres=PostgresConfig(
        url=url,
        password=secret_file(c, section, "password_file", "storage.password_file", base),
        **STORAGE.read(c, section, skip=("memory_limit",)),
    ))


def _memory(c: Checker, section: Mapping[str, Any]) -> int | None:
    limit: int | None = STORAGE.read(c, section, skip=_PG_ONLY)["memory_limit"]
    if limit is not None and limit < MIN_MEMORY:
        c.problem(f"storage.memory_limit must be at least 64MiB, got {section['memory_limit']!r}")
        return None
    return limit


def parse_ha(c: Checker, raw: Mapping[str, Any], postgres: PostgresConfig | None) -> HaConfig:
    section = c.section(raw, "ha", HA.keys)
    if section and postgres is None:
        c.problem("ha: several evaluators need a shared store (storage.url: postgresql://...)")
    ingest = raw.get("ingest")
    block = ingest.get("prometheus") if isinstance(ingest, Mapping) else None
    if postgres is not None and isinstance(block, Mapping) and block.get("history"):
        # The first-start import assumes one process owns the empty store; with several, a
        # member starting while the leader imports would undo its rows (docs/ha.md).
        c.problem("ingest.prometheus.history: the first-start history import is not offered "
                  "with a PostgreSQL store (several evaluators): remove it; the leader reads "
                  "Prometheus from the newest stored step on")
    values = HA.read(c, section)
    if not 3.0 <= values["lease_ttl"] <= 600.0:
        c.problem(f"ha.lease_ttl: {values['lease_ttl']:g}s is outside 3s..10m")
    member = values["member_id"]
    if member is not None and not (0 < len(member) <= 128 and member.isprintable()):
        c.problem("ha.member_id: 1 to 128 printable characters")
    return HaConfig(**values)
