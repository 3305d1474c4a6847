"""Migration 15: the card's NVLink error total (every counter of every link) on samples."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        15,
        "NVLink errors of the card (every counter of every link added up) on samples "
        "(nullable, no DEFAULT: old rows read back unknown)",
        ("ALTER TABLE gpu_health_samples ADD COLUMN nvlink_errors BIGINT",),
    ),
)
