"""Schema migrations, applied in order at start-up and recorded in ``schema_migrations``.

Rules that users rely on:
- counter columns are nullable BIGINT with no DEFAULT: unknown must read back as None, never 0;
- a migration, once shipped, is never edited: add a new one at the end instead.
"""

from __future__ import annotations

from typing import Final

from gpu_health.contract import COUNTER_KEYS

_COUNTER_COLUMNS = ",\n    ".join(f"{key} BIGINT" for key in COUNTER_KEYS)

MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
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
    {_COUNTER_COLUMNS}
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
)
