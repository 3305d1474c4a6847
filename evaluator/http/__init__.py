"""Inbound HTTP: the server (``server``), the one error path (``errors``), the one access
check (``access``), and the areas, each with its handlers and access rules beside them: the
operator endpoints (``ops``), the root page (``index``), the UI (``ui/``) and the JSON API
(``api/``). ``site.add_routes`` is the one call that puts them all on the server.
"""
