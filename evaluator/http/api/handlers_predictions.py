"""Prediction endpoints: the paged prediction list and the 7/30-day prediction statistics.

The statistics themselves are computed by ``gpu_health.evaluator.stats.document.prediction_stats``
(the rules engineer's module); this handler only validates parameters and narrows the node set to
what the caller may see, so tenant-scoped tokens get statistics over their own nodes only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from gpu_health.clock import rfc3339, rfc3339_or_none
from gpu_health.errors import ApiError
from gpu_health.evaluator.http.api.auth import Principal, node_not_found
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.query_params import Query
from gpu_health.evaluator.stats import document as stats
from gpu_health.evaluator.store.statistics import api_queries as q

PREDICTIONS_PARAMS: Final = frozenset(
    {"node_id", "gpu_index", "status", "since", "until", "source", "limit", "offset",
     "rule_version"}
)
STATS_PARAMS: Final = frozenset({"source", "since", "rule_version"})
PREDICTIONS_DEFAULT_LIMIT: Final = 100
PREDICTIONS_MAX_LIMIT: Final = 500
MAX_OFFSET: Final = 10_000_000


def _render(row: dict[str, object]) -> dict[str, object]:
    return {k: rfc3339(v) if isinstance(v, datetime) else v for k, v in row.items()}


async def predictions(ctx: ApiContext, principal: Principal, query: Query) -> dict[str, Any]:
    # No default upper bound: a prediction is listed whatever the evaluator's clock says now (a
    # clock stepped back an hour hid every prediction of that hour, and check said OK).
    since, until = query.bounds()
    tenants = principal.tenant_list
    filt = q.PredictionFilter(
        source=query.source(), since=since, until=until,
        limit=query.integer_or("limit", PREDICTIONS_DEFAULT_LIMIT, minimum=1,
                               maximum=PREDICTIONS_MAX_LIMIT),
        offset=query.integer_or("offset", 0, maximum=MAX_OFFSET),
        node_id=query.text("node_id"), gpu_index=query.integer("gpu_index"),
        status=query.status(), tenants=None if tenants is None else tuple(tenants),
        rule_version=query.text("rule_version"),
    )

    db = ctx.database()

    def work() -> q.PredictionPage:
        if filt.node_id is not None and not q.node_visible(db, filt.node_id, tenants):
            raise node_not_found()
        return q.predictions_page(db, filt)

    page = await db.run(work)
    return {
        "items": [_render(row) for row in page.rows],
        "total": page.total, "limit": filt.limit, "offset": filt.offset,
        "current_rule_version": ctx.current_rule_version, "source": filt.source,
        "since": rfc3339_or_none(since), "until": rfc3339_or_none(until),
    }


async def prediction_stats(ctx: ApiContext, principal: Principal, query: Query) -> dict[str, Any]:
    now, source = ctx.clock(), query.source()
    since = query.time("since") or stats.default_since(now, ctx.retention_days)
    if since > now:
        raise ApiError(400, "since: is in the future", param="since")
    tenants = principal.tenant_list
    version = query.text("rule_version")

    db = ctx.database()

    def work() -> dict[str, Any]:
        nodes = None if tenants is None else q.visible_nodes(db, tenants)
        return stats.prediction_stats(db, now=now, source=source, since=since, nodes=nodes,
                                      ruleset=ctx.ruleset_for(version), rule_version=version)

    return await db.run(work)
