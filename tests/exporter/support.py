"""Helpers for the exporter tests: where the fake tools are, an injected clock, and a parsed
view of the exposition."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tests.shared import REPO

FAKEBIN = REPO / "tests" / "fakebin"
NVIDIA_SMI = str(FAKEBIN / "nvidia-smi")
XPU_SMI = str(FAKEBIN / "xpu-smi")
CNMON = str(FAKEBIN / "cnmon")
NPU_SMI = str(FAKEBIN / "npu-smi")
MX_SMI = str(FAKEBIN / "mx-smi")
IXSMI = str(FAKEBIN / "ixsmi")
EFSMI = str(FAKEBIN / "efsmi")
HY_SMI = str(FAKEBIN / "hy-smi")
MTHREADS_GMI = str(FAKEBIN / "mthreads-gmi")
DMESG = str(FAKEBIN / "dmesg")
JOURNALCTL = str(FAKEBIN / "journalctl")


class FakeClock:
    """An injected clock: time moves only when a test says so."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Scrape:
    """The samples of one exposition, looked up by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = (sample.name, frozenset(sample.labels.items()))
                self.samples[key] = sample.value

    def get(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def series(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (n, labels) in self.samples if n == name]


def scrape(registry: CollectorRegistry) -> Scrape:
    return Scrape(generate_latest(registry).decode())


def invocations(log: Path) -> list[list[str]]:
    """argv of every fake-tool call logged to ``log`` (one JSON line each)."""
    if not log.exists():
        return []
    return [json.loads(line)["argv"] for line in log.read_text().splitlines()]


def nvidia_queries(log: Path) -> list[list[str]]:
    """The fake nvidia-smi's probes and CSV queries, without the ``-q`` and ``nvlink -e`` runs
    each tick adds."""
    return [argv for argv in invocations(log) if argv not in (["-q"], ["nvlink", "-e"])]


