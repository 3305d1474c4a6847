"""The backtest report: per version, the live statistics plus base rates, as JSON and text.

Every precision, recall and F1 comes from the code behind the live ``prediction-stats`` API
(:func:`gpu_health.evaluator.stats.document.prediction_stats` is
:func:`~gpu_health.evaluator.store.statistics.stats_queries.raw_stats` then
:func:`~gpu_health.evaluator.stats.document.stats_document`; the report calls the two itself to keep
the faults), with its null rules (null below ``stats_min_matured`` matured predictions or
``stats_min_observed_days`` observed days; recall null without a fault). Each version is
measured on the file's samples and its OWN predictions (``rule_version``), over the replayed
period. Its row shows the window it predicts with; the full statistics (both windows, the
missed cards) stay in ``stats``.

Two classes everywhere precision and recall appear (``by_class``): ``first_fault``, predictions
made on a card with no fault observed at or before t0 (early warnings), and ``repeat``, made on
a card that had already failed. The baselines of ``rules/baselines/`` (a naive "any new
correctable error in 24 h" and "repeat after any uncorrectable increase") are replayed by the
same engine on the same data and reported in ``baselines`` with the same shape; each version
gets its ``lift`` over each baseline of its window per class (its value / the baseline's; null
when either is null or the baseline's is 0), a ``comparisons`` entry per baseline (the rule of
:mod:`gpu_health.evaluator.backtest.compare`: a first-fault ratio higher beyond chance, the other
not lower beyond chance, with both differences and their 95% intervals), and a ``flag`` when a
baseline beats it beyond chance or it cannot be compared with any. Each class lists the faults
its windows ``caught`` (``node/gpu@time``), from which a paired recall is counted.

With costs (``--cost-failure``, ``--cost-mitigation``, ``--mitigation-time``), every version and
class also gets ``gpu_hours_saved``
(:func:`gpu_health.evaluator.backtest.compare.gpu_hours_saved`), and the warning lead times it
is computed from (fault minus the moment the prediction was made).

Base rates, the same for every version: cards, monitorable cards, observed card-days (exposure),
cards with a fault, faults preceded by any correctable error at all (a correctable count above 0
on the card before its first fault: the recall ceiling of any correctable-ECC rule). Per version
also: the lead time from a prediction's t0 to the first fault it predicted (min/median/max), and
the predictions per signal layer and per signal.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from gpu_health.clock import rfc3339
from gpu_health.contract import SOURCE_REAL
from gpu_health.evaluator.backtest.compare import Costs, Point, compare, gpu_hours_saved
from gpu_health.evaluator.backtest.replay import ReplaySummary
from gpu_health.evaluator.backtest.rulesets import Variant
from gpu_health.evaluator.stats.document import DISCLAIMER, stats_document
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest_queries import (
    card_count,
    counts_by,
    lead_times,
    preceded_by_correctable,
)
from gpu_health.evaluator.store.statistics.stats_queries import Fault, raw_stats

PAPER = {
    "source": "Wu et al., \"Removing Obstacles before Breaking Through the Memory Wall: A Close "
              "Look at HBM Errors in the Field\", USENIX ATC '24 (Calchas)",
    "granularity": "server",
    "precision": 0.33, "recall": 0.57, "f1": 0.42,
}


def days_summary(values: Sequence[timedelta]) -> dict[str, Any]:
    days = [v.total_seconds() / 86400 for v in values]
    if not days:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(days), "min": round(min(days), 3),
            "median": round(statistics.median(days), 3), "max": round(max(days), 3)}


def caught(faults: Sequence[Fault], window: int, first: bool) -> list[str]:
    """The faults of one class (first or repeat) a window of ``window_days`` held, as
    ``node/gpu@time`` (sorted): which faults two versions both caught, for a paired recall."""
    return sorted(f"{f.node_id}/{f.gpu_index}@{rfc3339(f.first_fault_at)}" for f in faults
                  if window in f.predicted_by and f.first == first)


def class_savings(db: Database, version: str, window: int, faults: Sequence[Fault],
                  predictions: dict[str, dict[str, int]],
                  costs: Costs | None) -> dict[str, float | None]:
    """GPU-hours saved per class (None each without costs): faults of the class a window of
    ``version`` held, warned of at least the mitigation time ahead."""
    saved: dict[str, float | None] = {}
    for cls, counts in predictions.items():
        held = [f.event for f in faults
                if window in f.predicted_by and f.first == (cls == "first_fault")]
        leads = lead_times(db, version, held, warned=True) if costs else []
        saved[cls] = gpu_hours_saved(costs, leads, sum(counts.values()))
    return saved


def version_report(db: Database, variant: Variant, summary: ReplaySummary,
                   since: datetime, until: datetime,
                   costs: Costs | None = None) -> tuple[dict[str, Any], list[Fault]]:
    """One version's row (and the period's faults, for the base rates)."""
    rs = variant.ruleset
    window = rs.params.window_days
    raw = raw_stats(db, since=since, until=until, source=SOURCE_REAL, nodes=None,
                    fault_xids=rs.params.fault_xids, rule_version=rs.version)
    stats = stats_document(raw, source=SOURCE_REAL, since=since, until=until, ruleset=rs)
    predicted = [f.event for f in raw.faults if window in f.predicted_by]
    lead = lead_times(db, rs.version, predicted)
    own = next(w for w in stats["windows"] if w["window_days"] == window)
    saved = class_savings(db, rs.version, window, raw.faults,
                          {cls: c["predictions"] for cls, c in own["by_class"].items()}, costs)
    row = {
        "version": rs.version,
        "label": variant.label,
        "base_version": rs.base_version,
        "origin": rs.origin,
        "swept": dict(variant.swept),
        "params": rs.params.as_dict(),
        "window_days": window,
        **{k: own[k] for k in ("predictions", "matured", "precision", "recall", "f1",
                               "sufficient", "note", "faulty_cards", "predicted_faulty_cards",
                               "missed_cards")},
        "by_class": {cls: {**{k: stats[k] for k in CLASS_FIELDS},
                           "gpu_hours_saved": saved[cls],
                           "caught": caught(raw.faults, window, cls == "first_fault")}
                     for cls, stats in own["by_class"].items()},
        "lead_time_days": days_summary(lead),
        "gpu_hours_saved": None if costs is None else round(
            sum(v or 0.0 for v in saved.values()), 6),
        "by_layer": counts_by(db, rs.version, "layer"),
        "by_signal": counts_by(db, rs.version, "signal"),
        "replay": {"ticks": summary.ticks, "evaluated_ticks": summary.evaluated_ticks,
                   "backfill_ticks": summary.backfill_ticks, "skipping": summary.skipping,
                   "cards_replayed": summary.cards,
                   "seconds": round(summary.seconds, 2)},
        "stats": stats,
    }
    return row, list(raw.faults)


def build_report(db: Database, variants: Sequence[Variant], summaries: Sequence[ReplaySummary],
                 *, input_info: dict[str, Any], since: datetime, until: datetime,
                 generated_at: datetime, database: str,
                 baselines: Sequence[tuple[Variant, ReplaySummary]] = (),
                 costs: Costs | None = None) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    faults: list[Fault] = []
    for variant, summary in zip(variants, summaries, strict=True):
        row, faults = version_report(db, variant, summary, since, until, costs)
        rows.append(row)
    yardsticks = [version_report(db, v, s, since, until, costs)[0] for v, s in baselines]
    for row in rows:
        compare_with_baselines(
            row, [b for b in yardsticks if b["window_days"] == row["window_days"]])
    first = rows[0]["stats"]["windows"][0] if rows else {}
    preceded = preceded_by_correctable(db, [f.event for f in faults])
    return {
        "tool": "gpu-health-evaluator backtest",
        "generated_at": rfc3339(generated_at),
        "database": database,
        "period": {"since": rfc3339(since), "until": rfc3339(until),
                   "days": round((until - since).total_seconds() / 86400, 3)},
        "input": input_info,
        "base_rates": {
            "cards": card_count(db),
            "monitorable_cards": first.get("monitorable_cards"),
            "observed_card_days": first.get("exposure_card_days"),
            "observed_days": first.get("observed_days"),
            "cards_with_fault": len(faults),
            "faults_preceded_by_correctable": preceded,
            "recall_ceiling_correctable": round(preceded / len(faults), 4) if faults else None,
        },
        "versions": rows,
        "baselines": yardsticks,
        "reference": PAPER if input_info.get("preset") == "calchas" else None,
        "costs": None if costs is None else costs.as_dict(),
        "disclaimer": DISCLAIMER,
    }


CLASS_FIELDS = ("predictions", "matured", "precision", "precision_ci95", "recall", "recall_ci95",
                "f1", "sufficient", "note", "faulty_cards", "predicted_faulty_cards",
                "missed_cards")


def _lift(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None or base == 0 else round(value / base, 4)


def point(row: dict[str, Any]) -> Point:
    """A report row's first-fault precision and recall, and its GPU-hours saved."""
    first = row["by_class"]["first_fault"]
    return Point(row.get("label", row["version"]), first["precision"], first["recall"],
                 row.get("gpu_hours_saved"), hits=first["predictions"]["hit"],
                 matured=first["matured"], faulty=first["faulty_cards"],
                 caught=frozenset(first.get("caught", ())),
                 definition=tuple(row.get("params", {}).get("fault_xids", ())))


