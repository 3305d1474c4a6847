"""Migration 16: NVSwitch SXid counts, change-only per node, switch, SXid and severity."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration, Only, bytewise

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        16,
        "NVSwitch SXid counter samples (change-only per node, switch, SXid and severity)",
        (
            # A switch is not a card: the row names the node and the switch as the kernel line
            # does (its number and PCI id), no GPU. Like the XID table: no DuckDB index (zone
            # maps on sampled_at, a tiny change-only table), a B-tree for PostgreSQL's lookups.
            """
CREATE TABLE gpu_health_sxid_samples (
    node_id VARCHAR NOT NULL,
    source VARCHAR NOT NULL CHECK (source IN ('real', 'simulated')),
    nvswitch INTEGER NOT NULL CHECK (nvswitch >= 0),
    pci_bus_id VARCHAR NOT NULL,
    sxid INTEGER NOT NULL CHECK (sxid >= 0),
    fatal BOOLEAN NOT NULL,
    sampled_at TIMESTAMP NOT NULL,
    count BIGINT NOT NULL CHECK (count >= 0)
)""",
            Only("postgresql", bytewise("gpu_health_sxid_samples")),  # as migration 6 did
            Only("postgresql", "CREATE INDEX idx_sxid_samples_series ON gpu_health_sxid_samples "
                               "(node_id, source, nvswitch, pci_bus_id, sxid, fatal, sampled_at)"),
        ),
    ),
)
