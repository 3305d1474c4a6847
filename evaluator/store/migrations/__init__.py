"""Schema migrations, applied in order at start-up and recorded in ``schema_migrations``.

Rules that users rely on:
- counter columns are nullable BIGINT with no DEFAULT: unknown must read back as None, never 0;
- a migration, once shipped, is never edited: add a new one at the end instead.

Each module holds one migration or a few consecutive ones (``mNNN_<what>.py``, NNN the first
number it holds); :data:`MIGRATIONS` lists them in order. To add one: a new module after the
last, its number following on, appended below (a test checks the numbers run 1, 2, 3, ...).
"""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations import (
    m001_core,
    m005_rollups,
    m006_cluster,
    m008_remediation,
    m013_card_health,
    m014_pcie_replays,
    m015_nvlink_errors,
    m016_sxid_samples,
)
from gpu_health.evaluator.store.migrations.common import Migration, Only

__all__ = ["MIGRATIONS", "Migration", "Only"]

MIGRATIONS: Final[tuple[Migration, ...]] = (
    *m001_core.MIGRATIONS,
    *m005_rollups.MIGRATIONS,
    *m006_cluster.MIGRATIONS,
    *m008_remediation.MIGRATIONS,
    *m013_card_health.MIGRATIONS,
    *m014_pcie_replays.MIGRATIONS,
    *m015_nvlink_errors.MIGRATIONS,
    *m016_sxid_samples.MIGRATIONS,
)
