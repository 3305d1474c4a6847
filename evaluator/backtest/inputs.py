"""Where the history came from, and what its rows assume, for the report (``input``).

A backtest's numbers are only as good as the assumptions that turned the source into samples;
the report states them next to the numbers instead of leaving them in the docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpu_health.contract import COUNTER_KEYS
from gpu_health.evaluator.backtest.events import EventColumns, EventFile
from gpu_health.evaluator.backtest.events_import import EventsWritten
from gpu_health.evaluator.backtest.prometheus import PrometheusImport, PrometheusRange
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_import import sample_span

NO_XID = ("no XID history is imported: only uncorrectable-ECC increases are fault events, "
          "whatever a rule set's fault_xids say")


@dataclass(frozen=True, slots=True)
class EventsSource:
    path: Path
    columns: EventColumns
    preset: str | None
    step: timedelta
    lead_in: timedelta
    observe_after: timedelta | None = None  # None: the longest hit window of the rule sets


def _span(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def events_info(source: EventsSource, file: EventFile, written: EventsWritten,
                observe_after: timedelta, keepalive: timedelta) -> dict[str, Any]:
    cols = source.columns
    cards, rows, index_rule = written.cards, written.rows, written.gpu_index_rule
    return {
        "kind": "events",
        "source": str(source.path),
        "preset": source.preset,
        "columns": {"node": list(cols.node), "gpu": cols.gpu, "time": cols.time,
                    "type": cols.type, "correctable": sorted(cols.correctable),
                    "uncorrectable": sorted(cols.uncorrectable), "ignored": sorted(cols.ignore)},
        "rows": file.rows,
        "events": file.events,
        "events_by_type": file.by_type,
        "ignored_events": file.ignored,
        "cards": cards,
        "samples_written": rows,
        "gpu_index_rule": index_rule,
        "step_seconds": source.step.total_seconds(),
        "keepalive_seconds": keepalive.total_seconds(),
        "lead_in_seconds": source.lead_in.total_seconds(),
        "observe_after_days": observe_after.total_seconds() / 86400,
        "summary": f"events {source.path}{f' ({source.preset} preset)' if source.preset else ''}"
                   f": {file.rows} rows, {file.events} events, {cards} cards, "
                   f"{rows} samples written",
        "assumptions": [
            f"a card is observed only from {_span(source.lead_in)} before its first event "
            f"until {_span(observe_after)} (one hit window) after its last: keep-alive rows "
            "exist only in that span; outside it the card has no samples (unknown, never "
            "'healthy')",
            f"readings every {_span(source.step)}; an event is seen by the first reading at or "
            "after it; counts are cumulative from 0 at the start of the observed span",
            f"rows follow the live write rule: change-only plus a keep-alive row every "
            f"{_span(keepalive)}",
            "retired pages and row-remap counters are unknown (events carry none); UUIDs are "
            "unknown, so card swaps cannot be detected",
            f"gpu_index: {index_rule}",
            NO_XID,
        ],
    }


def prometheus_info(source: PrometheusRange, stats: PrometheusImport, db: Database,
                    keepalive: timedelta) -> dict[str, Any]:
    ms = source.metrics
    _, _, rows = sample_span(db)
    mapping = {key: " + ".join(ms.counters.get(key, ())) or None for key in COUNTER_KEYS}
    identity = (f"node from label {source.node_label!r}" if source.node_label else
                f"node from label(s) {', '.join(ms.node_labels) or '(none)'}")
    return {
        "kind": "prometheus",
        "source": source.url,
        "metrics": ms.name,
        "selector": source.selector or None,
        "mapping": mapping,
        "step_seconds": source.step.total_seconds(),
        "keepalive_seconds": keepalive.total_seconds(),
        "requests": stats.requests,
        "splits": stats.splits,
        "series": stats.series,
        "readings": stats.readings,
        "cards": len(stats.cards),
        "samples_written": rows,
        "dropped": stats.dropped,
        "absent": stats.absent,
        "summary": f"prometheus {source.url} ({ms.name} metric names): {stats.series} series, "
                   f"{len(stats.cards)} cards, {stats.readings} readings, {rows} samples written"
                   + (f"; not read: {stats.unread()}" if stats.absent or stats.dropped else ""),
        "assumptions": [
            f"readings every {_span(source.step)} (the scrape interval) from query_range; a "
            "step without a value (no sample within Prometheus's lookback, or a stale series) "
            "is a gap: no reading, no row, never a zero",
            f"rows follow the live write rule: change-only plus a keep-alive row every "
            f"{_span(keepalive)}",
            f"{identity}, else the host of 'instance'",
            "a value that is NaN, negative, fractional or out of range is unknown; two series "
            "of one card and metric that disagree make the metric unknown",
            NO_XID,
        ],
    }