def compare_with_baselines(row: dict[str, Any], baselines: Sequence[dict[str, Any]]) -> None:
    """Add ``lift`` (per baseline, per class), ``comparisons`` and ``flag`` to a version's
    row. Flagged when a baseline beats it (:func:`gpu_health.evaluator.backtest.compare.compare`),
    or when it can be compared with none of them."""
    row["lift"] = {
        b["version"]: {cls: {k: _lift(row["by_class"][cls][k], b["by_class"][cls][k])
                             for k in ("precision", "recall")} for cls in row["by_class"]}
        for b in baselines}
    results = [(b, compare(point(row), point(b))) for b in baselines]
    row["comparisons"] = [{"baseline": b["version"], **c.as_dict()} for b, c in results]
    beaten = [c.reason for _, c in results if c.winner == "b"]
    if beaten:
        row["flag"] = "a baseline beats it: " + "; ".join(beaten)
    elif results and all(c.by == "not_comparable" for _, c in results):
        parts = (part for _, c in results
                 for part in c.reason.removeprefix("not comparable: ").split("; "))
        row["flag"] = "not comparable with any baseline: " + "; ".join(dict.fromkeys(parts))
    else:
        row["flag"] = None


def _num(value: Any) -> str:
    if value is None:
        return "null"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _class_cell(stats: dict[str, Any]) -> str:
    return f"{stats['matured']} {_num(stats['precision'])}/{_num(stats['recall'])}"


