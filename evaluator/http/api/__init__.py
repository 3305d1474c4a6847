"""The evaluator's read API (/api/v1/gpu-health/...) and its alert action: auth, parameter
validation, handlers and the OpenAPI document. Mount it with
``routes.add_api_routes(app, context.ApiContext(...))``; see docs/api.md."""
