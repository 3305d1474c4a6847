"""Per-card endpoints: capability matrix, raw samples of one card, hourly ECC increases.

Each handler parses its query (params.Query), does all its store work in ONE ``db.run`` call
(visibility check included, so a 404 costs the same thread hop as an answer), and renders a
JSON-ready dict. Unknown counters stay ``None`` (JSON null) all the way out.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from gpu_health.clock import rfc3339
from gpu_health.contract import COUNTER_KEYS
from gpu_health.errors import ApiError
from gpu_health.evaluator.http.api.auth import Principal, node_not_found
from gpu_health.evaluator.http.api.context import ApiContext
from gpu_health.evaluator.http.api.query_params import Query
from gpu_health.evaluator.model import CardKey, Sample
from gpu_health.evaluator.rules.actions import CardState, recommend
from gpu_health.evaluator.stats.ecc_rate import coverage, hourly_increases
from gpu_health.evaluator.store.predictions.actions import card_states
from gpu_health.evaluator.store.statistics import api_queries as q

CAPABILITIES_PARAMS: Final = frozenset({"node_id", "source"})
SAMPLES_PARAMS: Final = frozenset({"node_id", "gpu_index", "source", "since", "until", "limit"})
ECC_RATE_PARAMS: Final = frozenset({"node_id", "gpu_index", "source", "since", "until"})

CAPABILITIES_NOTE: Final = (
    "capabilities are derived from samples, not from a vendor support matrix; "
    "unknown means not collected, not zero"
)
ECC_RATE_NOTE: Final = (
    "an hour's increase is null (unknown, not zero) unless both hour boundaries have a sample "
    "at most stall_minutes old, both from the same card (UUID), and the counter did not decrease"
)
SAMPLES_DEFAULT_SPAN: Final = timedelta(days=7)
SAMPLES_DEFAULT_LIMIT: Final = 5000
SAMPLES_MAX_LIMIT: Final = 20000
ECC_RATE_MAX_HOURS: Final = 24 * 366
_HOUR: Final = timedelta(hours=1)


def _action(ctx: ApiContext, state: CardState | None) -> dict[str, Any]:
    """The card's recommended action (docs/actions.md); ``unknown`` without a policy."""
    if ctx.action_policy is None:
        return {"action": "unknown", "reason": "no action policy is loaded", "policy": None}
    rec = recommend(state or CardState(), ctx.action_policy)
    return {"action": rec.action, "reason": rec.reason, "policy": rec.policy}


