"""Schema migrations, applied in order at start-up and recorded in ``schema_migrations``.

Rules that users rely on:
- counter columns are nullable BIGINT with no DEFAULT: unknown must read back as None, never 0;
- a migration, once shipped, is never edited: add a new one at the end instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpu_health.contract import COUNTER_KEYS, RECOVERY_KEYS, REMAP_KEYS
from gpu_health.evaluator.store.rollup_sql import DAYS, EDGES, FIELD_COLUMNS, STATE

_COUNTER_COLUMNS = ",\n    ".join(f"{key} BIGINT" for key in COUNTER_KEYS)



def _bytewise(tables: str) -> str:
    """PostgreSQL: every VARCHAR column of the tables LIKE ``tables`` compares byte by byte."""
    return f"""DO $$ DECLARE c record; BEGIN
    FOR c IN SELECT table_name, column_name FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name LIKE '{tables}'
               AND data_type = 'character varying' LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE VARCHAR COLLATE "C"',
                       c.table_name, c.column_name);
    END LOOP; END $$"""


@dataclass(frozen=True, slots=True)
class Only:
    """A statement for one engine (``duckdb`` or ``postgresql``): an index one of them needs."""

    engine: str
    sql: str


MIGRATIONS: Final[tuple[tuple[int, str, tuple[str | Only, ...]], ...]] = (
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
            Only("postgresql", _bytewise("gpu_health%")),
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
    (
        8,
        "NVIDIA recovery action and pending page retirement on samples (nullable, "
        "no DEFAULT: old rows read back unknown)",
        tuple(f"ALTER TABLE gpu_health_samples ADD COLUMN {key} BIGINT" for key in RECOVERY_KEYS),
    ),
    (
        9,
        "Slurm remediation audit: every drain, resume and refusal",
        (
            # One row per decision that changed: who (actor), when, why (reason), what Slurm
            # was asked (slurm_node, slurm_reason) and what came of it (result).
            """
CREATE TABLE gpu_health_remediations (
    happened_at TIMESTAMP NOT NULL,
    seq BIGINT NOT NULL,
    actor VARCHAR NOT NULL,
    step VARCHAR NOT NULL CHECK (step IN ('drain', 'resume')),
    result VARCHAR NOT NULL,
    alert_id VARCHAR NOT NULL,
    node_id VARCHAR NOT NULL,
    slurm_node VARCHAR,
    gpu_index INTEGER,
    card_action VARCHAR,
    slurm_reason VARCHAR,
    reason VARCHAR NOT NULL
)""",
            Only("postgresql", _bytewise("gpu_health_remediations")),  # as migration 5 did
        ),
    ),
    (
        10,
        "member incarnations: two evaluators with one ha.member_id are told apart",
        (
            "ALTER TABLE gpu_health_members ADD COLUMN incarnation VARCHAR",
            Only("postgresql", _bytewise("gpu_health_members")),
        ),
    ),
    (
        11,
        "the first-start history import's marker: an interrupted import is redone",
        (
            """
CREATE TABLE gpu_health_history_imports (
    started_at TIMESTAMP NOT NULL,
    since TIMESTAMP NOT NULL,
    until TIMESTAMP NOT NULL,
    completed_at TIMESTAMP
)""",
        ),
    ),
    (
        12,
        "how many cards each node lists, and from which source: the UI's unsampled-cards row",
        (
            # An all-unknown card writes no sample: without this, 8 cards with 6 sampled look like 6
            "ALTER TABLE gpu_health_nodes ADD COLUMN listed_cards INTEGER",
            "ALTER TABLE gpu_health_nodes ADD COLUMN listed_source VARCHAR",
            Only("postgresql", _bytewise("gpu_health_nodes")),  # as migration 5 did
        ),
    ),
)
