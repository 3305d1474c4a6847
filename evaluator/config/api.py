"""The ``api`` section: the bearer tokens file (docs/security.md) and the load limits
(docs/api.md, "Busy"): how many API requests use the store at once, how many may wait, and for
how long; and how many failed authentications a client may make. Declared in :data:`API`;
every problem is recorded in the Checker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

API: Final = Table("api", (
    Setting("tokens_file", "custom", None),  # relative to the config file
    # One: the store's pool has two threads, so one always stays free for the ingest cycle and
    # the worker (bench/api_load.py: with 200 clients the cycle took 0.85x its time alone at 1,
    # 2.15x at 2, 6-14x without a limit).
    Setting("max_concurrency", "int", 1, 1, 64),
    Setting("max_queue", "int", 32, 0, 100_000),
    Setting("queue_timeout", "duration", 5.0),
    Setting("timeout", "duration", 30.0),  # one request's store work; then 503 (a frozen db)
    # Failed authentications per client address within the window; then 429 (1,000
    # wrong tokens at 1,476/s). A person mistyping a token fails a few times, not 20 in 10 s.
    Setting("auth_failure_limit", "int", 20, 1, 100_000),
    Setting("auth_failure_window", "duration", 10.0),
))


@dataclass(frozen=True, slots=True)
class ApiConfig:
    tokens_file: Path | None = API.defaults["tokens_file"]  # None: no tokens (docs/security.md)
    max_concurrency: int = API.defaults["max_concurrency"]
    max_queue: int = API.defaults["max_queue"]
    queue_timeout: float = API.defaults["queue_timeout"]
    timeout: float = API.defaults["timeout"]
    auth_failure_limit: int = API.defaults["auth_failure_limit"]
    auth_failure_window: float = API.defaults["auth_failure_window"]


def parse_api(c: Checker, raw: Mapping[str, Any], base: Path) -> ApiConfig:
    section = c.section(raw, "api", API.keys)
    tokens = c.optional_string(section, "tokens_file", "api.tokens_file")
    return ApiConfig(None if tokens is None else base / tokens, **API.read(c, section))
