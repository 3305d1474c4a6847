"""Serves the page and its static files: public routes that carry no node data.

``GET /`` (and ``/ui/``) answer ``index.html`` with ``no-cache``; its scripts and stylesheet live
under ``/ui/<digest>/<name>``, where the digest is a hash of every static file, so they are cached
for a year (``immutable``) and an upgraded evaluator is never served stale scripts. Only the files
shipped in ``static/`` exist (read once at start, so a request never touches the disk); any other
name or digest is a 404. Every answer forbids sniffing, framing, inline script and any host but
this one (``Content-Security-Policy``): the node data the scripts fetch goes through the API, with
its tokens and tenants.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

from aiohttp import web

from gpu_health.errors import ApiError
from gpu_health.evaluator.http.access import Rule, allow

CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
              "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY: Final = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
TYPES: Final = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
ASSETS_PLACEHOLDER: Final = "__ASSETS__"
IMMUTABLE: Final = "public, max-age=31536000, immutable"


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@dataclass(frozen=True, slots=True)
class Bundle:
    """The page and its assets, as shipped in the package."""

    digest: str
    page: bytes
    assets: dict[str, Asset]


def load_bundle() -> Bundle:
    """Read every static file once; the digest covers them all (the page included)."""
    folder = resources.files(__package__).joinpath("static")
    files = {f.name: f.read_bytes() for f in folder.iterdir()
             if f.is_file() and (f.name == "index.html" or Path(f.name).suffix in TYPES)}
    digest = hashlib.sha256(b"".join(
        name.encode() + b"\0" + body for name, body in sorted(files.items()))).hexdigest()[:16]
    assets = {name: Asset(body, TYPES[Path(name).suffix],
                          '"' + hashlib.sha256(body).hexdigest()[:16] + '"')
              for name, body in files.items() if name != "index.html"}
    page = files["index.html"].replace(ASSETS_PLACEHOLDER.encode(), f"/ui/{digest}".encode())
    return Bundle(digest, page, assets)


def add_ui_routes(app: web.Application) -> None:
    bundle = load_bundle()

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=bundle.page, content_type="text/html", charset="utf-8",
                            headers={**SECURITY, "Cache-Control": "no-cache"})

    async def asset(request: web.Request) -> web.Response:
        found = bundle.assets.get(request.match_info["name"])
        if request.match_info["digest"] != bundle.digest or found is None:
            raise ApiError(404, "not found")
        headers = {**SECURITY, "Cache-Control": IMMUTABLE, "ETag": found.etag}
        if request.headers.get("If-None-Match") == found.etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=found.body, content_type=found.content_type,
                            charset="utf-8", headers=headers)

    for path in ("/", "/ui/"):
        app.router.add_get(path, page)
        allow(app, path, Rule.PUBLIC)
    app.router.add_get("/ui/{digest}/{name}", asset)
    allow(app, "/ui/{digest}/{name}", Rule.PUBLIC)
