"""Migrations 6-7: several evaluators on one store; shadow predictions."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration, Only, bytewise
from gpu_health.evaluator.store.rollup_sql import DAYS, EDGES

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        6,
        "several evaluators on one store: leader lease, members, audit order, PostgreSQL indexes",
        (
            # One row per lease (name 'leader'). The holder renews it before expires_at; a
            # candidate takes it only once expired, and every takeover increments token, the
            # fencing token the leader's writes check in their own transaction (docs/ha.md).
            # Times are the database's clock, so evaluators' clocks may disagree.
            """
CREATE TABLE gpu_health_leases (
    name VARCHAR PRIMARY KEY,
    holder VARCHAR NOT NULL,
    token BIGINT NOT NULL,
    acquired_at TIMESTAMP NOT NULL,
    renewed_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL
)""",
            # Live evaluators: each heartbeats its row; scrape targets go to the live ones by
            # rendezvous hashing (evaluator/cluster/assign.py).
            """
CREATE TABLE gpu_health_members (
    member_id VARCHAR PRIMARY KEY,
    address VARCHAR,
    started_at TIMESTAMP NOT NULL,
    heartbeat_at TIMESTAMP NOT NULL
)""",
            # The audit's order among entries of one instant was DuckDB's rowid; PostgreSQL has
            # none, so the inserting statement numbers them.
            "ALTER TABLE gpu_health_alert_audit ADD COLUMN seq BIGINT",
            Only("duckdb", "UPDATE gpu_health_alert_audit SET seq = rowid + 1"),
            # Identifiers compare byte by byte, as in DuckDB: the same ORDER BY on both engines
            # whatever the database's locale, and no locale-aware comparison in the sorts and
            # indexes of every per-card query.
            Only("postgresql", bytewise("gpu_health%")),
            # PostgreSQL reads a card's rows through B-tree indexes (DuckDB through zone maps
            # and the rollups, migration 5); BRIN on time serves the range scans (sealing a day,
            # retention) at a few pages per GB, since rows arrive in time order.
            Only("postgresql", "CREATE INDEX idx_samples_card_time ON gpu_health_samples "
                               "(node_id, gpu_index, source, sampled_at)"),
            Only("postgresql", "CREATE INDEX idx_samples_time ON gpu_health_samples "
                               "USING brin (sampled_at)"),
            Only("postgresql", "CREATE INDEX idx_xid_samples_series ON gpu_health_xid_samples "
                               "(node_id, gpu_index, source, xid, sampled_at)"),
            Only("postgresql", f"CREATE INDEX idx_sample_days_card ON {DAYS} "
                               "(node_id, gpu_index, source, day)"),
            Only("postgresql", f"CREATE INDEX idx_sample_days_day ON {DAYS} (day)"),
            Only("postgresql", f"CREATE INDEX idx_window_edges ON {EDGES} (prediction_id)"),
            Only("postgresql", "CREATE INDEX idx_predictions_window ON gpu_health_predictions "
                               "(window_end)"),
        ),
    ),
    (
        7,
        "shadow predictions: made by a rule version run beside the active one",
        (
            # Frozen per row, like the rule version: a shadow version's predictions never
            # alert and never enter the default statistics, even after the operator promotes
            # that version to active. Rows written before shadows existed read back NULL: the
            # active version's (every reader tests ``shadow IS NOT TRUE``).
            "ALTER TABLE gpu_health_predictions ADD COLUMN shadow BOOLEAN",
        ),
    ),
)
