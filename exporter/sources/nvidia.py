"""NVIDIA cards through ``nvidia-smi``: probe the field list, one CSV query for all cards, then
``nvidia-smi -q`` for the PCIe replay counters, which no ``--query-gpu`` field carries.

The probe (``--help-query-gpu``) is cached for 30 minutes: field names are fixed per driver, and
a driver upgrade restarts the node's GPU stack anyway. Only candidate fields the help lists are
queried, because a single unknown name fails the whole query (exit 2). If the driver still
refuses a listed field, the field it names is dropped until the next probe (at most 30 minutes
later, or at once when the help text changes), so the next tick recovers without it instead of
failing forever, and a refusal that was transient (a driver reload, MIG reconfiguration) does
not switch the field off for the life of the process.

``-q`` prints every section of every card (0.13 s on one H200 with driver 580, against 0.03 s
for the CSV query; tests/fixtures/nvidia-h200-580.159.04) and no ``-d`` choice narrows it to
PCI. It runs after the CSV query succeeded, under what is left of the tool timeout; when it
fails the cards are still exported with their replay counters unknown, and the failure is
counted by reason like a failed collection's.

``nvidia-smi nvlink -e`` then reads the NVLink error counters per link, under what is left. A
failure costs only those counters, is counted the same way, and pauses the read until the
next probe (at most 30 minutes): a node whose driver has no NVLink answer to give (unknown from
any published run) then costs one failed call per probe, not one per tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gpu_health.errors import CollectError, GpuHealthError, ParseError, ToolNotFound
from gpu_health.runner import ToolRunner

from ..parsers import nvidia, nvidia_nvlink, nvidia_q
from ..parsers.cells import CellReader
from ..tool_output import CardReading, Failure, ParsedOutput
from .base import COMMON_ERROR_REASONS, VendorSource

log = logging.getLogger(__name__)

PROBE_TTL = timedelta(minutes=30)
FIELD_SUPPORTED_METRIC = "gpu_health_exporter_nvidia_field_supported"


@dataclass(frozen=True, slots=True)
class _Probe:
    fields: nvidia.HelpFields
    at: datetime


class NvidiaSource(VendorSource):
    """Probe (cached), then one ``--query-gpu`` CSV query covering every card."""

    vendor = nvidia.VENDOR
    flag = "--nvidia-smi"
    default_binary = "nvidia-smi"
    error_reasons = (*COMMON_ERROR_REASONS, "probe")

    def __init__(self, binary: str, runner: ToolRunner, *, probe_ttl: timedelta = PROBE_TTL):
        super().__init__(binary, runner)
        self.probe_ttl = probe_ttl
        self._probe: _Probe | None = None
        self._rejected: frozenset[str] = frozenset()
        self._nvlink_failed_at: datetime | None = None

    def collect(self, now: datetime) -> ParsedOutput:
        started = time.monotonic()
        columns = self._columns(now)
        result = self.runner.run(
            self.binary, (f"--query-gpu={','.join(columns)}", "--format=csv,noheader,nounits")
        )
        if result.returncode != 0:
            self._note_rejected(nvidia.rejected_field(result.stdout), columns)
            result.require_success()
        output = nvidia.parse_query(result.stdout, columns)
        output = self._add_replays(output, self.runner.timeout_s - (time.monotonic() - started))
        return self._add_nvlink(output, now, self.runner.timeout_s - (time.monotonic() - started))

    def _add_replays(self, output: ParsedOutput, left_s: float) -> ParsedOutput:
        """The readings with ``-q``'s replay counters."""
        return self._follow_up(output, ("-q",), "PCIe replays", left_s, lambda cards, text, r: (
            nvidia_q.with_replays(cards, nvidia_q.parse_replays(text, r))))[0]

    def _add_nvlink(self, output: ParsedOutput, now: datetime, left_s: float) -> ParsedOutput:
        """The readings with ``nvlink -e``'s counters. A failure of the command itself (not
        the time the commands before took) pauses the read until the next probe is due."""
        failed = self._nvlink_failed_at  # as the probe's age: a clock stepped back ends the pause
        if failed is not None and timedelta(0) <= now - failed < self.probe_ttl:
            return output
        output, failure = self._follow_up(
            output, ("nvlink", "-e"), "NVLink errors", left_s, lambda cards, text, r: (
                nvidia_nvlink.with_nvlink(cards, nvidia_nvlink.parse_nvlink_errors(text, r))))
        self._nvlink_failed_at = None
        if failure is not None and left_s > 0:
            self._nvlink_failed_at = now
            log.info("nvidia-smi nvlink -e failed (%s); not asked again before %s",
                     failure, (now + self.probe_ttl).isoformat())
        return output

    def _follow_up(self, output: ParsedOutput, args: tuple[str, ...], what: str, left_s: float,
                   read: Callable[[tuple[CardReading, ...], str, CellReader],
                                  tuple[CardReading, ...]]
                   ) -> tuple[ParsedOutput, str | None]:
        """``output`` with what ``nvidia-smi <args>`` adds to its readings (``read``: the
        readings and its text -> the readings), run under ``left_s``, and None; when it fails,
        times out or prints what is not its answer, ``output`` unchanged but for one failure,
        and its reason."""
        command = "nvidia-smi " + " ".join(args)
        reader = CellReader()
        try:
            if left_s <= 0:
                raise CollectError(f"no time left for {command}", reason="timeout")
            text = self.runner.run(self.binary, args, timeout_s=left_s).require_success()
            readings = read(output.readings, text.stdout, reader)
        except (CollectError, ParseError) as exc:
            failure = Failure(exc.reason, f"{command} ({what}): {exc}")
            return replace(output, failures=(*output.failures, failure)), exc.reason
        return replace(output, readings=readings,
                       anomalies=(*output.anomalies, *reader.anomalies)), None

    def extra_metrics(self) -> Iterable[Metric]:
        probe = self._probe
        if probe is None:
            return ()  # never probed: support is unknown, not "0"
        family = GaugeMetricFamily(
            FIELD_SUPPORTED_METRIC,
            "1 when the last nvidia-smi --help-query-gpu probe listed this candidate field (and "
            "the driver accepted it), else 0.",
            labels=["field"],
        )
        for field in nvidia.PROBED_FIELDS:
            usable = probe.fields.supports(field) and field not in self._rejected
            family.add_metric([field], 1.0 if usable else 0.0)
        return (family,)

    def _columns(self, now: datetime) -> tuple[str, ...]:
        try:
            return nvidia.plan_columns(self._fields(now), self._rejected)
        except ToolNotFound:
            raise
        except GpuHealthError as exc:
            raise CollectError(f"nvidia-smi field probe failed: {exc}", reason="probe") from exc

    def _fields(self, now: datetime) -> nvidia.HelpFields:
        probe = self._probe
        if probe is not None and timedelta(0) <= now - probe.at < self.probe_ttl:
            return probe.fields
        result = self.runner.run(self.binary, ("--help-query-gpu",)).require_success()
        fields = nvidia.parse_help(result.stdout)
        if self._rejected:
            log.info("nvidia-smi probe: querying the refused field(s) %s again",
                     ", ".join(sorted(self._rejected)))
        self._rejected = frozenset()  # every probe gives every listed field a chance again
        if probe is None or probe.fields != fields:
            missing = [f for f in nvidia.PROBED_FIELDS if not fields.supports(f)]
            log.info("nvidia-smi probe: %d fields listed; candidate fields not listed: %s",
                     len(fields.names), ", ".join(missing) or "none")
        self._probe = _Probe(fields, now)
        return fields

    def _note_rejected(self, field: str | None, columns: tuple[str, ...]) -> None:
        if field is None or field not in columns or field in nvidia.REQUIRED_IDENTITY:
            return
        log.warning("nvidia-smi refused field %r although its help lists it; querying "
                    "without it until the next probe (at most %s)", field, self.probe_ttl)
        self._rejected = self._rejected | {field}
