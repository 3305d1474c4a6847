"""The evaluator's read API (/api/v1/gpu-health/...): auth, parameter validation, handlers and
the OpenAPI document. Mount it with ``add_api_routes(app, ApiContext(...))``; see docs/api.md."""

from evaluator.http.api.context import ApiContext
from evaluator.http.api.routes import add_api_routes

__all__ = ["ApiContext", "add_api_routes"]
