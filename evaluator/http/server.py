"""Serving the evaluator's web application: bind first, then start, then wait for a signal.

The listening socket is bound (:func:`bind`) *before* the process is built, so a taken port
fails it at once with one clear line (``ListenError``, exit 1) instead of opening the store,
starting the loops, ticking the worker and then dying in a traceback. Connections are served by
:class:`~gpu_health.evaluator.http.errors.JsonErrorRunner` (unparseable requests get JSON errors
too).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

from aiohttp import web

from gpu_health.errors import ListenError
from gpu_health.evaluator.http.errors import JsonErrorRunner
from gpu_health.webguard import WebGuard

log = logging.getLogger(__name__)

HANDSHAKE_S: Final = 15.0  # a TLS handshake not finished by then is dropped (like a slow request)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (empty host: every interface, IPv6 and IPv4)."""
    try:
        if not host:
            if socket.has_dualstack_ipv6():
                return socket.create_server(("::", port), family=socket.AF_INET6,
                                            dualstack_ipv6=True)
            return socket.create_server(("", port))
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        return socket.create_server(address[:2], family=family)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host or '*'}:{port}: "
                          f"{exc.strerror or exc}") from exc


@asynccontextmanager
async def listening(app: web.Application, sock: socket.socket,
                    guard: WebGuard | None = None) -> AsyncIterator[int]:
    """Serve ``app`` on the bound ``sock`` while the block runs (then close it); yields the
    port. With ``guard`` (``--web.config.file``) the listener speaks TLS when the file says so
    and brings its TLS settings up to date for every new connection."""
    runner = JsonErrorRunner(app, access_log=None, handle_signals=False)
    server: asyncio.Server | None = None
    try:
        await runner.setup()
        handler = runner.server
        assert handler is not None

        def protocol() -> asyncio.BaseProtocol:
            if guard is not None:
                guard.admit()
            return handler()

        tls = None if guard is None else guard.context
        server = await asyncio.get_running_loop().create_server(
            protocol, sock=sock, ssl=tls, ssl_handshake_timeout=HANDSHAKE_S if tls else None)
        yield int(sock.getsockname()[1])
    finally:
        if server is not None:
            server.close()
        await runner.cleanup()
        sock.close()


async def _until_signal(app: web.Application, sock: socket.socket, guard: WebGuard | None,
                        hangup: Callable[[], object]) -> None:
    async with listening(app, sock, guard):
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        # SIGHUP reloads (the tokens file) as Prometheus's own servers do; its default action
        # would end the process.
        loop.add_signal_handler(signal.SIGHUP, hangup)
        await stop.wait()


def _nothing_to_reload() -> None:
    log.info("SIGHUP: nothing to reload (no tokens file); the web config is re-read per "
             "connection anyway")


def serve(app: web.Application, sock: socket.socket, guard: WebGuard | None = None,
          hangup: Callable[[], object] = _nothing_to_reload) -> None:
    """Run ``app`` on ``sock`` until SIGINT or SIGTERM, then shut it down cleanly; SIGHUP
    calls ``hangup``."""
    asyncio.run(_until_signal(app, sock, guard, hangup))
