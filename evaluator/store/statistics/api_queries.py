"""Read-only queries behind the HTTP API (evaluator/api): visibility, predictions, capabilities,
per-card samples and the hour boundaries of the ECC rate chart.

Each function is a fixed number of statements whatever the data size (the capability matrix is
one GROUP BY for all cards, the ECC rate one ASOF JOIN for all hours). Tenant visibility is a
sub-select on ``gpu_health_nodes`` inside the same statement; ``tenants=None`` means "every node".
All datetimes in and out are aware UTC; the naive-UTC conversion happens here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpu_health.contract import COUNTER_KEYS
from gpu_health.evaluator.model import CardKey, Counters, Sample
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.rollups import covered, watermark

PREDICTION_COLUMNS = (
    "id", "node_id", "gpu_index", "gpu_uuid", "source", "rule_version", "window_days", "t0",
    "window_end", "predicted_at", "signal", "layer", "evidence", "uncorrected_at_t0", "status",
    "resolved_at", "outcome", "shadow",
)
# NULL: a row from before shadow versions existed, which only the active version wrote
_SELECTED = ", ".join("shadow IS TRUE" if c == "shadow" else c for c in PREDICTION_COLUMNS)
_VISIBLE = "node_id IN (SELECT node_id FROM gpu_health_nodes WHERE list_contains($tenants, tenant))"


def _where(conditions: list[str], tenants: Sequence[str] | None, params: dict[str, Any]) -> str:
    if tenants is not None:
        conditions.append(_VISIBLE)
        params["tenants"] = list(tenants)
    return " AND ".join(conditions) if conditions else "TRUE"


# -- visibility ---------------------------------------------------------------------------------


def visible_nodes(db: Database, tenants: Sequence[str]) -> frozenset[str]:
    """Node ids whose target carries one of ``tenants`` (nodes without a tenant: never)."""
    rows = db.fetchall(
        "SELECT node_id FROM gpu_health_nodes WHERE list_contains($tenants, tenant)",
        {"tenants": list(tenants)},
    )
    return frozenset(str(r[0]) for r in rows)


def node_visible(db: Database, node_id: str, tenants: Sequence[str] | None) -> bool:
    """Does the node exist for this caller? With a tenant list: a target of one of those tenants.
    Without (all nodes): a known target, or any stored sample or prediction (simulated data and
    nodes since removed from the targets are still nodes to an all-seeing caller)."""
    if tenants is not None:
        row = db.fetchone(
            "SELECT EXISTS (SELECT 1 FROM gpu_health_nodes "
            "WHERE node_id = $n AND list_contains($tenants, tenant))",
            {"n": node_id, "tenants": list(tenants)},
        )
        return bool(row[0])
    # The small nodes table answers nearly every request; only a node missing from it (removed
    # target, simulated-only node, unknown id) costs the scans of the data tables: the daily
    # rollups and the raw rows after them (an hour or so), never the whole sample history.
    if db.fetchone("SELECT count(*) FROM gpu_health_nodes WHERE node_id = $n", {"n": node_id})[0]:
        return True
    row = db.fetchone(
        "SELECT EXISTS (SELECT 1 FROM gpu_health_sample_days WHERE node_id = $n) "
        "OR EXISTS (SELECT 1 FROM gpu_health_samples WHERE node_id = $n AND sampled_at >= $w) "
        "OR EXISTS (SELECT 1 FROM gpu_health_predictions WHERE node_id = $n)",
        {"n": node_id, "w": watermark(db)},
    )
    return bool(row[0])


# -- predictions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PredictionFilter:
    source: str
    until: datetime | None  # None: no upper bound (open predictions never hide behind a clock)
    limit: int
    offset: int
    since: datetime | None = None
    node_id: str | None = None
    gpu_index: int | None = None
    status: str | None = None
    tenants: tuple[str, ...] | None = None
    rule_version: str | None = None  # None: the active versions' (never a shadow's)


@dataclass(frozen=True, slots=True)
class PredictionPage:
    """One page of stored predictions (column name -> value, datetimes aware UTC) and the total."""

    rows: tuple[dict[str, object], ...]
    total: int


def predictions_page(db: Database, f: PredictionFilter) -> PredictionPage:
    """Newest t0 first (id breaks ties so pages are stable); two statements: count and page."""
    params: dict[str, Any] = {"source": f.source}
    conditions = ["source = $source"]
    if f.until is not None:
        conditions.append("t0 <= $until")
        params["until"] = f.until
    if f.since is not None:
        conditions.append("t0 >= $since")
        params["since"] = f.since
    for column, value in (("node_id", f.node_id), ("gpu_index", f.gpu_index),
                          ("status", f.status), ("rule_version", f.rule_version)):
        if value is not None:
            conditions.append(f"{column} = ${column}")
            params[column] = value
    if f.rule_version is None:
        conditions.append("shadow IS NOT TRUE")
    where = _where(conditions, f.tenants, params)
    total = db.fetchone(f"SELECT count(*) FROM gpu_health_predictions WHERE {where}", params)[0]
    rows = db.fetchall(
        f"SELECT {_SELECTED} FROM gpu_health_predictions WHERE {where} "
        "ORDER BY t0 DESC, id LIMIT $limit OFFSET $offset",
        {**params, "limit": f.limit, "offset": f.offset},
    )
    items = tuple(
        dict(zip(PREDICTION_COLUMNS, row, strict=True)) for row in rows
    )
    return PredictionPage(items, int(total))


# -- capabilities -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CardCapability:
    """What one card's samples show: per counter key, whether any non-NULL value was stored."""

    node_id: str
    gpu_index: int
    gpu_uuid: str | None
    collectable: dict[str, bool]
    first_sample_at: datetime
    last_sample_at: datetime
    sample_count: int
    xid_collectable: bool = False  # any gpu_health_xid_samples row (same slot and source)


