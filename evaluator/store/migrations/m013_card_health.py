"""Migration 13: the card's health beyond memory on samples (the PCIe link width, the thermal
and power-brake slowdown time, the NVLink fabric state and status)."""

from __future__ import annotations

from typing import Final

from gpu_health.evaluator.store.migrations.common import Migration

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        13,
        "PCIe link width, thermal and power-brake slowdown time, fabric state and status on "
        "samples (nullable, no DEFAULT: old rows read back unknown)",
        tuple(f"ALTER TABLE gpu_health_samples ADD COLUMN {key} BIGINT" for key in (
            "pcie_link_width", "pcie_link_width_max", "sw_thermal_slowdown_us",
            "hw_thermal_slowdown_us", "hw_power_brake_slowdown_us", "fabric_state",
            "fabric_status_success")),
    ),
)
