"""A complete aiohttp request as a WSGI call (the exporter's application is WSGI).

Only what a scrape needs: method, path, query string, headers, an empty body. The response
is collected whole (a /metrics page is small), so the event loop never waits on the WSGI app.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web


def environ_for(request: web.Request, errors: io.StringIO) -> dict[str, Any]:
    host, port = (request.url.host or "localhost"), (request.url.port or 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": request.path,
        "QUERY_STRING": request.query_string,
        "SERVER_NAME": host,
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": f"HTTP/{request.version.major}.{request.version.minor}",
        "REMOTE_ADDR": request.remote or "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": request.scheme,
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": errors,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ["HTTP_" + key] = value
    return environ


def call_wsgi(app: Callable[..., Iterable[bytes]],
              environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status code, headers, body) of one WSGI call."""
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, headers)]
        return lambda _data: None

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the WSGI application did not start a response")
    status, headers = started[0]
    return int(status.split(" ", 1)[0]), headers, body

