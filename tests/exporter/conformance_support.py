"""Shared by the conformance modules: a case, a check, and running a source on a capture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_health.exporter.sources.base import VendorSource
from gpu_health.exporter.tool_output import CardReading, Counters, ParsedOutput
from gpu_health.runner import ToolRunner

from .support import FakeClock


@dataclass(frozen=True)
class Case:
    check: Check
    paths: tuple[Path, ...]
    reason: str = ""


Check = Callable[[Case, dict[str, str], FakeClock], None]


def collect(
    cls: type[VendorSource], binary: str, env: dict[str, str], clock: FakeClock,
    **fake_env: str,
) -> ParsedOutput:
    """One collection of ``cls`` through its fake tool, with ``fake_env`` added."""
    runner = ToolRunner(timeout_s=30, max_output_bytes=1 << 20, env={**env, **fake_env})
    return cls(binary, runner).collect(clock())


def identities(out: ParsedOutput) -> list[tuple[int, str | None, str, str | None]]:
    """(gpu, uuid, model, bus) of every reading, in order."""
    return [(r.gpu, r.uuid, r.model, r.pci_bus_id) for r in out.readings]


def known(reading: CardReading | Counters) -> dict[str, int]:
    """The counters (of a reading, or a counters mapping) that are known."""
    counters = reading.counters if isinstance(reading, CardReading) else reading
    return {key: value for key, value in counters.items() if value is not None}
