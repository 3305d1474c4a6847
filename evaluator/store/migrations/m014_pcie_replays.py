"""Migration 14: the PCIe replays since the last GPU reset on samples."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        14,
        "PCIe replays since the last GPU reset on samples (nullable, no DEFAULT: old rows read "
        "back unknown)",
        ("ALTER TABLE gpu_health_samples ADD COLUMN pcie_replays BIGINT",),
    ),
)