def _table_row(label: str, v: dict[str, Any]) -> tuple[str, ...]:
    p, lead = v["predictions"], v["lead_time_days"]
    layers = {k: sum(s.values()) for k, s in v["by_layer"].items()}
    return (label, f"{v['window_days']}d", str(p["pending"]), str(p["hit"]), str(p["miss"]),
            str(p["voided"]), _num(v["precision"]), _num(v["recall"]), _num(v["f1"]),
            _class_cell(v["by_class"]["first_fault"]), _class_cell(v["by_class"]["repeat"]),
            "/".join(_num(lead[k]) for k in ("min", "median", "max")),
            str(layers.get("strong", 0)), str(layers.get("trend", 0)))


def summary_sentence(v: dict[str, Any]) -> str:
    """One plain sentence on what a version predicted: first faults caught, and whether its
    hits were warnings or came after the card had already failed."""
    first, repeat = v["by_class"]["first_fault"], v["by_class"]["repeat"]
    label, faults, caught = v["label"], first["faulty_cards"], first["predicted_faulty_cards"]
    if faults == 0:
        head = f"{label}: no card had its first fault in the period, so it shows nothing " \
               "about predicting one"
    elif faults == 1:
        head = f"{label} {'predicted' if caught else 'did not predict'} the one first fault"
    else:
        head = f"{label} predicted {'none' if caught == 0 else caught} of the {faults} first " \
               "faults"
    early, late = first["predictions"]["hit"], repeat["predictions"]["hit"]
    if early + late == 0:
        tail = f"none of its {v['matured']} matured predictions was a hit"
    elif early == 0:
        tail = f"every hit ({late}) was on a card that had already failed"
    else:
        tail = f"{early} of its {early + late} hits came before a card's first fault"
    return f"{head}; {tail}."


def render_text(report: dict[str, Any]) -> str:
    """The readable table printed on stdout."""
    period, base, info = report["period"], report["base_rates"], report["input"]
    lines = [
        f"gpu-health backtest {period['since']} .. {period['until']} ({period['days']:g} days)",
        f"input: {info.get('summary', info.get('kind'))}",
        *([f"database: {report['database']} (kept: replay it again with --db)"]
          if report.get("database") else []),
        f"base rates: {base['cards']} cards ({base['monitorable_cards']} monitorable), "
        f"{_num(base['observed_card_days'])} observed card-days, {base['cards_with_fault']} "
        f"cards with a fault, {base['faults_preceded_by_correctable']} of them preceded by a "
        f"correctable error (recall ceiling of a correctable-ECC rule: "
        f"{_num(base['recall_ceiling_correctable'])})",
        "",
    ]
    head = ("version", "win", "pend", "hit", "miss", "void", "precision", "recall", "F1",
            "1st-fault n P/R", "repeat n P/R", "lead d min/med/max", "strong", "trend")
    costs = report.get("costs") is not None
    table: list[tuple[str, ...]] = [(*head, "GPU-h saved") if costs else head]
    yardsticks = [("baseline " + b["label"], b) for b in report.get("baselines", [])]
    for label, v in [(v["label"], v) for v in report["versions"]] + yardsticks:
        row = _table_row(label, v)
        table.append((*row, _num(v["gpu_hours_saved"])) if costs else row)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in table]
    lines += ["", *(summary_sentence(v) for v in report["versions"])]
    lines += ["", *(f"{v['label']}: {v['note']}" for v in report["versions"])]
    lines += [f"{v['label']}: FLAG {v['flag']}" for v in report["versions"] if v.get("flag")]
    lines += [f"{v['label']} vs baseline {c['baseline']}: {c['reason']}"
              for v in report["versions"] if not v.get("flag")
              for c in v.get("comparisons", ())]
    if report.get("reference"):
        ref = report["reference"]
        lines.append(f"reference ({ref['granularity']} level, the paper's own ML model): "
                     f"precision {ref['precision']}, recall {ref['recall']}, F1 {ref['f1']}")
    lines += [f"assumption: {a}" for a in info.get("assumptions", ())]
    lines.append(report["disclaimer"])
    return "\n".join(lines) + "\n"