def _capabilities(where: str) -> str:
    """The sealed days' rollups, then the raw rows after them, per card (``where``: the rows'
    conditions). arg_max_null: the newest row's UUID even when it has none (arg_max would skip
    NULLs: an older card's UUID). The count is cast to BIGINT for ``fetchall_wide``."""
    return f"""
WITH segs AS (
    SELECT node_id, gpu_index, gpu_uuid, first_at, last_at, n_rows,
           {", ".join(f"n_{k}" for k in COUNTER_KEYS)}
    FROM gpu_health_sample_days WHERE {where} AND day < $cov
    UNION ALL
    SELECT node_id, gpu_index, gpu_uuid, min(sampled_at), max(sampled_at), count(*),
           {", ".join(f"count({k})" for k in COUNTER_KEYS)}
    FROM gpu_health_samples WHERE {where} AND sampled_at >= $cov AND sampled_at <= $now
    GROUP BY node_id, gpu_index, gpu_uuid),
c AS (
    SELECT node_id, gpu_index, arg_max_null(gpu_uuid, last_at),
           {", ".join(f"sum(n_{k}) > 0" for k in COUNTER_KEYS)},
           min(first_at), max(last_at), CAST(sum(n_rows) AS BIGINT)
    FROM segs GROUP BY node_id, gpu_index),
x AS (SELECT DISTINCT node_id, gpu_index FROM gpu_health_xid_samples
      WHERE {where} AND sampled_at <= $now)
SELECT c.*, x.node_id IS NOT NULL FROM c
LEFT JOIN x ON x.node_id = c.node_id AND x.gpu_index = c.gpu_index
ORDER BY c.node_id, c.gpu_index"""


def capabilities(
    db: Database, *, source: str, now: datetime, node_id: str | None = None,
    tenants: Sequence[str] | None = None,
) -> tuple[CardCapability, ...]:
    """One statement over all cards of ``source`` with samples at or before ``now`` (a sample
    from the future, e.g. a skewed agent clock, must not hide a collection stall): a GROUP BY
    over the daily rollups and the raw rows after them, and whether the slot has any XID sample
    (at or before ``now``)."""
    params: dict[str, Any] = {"source": source, "now": now,
                              "cov": covered(db, now)}
    conditions = ["source = $source"]
    if node_id is not None:
        conditions.append("node_id = $node_id")
        params["node_id"] = node_id
    where = _where(conditions, tenants, params)
    rows = db.fetchall_wide(_capabilities(where), params)
    # At 100,000 cards building the answer cost more than the statement: the statement says
    # which keys were collected, and the cards share the dict of each of the 32 patterns
    # (read only). A node's cards share their scrape times: each instant is converted once.
    patterns: dict[tuple[bool, ...], dict[str, bool]] = {}
    n = len(COUNTER_KEYS)
    result = []
    for row in rows:
        flags = tuple(row[3:3 + n])
        collectable = patterns.get(flags)
        if collectable is None:
            collectable = patterns[flags] = dict(zip(COUNTER_KEYS, flags, strict=True))
        first, last, count, xid = row[3 + n:]
        result.append(CardCapability(
            row[0], row[1], row[2], collectable, first, last, int(count),
            bool(xid)))
    return tuple(result)


