"""Row-remap details from real nvidia-smi captures: the remapped-row counts and the bank
remap-availability histogram, exported where the driver lists them, absent (never 0) where a
cell is [N/A] (MIG mode)."""

from __future__ import annotations

import csv

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.collector import card_families
from gpu_health.exporter.parsers import nvidia
from tests.shared import require_shared

from .support import Scrape

CAPTURES = {  # capture -> (remapped rows corr./uncorr., banks max, the rest of the histogram)
    "query-h100-590.48.01-full.csv": (0, 0, 2560),
    "query-h200-590.48.01-full.csv": (0, 0, 3072),
    "query-l40s-595.80-full.csv": (0, 0, 192),
}


def parse_capture(name: str) -> nvidia.ParsedOutput:
    rows = list(csv.reader((require_shared() / "nvidia" / name).read_text().splitlines()))
    header = [cell.strip() for cell in rows[0]]
    body = "\n".join(",".join(row) for row in rows[1:])
    return nvidia.parse_query(body, header)


class _Families:
    def __init__(self, readings: tuple[nvidia.CardReading, ...]) -> None:
        self.readings = readings

    def collect(self) -> list[object]:
        return list(card_families(self.readings))


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_the_captures_remap_details_are_exported(name: str) -> None:
    out = parse_capture(name)
    (reading,) = out.readings
    correctable, uncorrectable, banks_max = CAPTURES[name]
    assert dict(reading.remap) == {
        "remapped_rows_correctable": correctable, "remapped_rows_uncorrectable": uncorrectable,
        "remap_banks_max": banks_max, "remap_banks_high": 0, "remap_banks_partial": 0,
        "remap_banks_low": 0, "remap_banks_none": 0}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(out.readings))  # type: ignore[arg-type]
    scraped = Scrape(generate_latest(registry).decode())
    card = {"gpu": "0", "uuid": reading.uuid or "", "vendor": "nvidia"}
    assert scraped.get("gpu_health_remap_bank_availability", level="max", **card) == banks_max
    assert scraped.get("gpu_health_remap_bank_availability", level="none", **card) == 0
    assert scraped.get("gpu_health_remapped_rows_uncorrectable", **card) == uncorrectable


def test_mig_mode_remapped_rows_are_absent_not_zero() -> None:
    (reading,) = parse_capture("query-h100-mig-590.48.01-full.csv").readings
    assert reading.remap["remapped_rows_correctable"] is None  # [N/A] under MIG
    assert reading.remap["remapped_rows_uncorrectable"] is None
    assert reading.remap["remap_banks_max"] == 2560  # the histogram is still reported
