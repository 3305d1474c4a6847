"""``GET /endpoints``: a short HTML page that says what this is and links every endpoint.

``GET /`` is the GPU health page (:mod:`gpu_health.evaluator.http.ui`), which links here. This page
lists the routes read from the router itself (so a new endpoint appears without anyone editing a
list), each with its access rule, linking those that take no path parameter; and names the
documents that explain them. It shows no node data (public, like ``/healthz``), escapes
everything it prints, and allows no script, style or frame
(``Content-Security-Policy: default-src 'none'``).
"""

from __future__ import annotations

import functools
import html
from typing import Final

from aiohttp import web

from gpu_health import __version__
from gpu_health.evaluator.http.access import RULES, Rule, allow, routes
from gpu_health.evaluator.http.api.openapi import document

DOCS: Final = (
    ("docs/api.md", "the read API, its parameters and answers"),
    ("docs/security.md", "what each route shows to whom; tokens and tenants"),
    ("docs/evaluator-ingest.md", "configuration, targets, /targets and the self-metrics"),
    ("docs/alerting.md", "GPU_FAULT_PREDICTED and the Prometheus alerting rules"),
    ("docs/dashboards.md", "the Grafana dashboards"),
)
PATH: Final = "/endpoints"
HEADERS: Final = {"Content-Security-Policy": "default-src 'none'",
                  "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


@functools.cache
def required_parameters() -> dict[str, list[str]]:
    """Path -> the query parameters it cannot answer without (from the OpenAPI document,
    which is fixed for the process: read once)."""
    doc = document()
    known = doc["components"]["parameters"]
    found: dict[str, list[str]] = {}
    for path, item in doc["paths"].items():
        refs = [r["$ref"].rsplit("/", 1)[1] for r in item.get("get", {}).get("parameters", ())]
        found[path] = [known[r]["name"] for r in refs if known[r].get("required")]
    return found


def _row(path: str, rule: Rule | None, required: list[str]) -> str:
    shown = html.escape(path)
    if "{" in path or required:  # a link would only earn a 400: say what it needs instead
        needs = f" needs {', '.join(required)}" if required else ""
        link = f"{shown}{html.escape(needs)}"
    else:
        link = f'<a href="{shown}">{shown}</a>'
    access = "public" if rule is Rule.PUBLIC else f"token with {rule}" if rule else "refused"
    return f"<li>{link} <small>({html.escape(access)})</small></li>"


def page(app: web.Application) -> str:
    rules = app[RULES]
    paths = sorted({path for method, path in routes(app)
                    if method == "GET" and path != PATH and not path.startswith("/ui/")})
    required = required_parameters()
    items = "\n".join(_row(p, rules.get(p), required.get(p, [])) for p in paths)
    docs = "\n".join(f"<li><code>{html.escape(d)}</code>: {html.escape(what)}</li>"
                     for d, what in DOCS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpu-health evaluator</title></head>
<body>
<h1>gpu-health evaluator {html.escape(__version__)}</h1>
<p>Stores GPU hardware-error counters, predicts memory faults with versioned rules, measures
its own precision and recall, and pushes GPU_FAULT_PREDICTED to Alertmanager. The thresholds
are initial empirical values awaiting calibration; a missing ratio means insufficient samples,
not 0%.</p>
<h2>Endpoints</h2>
<ul>
{items}
</ul>
<h2>Documentation (in the gpu-health source tree)</h2>
<ul>
{docs}
</ul>
</body></html>
"""


def add_index_route(app: web.Application) -> None:
    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page(request.app), content_type="text/html",
                            headers=HEADERS)

    app.router.add_get(PATH, index)
    allow(app, PATH, Rule.PUBLIC)
