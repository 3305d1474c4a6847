"""Migrations 1-4: samples, predictions, rule versions and nodes; the alert state;
XID samples; row-remap details."""

from __future__ import annotations

from typing import Final

from gpu_health.contract import REMAP_KEYS
from gpu_health.evaluator.store.migrations.common import COUNTER_COLUMNS, Migration

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        1,
        "samples, predictions, rule versions, nodes",
        (
            f"""
CREATE TABLE gpu_health_samples (
    node_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid VARCHAR,
    source VARCHAR NOT NULL CHECK (source IN ('real', 'simulated')),
    sampled_at TIMESTAMP NOT NULL,
    {COUNTER_COLUMNS}
)""",
            "CREATE INDEX idx_samples_card_time ON gpu_health_samples "
            "(node_id, gpu_index, sampled_at)",
            "CREATE INDEX idx_samples_source ON gpu_health_samples (source)",
            """
CREATE TABLE gpu_health_rule_versions (
    version VARCHAR PRIMARY KEY,
    base_version VARCHAR NOT NULL,
    params_hash VARCHAR NOT NULL,
    params_json VARCHAR NOT NULL,
    first_used_at TIMESTAMP NOT NULL
)""",
            """
CREATE TABLE gpu_health_predictions (
    id VARCHAR PRIMARY KEY,
    node_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid VARCHAR,
    source VARCHAR NOT NULL CHECK (source IN ('real', 'simulated')),
    rule_version VARCHAR NOT NULL,
    window_days INTEGER NOT NULL,
    t0 TIMESTAMP NOT NULL,
    window_end TIMESTAMP NOT NULL,
    predicted_at TIMESTAMP NOT NULL,
    signal VARCHAR NOT NULL,
    layer VARCHAR NOT NULL,
    evidence VARCHAR NOT NULL,
    uncorrected_at_t0 BIGINT,
    status VARCHAR NOT NULL CHECK (status IN ('pending', 'hit', 'miss', 'voided')),
    resolved_at TIMESTAMP,
    outcome VARCHAR
)""",
            "CREATE INDEX idx_predictions_card ON gpu_health_predictions "
            "(node_id, gpu_index, source)",
            "CREATE INDEX idx_predictions_status ON gpu_health_predictions (status)",
            """
CREATE TABLE gpu_health_nodes (
    node_id VARCHAR PRIMARY KEY,
    tenant VARCHAR,
    target VARCHAR,
    last_seen TIMESTAMP NOT NULL
)""",
        ),
    ),
    (
        2,
        "GPU_FAULT_PREDICTED alert state and its audit trail",
        (
            # One row per alert ever opened. At most one row per node has closed_at NULL (the
            # opening INSERT checks it in the same statement). No index besides the key: the
            # table holds a few rows per node and DuckDB ART indexes block later ALTER TABLEs.
            """
CREATE TABLE gpu_health_alerts (
    id VARCHAR PRIMARY KEY,
    node_id VARCHAR NOT NULL,
    tenant VARCHAR,
    prediction_id VARCHAR NOT NULL,
    opened_at TIMESTAMP NOT NULL,
    last_sent_at TIMESTAMP,
    node_absent_since TIMESTAMP,
    closed_at TIMESTAMP,
    closed_by VARCHAR,
    close_reason VARCHAR,
    end_sent_at TIMESTAMP
)""",
            """
CREATE TABLE gpu_health_alert_audit (
    happened_at TIMESTAMP NOT NULL,
    actor VARCHAR NOT NULL,
    action VARCHAR NOT NULL CHECK (action IN ('open', 'resolve', 'close_node_removed')),
    node_id VARCHAR NOT NULL,
    alert_id VARCHAR NOT NULL,
    reason VARCHAR NOT NULL
)""",
        ),
    ),
    (
        3,
        "XID counter samples (change-only per card and XID code)",
        (
            # No index: DuckDB's ART indexes only serve constant point lookups (not the joins
            # and window scans run here), they slow every insert and block ALTER TABLE; the
            # table is small (change-only, no keep-alive rows) and row groups are skipped by
            # their sampled_at zone maps.
            """
CREATE TABLE gpu_health_xid_samples (
    node_id VARCHAR NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid VARCHAR,
    source VARCHAR NOT NULL CHECK (source IN ('real', 'simulated')),
    xid INTEGER NOT NULL CHECK (xid >= 0),
    sampled_at TIMESTAMP NOT NULL,
    count BIGINT NOT NULL CHECK (count >= 0)
)""",
        ),
    ),
    (
        4,
        "row-remap details on samples (nullable, no DEFAULT: old rows read back unknown)",
        tuple(f"ALTER TABLE gpu_health_samples ADD COLUMN {key} BIGINT" for key in REMAP_KEYS),
    ),
)
