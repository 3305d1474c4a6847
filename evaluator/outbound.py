"""Outbound HTTP: the one module that creates aiohttp client sessions.

Every client of the evaluator gets its session from :func:`client_session`: the scraper
(exporters), http_sd discovery, the Alertmanager pusher, the Prometheus source (live and
first-start history) and the backtest's Prometheus reader.
So the User-Agent, timeouts, auth headers and TLS options are chosen in one place, and a new
client cannot forget one of them.

Timeouts: ``total`` bounds each request of the session (None: the caller bounds every request
itself with ``asyncio.timeout``, as the scraper does with its per-target budget);
``connect`` always bounds establishing a connection, so a black-holed address fails fast instead
of holding a slot for the whole request budget.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiohttp

from gpu_health import __version__

USER_AGENT: Final = f"gpu-health-evaluator/{__version__}"
DEFAULT_CONNECT_TIMEOUT_S: Final = 10.0
DEFAULT_MAX_CONNECTIONS: Final = 100  # aiohttp's own default


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """What one client needs from its session; every field has the safe default."""

    total_timeout: float | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token: str | None = None  # sent as ``Authorization: Bearer ...``; never logged
    basic_auth: tuple[str, str] | None = None  # (user, password): HTTP basic; never logged
    ca_file: Path | None = None  # verify servers against this CA bundle instead of the system's
    insecure_skip_verify: bool = False


def session_headers(options: ClientOptions) -> dict[str, str]:
    """The default headers of a session built from ``options`` (User-Agent first)."""
    headers = {"User-Agent": USER_AGENT, **options.headers}
    if options.bearer_token is not None:
        headers["Authorization"] = f"Bearer {options.bearer_token}"
    elif options.basic_auth is not None:
        pair = ":".join(options.basic_auth).encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    return headers


def _ssl(options: ClientOptions) -> ssl.SSLContext | bool:
    if options.insecure_skip_verify:
        return False
    if options.ca_file is not None:
        return ssl.create_default_context(cafile=str(options.ca_file))
    return True


def client_session(options: ClientOptions = ClientOptions()) -> aiohttp.ClientSession:
    """A new session (call it with the event loop running; the caller closes it)."""
    connector = aiohttp.TCPConnector(limit=options.max_connections, limit_per_host=0,
                                     ssl=_ssl(options))
    timeout = aiohttp.ClientTimeout(total=options.total_timeout,
                                    sock_connect=options.connect_timeout)
    return aiohttp.ClientSession(connector=connector, headers=session_headers(options),
                                 timeout=timeout, auto_decompress=True)
