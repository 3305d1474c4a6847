"""The VendorSource contract: one class per vendor tool, listed in ``gpu_health.exporter.sources``.

A source knows its tool (the command-line flag that configures it and its default binary
name), runs it through the shared :class:`~gpu_health.runner.ToolRunner`, and hands the output
to its pure parser. ``collect`` raises a ``GpuHealthError`` subclass on failure (the loop counts
it by ``reason``); it never swallows one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import datetime
from typing import ClassVar

from prometheus_client.metrics_core import Metric

from gpu_health.runner import ToolRunner

from ..tool_output import ParsedOutput

# Error reasons every source can produce; the loop pre-creates these series at 0 so alert
# rules can use increase() from the first failure on.
COMMON_ERROR_REASONS: tuple[str, ...] = (
    "timeout",
    "exit_code",
    "oversize",
    "parse",
    "not_found",
    "exec",
    "invalid_value",
    "internal",
    "duplicate_uuid",  # one UUID at two indexes: both exported, the tool's output is suspect
)


class VendorSource(ABC):
    """One vendor tool. A ``collect`` normally runs one query covering all cards (NVIDIA adds a
    cached probe, MetaX needs two commands, Ascend one ECC query per card: npu-smi has no
    all-cards ECC query)."""

    vendor: ClassVar[str]
    flag: ClassVar[str]  # the command-line flag naming the binary, e.g. "--nvidia-smi"
    default_binary: ClassVar[str]
    error_reasons: ClassVar[tuple[str, ...]] = COMMON_ERROR_REASONS

    def __init__(self, binary: str, runner: ToolRunner) -> None:
        self.binary = binary
        self.runner = runner

    @abstractmethod
    def collect(self, now: datetime) -> ParsedOutput:
        """Run the tool once and parse it; ``now`` is the tick's time (for probe caches)."""

    def extra_metrics(self) -> Iterable[Metric]:
        """Vendor-specific self-metric families (built fresh on every scrape)."""
        return ()


class TableSource(VendorSource):
    """A tool run once per tick with fixed ``args`` (none for a default table), one parser.
    A subclass names the parser: ``parse = staticmethod(parsers.<vendor>.parse_table)``."""

    args: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def parse(self, text: str) -> ParsedOutput:
        """The vendor's pure parser applied to the tool's stdout."""

    def collect(self, now: datetime) -> ParsedOutput:
        return self.parse(self.runner.run(self.binary, self.args).require_success().stdout)
