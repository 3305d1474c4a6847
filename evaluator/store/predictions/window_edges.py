"""The partial first and last days of prediction windows, summarised once.

A window ``(t0, window_end]`` rarely starts or ends at midnight, so the sealed daily rollups
cover only its whole days. Its *head* (rows in ``(t0, midnight after t0)``) and, once it is over,
its *tail* (rows in ``[midnight before window_end, window_end]``) are summarised here as segments
(:mod:`gpu_health.evaluator.store.rollup_sql`) the first time their day is sealed, so that the
backfill never reads a window's old raw rows again: reading them for hundreds of windows spread over
a month was a scan of the whole month. A marker row (``segment`` false) records an edge with no
rows.

Edges are only ever valid for their sealed day: :mod:`gpu_health.evaluator.store.readings.rollups`
drops them when that day is summarised again (a late row, retention).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.readings.rollups import WRITING, sealed_until
from gpu_health.evaluator.store.rollup_sql import AGGREGATE, EDGES, FIELDS, prev_unc

# The rows of an edge: sampled_at in (a, b]. Head: a = t0, b = its midnight - 1 us; tail (once
# the window is over at $now): a = the window end's midnight - 1 us, b = window_end. Only edges of
# sealed days, not yet done.
_NEED: Final = f"""
    SELECT id, edge, source, node_id, gpu_index, a, b FROM (
        SELECT id, 'head' AS edge, source, node_id, gpu_index, t0 AS a,
               date_trunc('day', t0) + INTERVAL '1 day' - INTERVAL '1 microsecond' AS b
        FROM gpu_health_predictions WHERE status = 'pending'
        UNION ALL
        SELECT id, 'tail', source, node_id, gpu_index,
               date_trunc('day', window_end) - INTERVAL '1 microsecond', window_end
        FROM gpu_health_predictions WHERE status = 'pending' AND window_end <= $now) n
    WHERE date_trunc('day', b) + INTERVAL '1 day' <= $sealed
      AND NOT EXISTS (SELECT 1 FROM {EDGES} e WHERE e.prediction_id = n.id AND e.edge = n.edge)
"""

# an empty edge: no rows, so every count is 0 and every time or value unknown
_MARKER: Final = ", ".join("0" if f.startswith("n_") else "NULL" for f in FIELDS)
_INSERT: Final = f"""
INSERT INTO {EDGES} (prediction_id, edge, gpu_uuid, segment, {", ".join(FIELDS)})
WITH need AS (
    SELECT unnest($ids::VARCHAR[]) AS id, unnest($edges::VARCHAR[]) AS edge,
           unnest($sources::VARCHAR[]) AS source, unnest($nodes::VARCHAR[]) AS node_id,
           unnest($idx::INTEGER[]) AS gpu_index, unnest($as::TIMESTAMP[]) AS a,
           unnest($bs::TIMESTAMP[]) AS b
),
edge_rows AS (
    SELECT n.id, n.edge, s.*, {prev_unc("n.id, n.edge, s.gpu_uuid")} AS prev
    FROM need n JOIN gpu_health_samples s
      ON s.source = n.source AND s.node_id = n.node_id AND s.gpu_index = n.gpu_index
     AND s.sampled_at > n.a AND s.sampled_at <= n.b
    WHERE s.sampled_at > $lo AND s.sampled_at <= $hi
)
SELECT id, edge, gpu_uuid, true, {AGGREGATE} FROM edge_rows GROUP BY id, edge, gpu_uuid
UNION ALL
SELECT id, edge, NULL, false, {_MARKER} FROM need
"""


def refresh_edges(db: Database, now: datetime) -> int:
    """Summarise every missing edge of a pending prediction whose day is sealed (one scan over
    the days concerned; in the steady state the day just sealed). Returns the edges done."""
    with WRITING:
        sealed = sealed_until(db)
        if sealed is None:
            return 0
        need = db.fetchall(_NEED, {"sealed": sealed, "now": now})
        if not need:
            return 0
        # Edges of resolved predictions are never read again; retention deletes them.
        columns = list(zip(*need, strict=True))
        db.execute(_INSERT, dict(zip(("ids", "edges", "sources", "nodes", "idx", "as", "bs"),
                                     map(list, columns), strict=True))
                   | {"lo": min(columns[5]), "hi": max(columns[6])})
        return len(need)
