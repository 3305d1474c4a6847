"""Migrations 8-12: recovery action, the Slurm remediation audit, member incarnations,
the history import's marker, listed cards."""

from __future__ import annotations

from typing import Final

from gpu_health.contract import RECOVERY_KEYS
from gpu_health.evaluator.store.migrations.common import Migration, Only, bytewise

MIGRATIONS: Final[tuple[Migration, ...]] = (
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
            Only("postgresql", bytewise("gpu_health_remediations")),  # as migration 5 did
        ),
    ),
    (
        10,
        "member incarnations: two evaluators with one ha.member_id are told apart",
        (
            "ALTER TABLE gpu_health_members ADD COLUMN incarnation VARCHAR",
            Only("postgresql", bytewise("gpu_health_members")),
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
            Only("postgresql", bytewise("gpu_health_nodes")),  # as migration 5 did
        ),
    ),
)