def _floor_hour(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


async def capabilities(ctx: ApiContext, principal: Principal, query: Query) -> dict[str, Any]:
    node_id, source = query.text("node_id"), query.source()
    now, tenants = ctx.clock(), principal.tenant_list
    stall = timedelta(minutes=ctx.stall_minutes)

    db = ctx.database()

    def work() -> tuple[tuple[q.CardCapability, ...], dict[Any, CardState],
                        tuple[q.ListedCards, ...]]:
        if node_id is not None and not q.node_visible(db, node_id, tenants):
            raise node_not_found()
        cards = q.capabilities(db, source=source, now=now, node_id=node_id, tenants=tenants)
        states = {} if ctx.action_policy is None or not cards else card_states(
            db, now=now, source=source, nodes=sorted({c.node_id for c in cards}),
            xid_window=timedelta(hours=ctx.action_policy.xid_window_hours))
        listed = q.listed_cards(db, source=source, node_id=node_id, tenants=tenants)
        return cards, {(n, i): s for (n, i, _), s in states.items()}, listed

    cards, states, listed = await db.run(work)
    items = [
        {
            "node_id": c.node_id,
            "gpu_index": c.gpu_index,
            "gpu_uuid": c.gpu_uuid,
            "metrics": {k: "collectable" if c.collectable[k] else "unknown" for k in COUNTER_KEYS},
            "first_sample_at": rfc3339(c.first_sample_at),
            "last_sample_at": rfc3339(c.last_sample_at),
            "sample_count": c.sample_count,
            "collection_stalled": now - c.last_sample_at > stall,
            # The growth rule needs the corrected counter; without it (e.g. Kunlunxin) a card can
            # only be backfilled and alerted after the fact (reference, "增速型主信号").
            "growth_prediction_possible": c.collectable["ecc_corrected_total"],
            # Kernel-log XID counts were stored for the slot: memory XIDs can be fault events
            # (rule sets with fault_xids, e.g. v2-ecc-xid), for backfill and recall.
            "xid_collectable": c.xid_collectable,
            "action": _action(ctx, states.get((c.node_id, c.gpu_index))),
        }
        for c in cards
    ]
    return {"source": source, "generated_at": rfc3339(now), "stall_minutes": ctx.stall_minutes,
            "items": items, "nodes": _nodes(cards, listed), "note": CAPABILITIES_NOTE}


def _nodes(cards: tuple[q.CardCapability, ...],
           listed: tuple[q.ListedCards, ...]) -> list[dict[str, Any]]:
    """Per node: cards listed by its last scrape beside cards with samples. A card whose counters
    are all unknown writes no sample, so ``unsampled_cards`` is the only trace of it: a count,
    never a guess at which indexes. Unknown (null) when no scrape of this source listed the node
    (simulated history, data from before the count was stored)."""
    sampled = Counter(c.node_id for c in cards)
    counts = {n.node_id: n for n in listed}
    rows = []
    for node in sorted(sampled.keys() | counts.keys()):
        seen, have = counts.get(node), sampled[node]
        rows.append({
            "node_id": node, "cards_with_samples": have,
            "listed_cards": None if seen is None else seen.listed_cards,
            "unsampled_cards": None if seen is None else max(seen.listed_cards - have, 0),
            "listed_at": None if seen is None else rfc3339(seen.seen_at),
        })
    return rows


def _card(query: Query) -> CardKey:
    return CardKey(query.required_text("node_id"), query.required_integer("gpu_index"),
                   query.source())


def _render_sample(sample: Sample, now: datetime) -> dict[str, Any]:
    values = sample.counters.as_tuple()
    return {
        "sampled_at": rfc3339(sample.sampled_at),
        "gpu_uuid": sample.gpu_uuid,
        **dict(zip(COUNTER_KEYS, values, strict=True)),
        "future": sample.sampled_at > now,
    }


async def samples(ctx: ApiContext, principal: Principal, query: Query) -> dict[str, Any]:
    key, now = _card(query), ctx.clock()
    since, until = query.time_range(now, SAMPLES_DEFAULT_SPAN)
    limit = query.integer_or("limit", SAMPLES_DEFAULT_LIMIT, minimum=1, maximum=SAMPLES_MAX_LIMIT)
    tenants = principal.tenant_list

    db = ctx.database()

    def work() -> tuple[tuple[Sample, ...], bool]:
        if not q.node_visible(db, key.node_id, tenants):
            raise node_not_found()
        return q.card_samples(db, key, since=since, until=until, limit=limit)

    rows, truncated = await db.run(work)
    return {
        "node_id": key.node_id, "gpu_index": key.gpu_index, "source": key.source,
        "since": rfc3339(since), "until": rfc3339(until), "limit": limit,
        "count": len(rows), "truncated": truncated,
        "items": [_render_sample(s, now) for s in rows],
    }


async def ecc_rate(ctx: ApiContext, principal: Principal, query: Query) -> dict[str, Any]:
    key, now = _card(query), ctx.clock()
    since, until = query.time_range(now, SAMPLES_DEFAULT_SPAN)
    # Whole hours only: the hour that contains `until` has not ended yet, so it is left out.
    start, end = _floor_hour(since), _floor_hour(until)
    if (end - start) / _HOUR > ECC_RATE_MAX_HOURS:
        raise ApiError(400, f"since: the range may span at most {ECC_RATE_MAX_HOURS} hours",
                       param="since")
    stall, tenants = timedelta(minutes=ctx.stall_minutes), principal.tenant_list

    db = ctx.database()

    def work() -> tuple[q.Boundary, ...]:
        if not q.node_visible(db, key.node_id, tenants):
            raise node_not_found()
        return q.ecc_boundaries(db, key, start=start, end=end,
                                lookback_minutes=ctx.stall_minutes)

    hours = hourly_increases(await db.run(work), stall=stall)
    return {
        "node_id": key.node_id, "gpu_index": key.gpu_index, "source": key.source,
        "since": rfc3339(start), "until": rfc3339(end), "stall_minutes": ctx.stall_minutes,
        "hours": [
            {"start": rfc3339(h.start), "end": rfc3339(h.end),
             **{k: {"increase": v.value, "reason": v.reason} for k, v in h.increases.items()}}
            for h in hours
        ],
        "coverage": {
            k: {"computable_hours": c.computable_hours, "total_hours": c.total_hours,
                "sum_increase": c.sum_increase}
            for k, c in coverage(hours).items()
        },
        "note": ECC_RATE_NOTE,
    }

