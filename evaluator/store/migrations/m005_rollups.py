"""Migration 5: daily rollups instead of the samples' ART indexes."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration
from gpu_health.evaluator.store.rollup_sql import DAYS, EDGES, FIELD_COLUMNS, STATE

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        5,
        "daily rollups instead of the samples' ART indexes",
        (
            # The (node, index, time) ART index was ~90% of the file (51 of 58 bytes per row)
            # and served only constant point lookups; the source index none at all. Readers use
            # the rollups below and DuckDB's zone maps on sampled_at. Dropping frees the blocks
            # for reuse; the file shrinks only when rewritten (`gpu-health-evaluator compact`).
            "DROP INDEX IF EXISTS idx_samples_card_time",
            "DROP INDEX IF EXISTS idx_samples_source",
            # No key or index on either table: DuckDB's ART would again cost more than it saves
            # (both are read by range and hash joins); each is written by DELETE + INSERT inside
            # one transaction, so a (series, day) or (prediction, UUID) occurs once.
            f"""
CREATE TABLE {DAYS} (
    source VARCHAR NOT NULL,
    node_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid VARCHAR,
    day TIMESTAMP NOT NULL,
    {FIELD_COLUMNS},
    corr_hours BIGINT[] NOT NULL
)""",
            f"""
CREATE TABLE {EDGES} (
    prediction_id VARCHAR NOT NULL,
    edge VARCHAR NOT NULL CHECK (edge IN ('head', 'tail')),
    gpu_uuid VARCHAR,
    segment BOOLEAN NOT NULL,
    {FIELD_COLUMNS}
)""",
            f"CREATE TABLE {STATE} (sealed_until TIMESTAMP NOT NULL)",
        ),
    ),
)
