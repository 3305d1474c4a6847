"""The evaluator's own page (``GET /``): the reference design's GPU health page.

Static files in ``static/`` (plain ES modules and one stylesheet; no build step, no CDN: many
fleets have no internet) read the existing API from the browser; this package only serves
them. See :mod:`gpu_health.evaluator.http.ui.routes` and docs/ui.md.
"""

from gpu_health.evaluator.http.ui.routes import add_ui_routes

__all__ = ["add_ui_routes"]