@dataclass(frozen=True, slots=True)
class ListedCards:
    """How many cards a node's last scrape listed (``gpu_health_nodes``), and when."""

    node_id: str
    listed_cards: int
    seen_at: datetime


def listed_cards(
    db: Database, *, source: str, node_id: str | None = None,
    tenants: Sequence[str] | None = None,
) -> tuple[ListedCards, ...]:
    """The listed-card count of every visible node last scraped for ``source`` (one node with
    ``node_id``)."""
    params: dict[str, Any] = {"source": source}
    conditions = ["listed_source = $source", "listed_cards IS NOT NULL"]
    if node_id is not None:
        conditions.append("node_id = $node_id")
        params["node_id"] = node_id
    rows = db.fetchall(
        "SELECT node_id, listed_cards, last_seen FROM gpu_health_nodes "
        f"WHERE {_where(conditions, tenants, params)} ORDER BY node_id", params)
    return tuple(ListedCards(str(n), int(c), t) for n, c, t in rows)


# -- samples of one card ------------------------------------------------------------------------


def card_samples(
    db: Database, key: CardKey, *, since: datetime, until: datetime, limit: int,
) -> tuple[tuple[Sample, ...], bool]:
    """Samples in [since, until], the newest ``limit`` of them, oldest first; and whether more
    matched (fetches limit + 1 newest rows: one statement, no separate COUNT)."""
    rows = db.fetchall(
        f"SELECT gpu_uuid, sampled_at, {', '.join(COUNTER_KEYS)} FROM gpu_health_samples "
        "WHERE node_id = $node AND gpu_index = $gpu AND source = $source "
        "AND sampled_at >= $since AND sampled_at <= $until ORDER BY sampled_at DESC LIMIT $n",
        {"node": key.node_id, "gpu": key.gpu_index, "source": key.source,
         "since": since, "until": until, "n": limit + 1},
    )
    truncated = len(rows) > limit
    samples = tuple(
        Sample(key, None if uuid is None else str(uuid), at,
               Counters(*(None if v is None else int(v) for v in values)))
        for uuid, at, *values in reversed(rows[:limit])
    )
    return samples, truncated


# -- ECC rate boundaries ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Boundary:
    """The newest sample at or before an hour boundary ``at`` (all None when there is none)."""

    at: datetime
    sampled_at: datetime | None
    gpu_uuid: str | None
    ecc_corrected_total: int | None
    ecc_uncorrected_total: int | None


def ecc_boundaries(
    db: Database, key: CardKey, *, start: datetime, end: datetime, lookback_minutes: int,
) -> tuple[Boundary, ...]:
    """For every whole hour from ``start`` to ``end`` inclusive, the card's newest sample at or
    before it (ASOF JOIN), looking back at most ``lookback_minutes`` before ``start``."""
    rows = db.fetchall(
        """
        WITH b AS (SELECT unnest(generate_series($start::TIMESTAMP, $end::TIMESTAMP,
                                                 INTERVAL '1 hour')) AS at),
             s AS (SELECT sampled_at, gpu_uuid, ecc_corrected_total, ecc_uncorrected_total
                   FROM gpu_health_samples
                   WHERE node_id = $node AND gpu_index = $gpu AND source = $source
                     AND sampled_at <= $end
                     AND sampled_at >= $start::TIMESTAMP - to_minutes($lookback::BIGINT))
        SELECT b.at, s.sampled_at, s.gpu_uuid, s.ecc_corrected_total, s.ecc_uncorrected_total
        FROM b ASOF LEFT JOIN s ON b.at >= s.sampled_at ORDER BY b.at
        """,
        {"node": key.node_id, "gpu": key.gpu_index, "source": key.source,
         "start": start, "end": end, "lookback": lookback_minutes},
    )
    return tuple(
        Boundary(at, s_at,
                 None if uuid is None else str(uuid),
                 None if corr is None else int(corr), None if unc is None else int(unc))
        for at, s_at, uuid, corr, unc in rows
    )
