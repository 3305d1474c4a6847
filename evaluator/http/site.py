"""Every route of the evaluator's web server, added in one place.

Each area keeps its handlers and the access rule of each path beside them (``ops``: the
operator endpoints, ``index``: the root page, ``ui``: the pages and their assets, ``api``: the
JSON API under ``/api/v1``); :func:`add_routes` is the one call that puts them on the server,
made once by the composition root. A path added anywhere else would have to be found by reading
the whole package; a test keeps the ``add_*_route(s)`` calls here.
"""

from __future__ import annotations

from aiohttp import web

from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.routes import add_api_routes
from gpu_health.evaluator.http.index import add_index_route
from gpu_health.evaluator.http.ops import NodeViews, OpsHost, add_node_routes, add_ops_routes
from gpu_health.evaluator.http.ui import add_ui_routes


def add_routes(app: web.Application, host: OpsHost, api: ApiContext, nodes: NodeViews) -> None:
    """The operator endpoints (``/metrics``, ``/healthz``, ``/readyz``), the node views
    (``/targets``, the authenticated metrics path), the root page, the UI and the API."""
    add_ops_routes(app, host)
    add_node_routes(app, host, nodes)
    add_index_route(app)
    add_ui_routes(app)
    add_api_routes(app, api)
