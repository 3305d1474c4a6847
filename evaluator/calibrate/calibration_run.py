"""One calibration run: import (or reuse) the history, replay every candidate, choose on the
train part, judge on the test part, report, and write the rule when it is better.

The history goes into a backtest file exactly as ``backtest`` imports it (same inputs, same
refusals of the live database). The base, every candidate and the baselines are replayed over
the whole period by the shared replay (:func:`gpu_health.evaluator.backtest.batch.replay_versions`);
each prediction keeps the tick it was decided at, so the train part can be read as of its end.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from gpu_health.clock import Clock, rfc3339, system_clock
from gpu_health.errors import ConfigError
from gpu_health.evaluator.backtest.backtest_run import (
    BacktestOptions,
    backtest_file,
    bar_callback,
    progress_bar,
    write_json,
)
from gpu_health.evaluator.backtest.batch import replay_versions
from gpu_health.evaluator.backtest.rulesets import Variant, baseline_variants
from gpu_health.evaluator.calibrate.choose import (
    Candidate,
    Objective,
    Verdict,
    choose,
    meets,
    verdict,
)
from gpu_health.evaluator.calibrate.report import base_report, candidate_rows, entry, render_text
from gpu_health.evaluator.calibrate.rulefile import write_rule
from gpu_health.evaluator.calibrate.scores import PartFacts, part_metrics, point
from gpu_health.evaluator.calibrate.space import Space, candidates, space_for
from gpu_health.evaluator.calibrate.split import Split, split_period
from gpu_health.evaluator.config.rules import baseline_files, load_ruleset
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.store.db import Database
from gpu_health.evaluator.store.history.backtest import BACKTEST_FEATURE_TICKS, finish_run


@dataclass(frozen=True, slots=True)
class CalibrateOptions:
    backtest: BacktestOptions  # input, file, period, costs; rule_files = (the base,)
    space: Space
    default_space: bool = True
    train_fraction: float = 0.6
    objective: Objective = field(default_factory=Objective)
    min_test_faults: int = 20
    write_rule: Path | None = None


@dataclass(frozen=True, slots=True)
class _Run:
    """What the replay gave: the versions and their metrics on both parts."""

    base: RuleSet
    found: list[Variant]
    yardsticks: list[Variant]
    split: Split
    train: dict[str, dict[str, Any]]
    seconds: float
    facts: PartFacts


def run_calibrate(options: CalibrateOptions, *, clock: Clock = system_clock,
                  out: TextIO | None = None) -> dict[str, Any]:
    """Everything; returns the report (also written to ``--output`` and printed)."""
    bt = options.backtest
    base_file = bt.rule_files[0]
    base = load_ruleset(base_file, env={})
    options = replace(options, space=space_for(base, options.space, options.default_space))
    found = _dedup([Variant(base), *candidates(base_file, base, options.space,
                                               options.default_space)])
    yardsticks = baseline_variants([Variant(base)], baseline_files(bt.rules_dir))
    with backtest_file(bt, found, clock=clock) as (db, run_id, imported):
        try:
            split = split_period(imported.since, imported.until, options.train_fraction,
                                 base.params.scan_interval)
        except ValueError as exc:
            raise ConfigError(f"--train-fraction: {exc}") from exc
        run = _replay(db, base, found, yardsticks, split, bt)
        report = _report(db, run, options, imported.info, clock)
        finish_run(db, run_id, since=imported.since, until=imported.until, report=report)
    report["rule_file"] = _maybe_write(options, run, report)
    write_json(report, bt.output)
    (out or sys.stdout).write(render_text(report))
    return report


def _dedup(found: list[Variant]) -> list[Variant]:
    return list({v.ruleset.version: v for v in found}.values())


def _replay(db: Database, base: RuleSet, found: list[Variant], yardsticks: list[Variant],
            split: Split, bt: BacktestOptions) -> _Run:
    began = time.perf_counter()
    rulesets = [v.ruleset for v in (*found, *yardsticks)]
    with progress_bar(len(rulesets), "replay versions", bt.progress) as bar:
        replay_versions(db, rulesets, split.since, split.until,
                        chunk=BACKTEST_FEATURE_TICKS, progress=bar_callback(bar))
    facts = PartFacts(db)
    train = {rs.version: part_metrics(db, rs, split.train, bt.costs, facts) for rs in rulesets}
    return _Run(base, found, yardsticks, split, train, time.perf_counter() - began, facts)


@dataclass(frozen=True, slots=True)
class _Judged:
    """The test part: the base's, the chosen version's and the baselines' numbers, and the
    verdict they give."""

    base: dict[str, Any]
    chosen: tuple[RuleSet, dict[str, Any]] | None
    baselines: list[tuple[RuleSet, dict[str, Any]]]
    verdict: Verdict


def _judge(db: Database, run: _Run, options: CalibrateOptions,
           pick: Candidate | None) -> _Judged:
    rulesets = {v.ruleset.version: v.ruleset for v in (*run.found, *run.yardsticks)}

    def test(rs: RuleSet) -> dict[str, Any]:
        return part_metrics(db, rs, run.split.test, options.backtest.costs, run.facts)

    base = test(run.base)
    chosen = None if pick is None else (rulesets[pick.version], test(rulesets[pick.version]))
    yard = [(v.ruleset, test(v.ruleset)) for v in run.yardsticks]
    status = verdict(
        test_first_faults=base["first_fault"]["faulty_cards"],
        min_test_faults=options.min_test_faults, objective=options.objective,
        chosen=None if chosen is None else point(chosen[0].version, chosen[1]),
        base=point(run.base.version, base), baselines=[point(rs.version, m) for rs, m in yard])
    return _Judged(base, chosen, yard, status)


def _report(db: Database, run: _Run, options: CalibrateOptions, info: dict[str, Any],
            clock: Clock) -> dict[str, Any]:
    base, costs = run.base, options.backtest.costs
    ranked = sorted((Candidate(v.ruleset.version, len(_changed(base, v.ruleset)),
                               run.train[v.ruleset.version]) for v in run.found),
                    key=lambda c: _order(options.objective, c))
    met = {c.version for c in ranked if meets(options.objective, c.train)}
    judged = _judge(db, run, options, choose(options.objective, ranked))
    return base_report(
        generated_at=rfc3339(clock()), database=str(options.backtest.db_path),
        period={"since": rfc3339(run.split.since), "until": rfc3339(run.split.until)},
        split={"train_fraction": options.train_fraction,
               "train": run.split.train.as_dict(
                   run.train[base.version]["first_fault"]["faulty_cards"]),
               "test": run.split.test.as_dict(judged.base["first_fault"]["faulty_cards"])},
        objective={**options.objective.as_dict(), "text": options.objective.text()},
        min_test_faults=options.min_test_faults,
        search={"default": options.default_space,
                "space": dict(options.space), "candidates": len(run.found)},
        costs=None if costs is None else costs.as_dict(),
        verdict=judged.verdict.as_dict(),
        base=entry(base, base, run.train[base.version], judged.base),
        chosen=None if judged.chosen is None else entry(
            judged.chosen[0], base, run.train[judged.chosen[0].version], judged.chosen[1]),
        baselines=[entry(rs, base, run.train[rs.version], m) for rs, m in judged.baselines],
        candidates=candidate_rows(run.found, ranked, met),
        rule_file=None, input=info, replay={"seconds": round(run.seconds, 2)},
    )


def _changed(base: RuleSet, other: RuleSet) -> list[str]:
    a, b = base.params.frozen_dict(), other.params.frozen_dict()
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _order(objective: Objective, c: Candidate) -> tuple[int, float, float, int, str]:
    """Candidates as the report lists them: those meeting the objective first, best first."""
    first, saved = c.train["first_fault"], c.train["gpu_hours_saved"]
    key = (saved if objective.kind == "cost" else first["recall"]) or 0.0
    return (0 if meets(objective, c.train) else 1, -key, -(first["precision"] or 0.0),
            c.changes, c.version)


def _maybe_write(options: CalibrateOptions, run: _Run, report: dict[str, Any]) -> str | None:
    """The rule file, written only for a ``better`` verdict."""
    if options.write_rule is None or report["verdict"]["status"] != "better":
        return None
    chosen = next(v.ruleset for v in run.found
                  if v.ruleset.version == report["chosen"]["version"])
    return str(write_rule(options.write_rule, chosen, header(report)))


def header(report: dict[str, Any]) -> list[str]:
    """The comment block of the written rule: data, split, objective, numbers."""
    from gpu_health.evaluator.calibrate.report import describe

    split, chosen, base = report["split"], report["chosen"], report["base"]
    changed = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in chosen["changes"].items())
    return [
        f"gpu-health rule set calibrated by `gpu-health-evaluator calibrate` "
        f"({report['generated_at']}).",
        f"Base: {base['version']}; changed: {changed}.",
        f"Data: {report['input'].get('summary', report['input'].get('kind'))}.",
        f"Split by time: train {split['train']['since']} .. {split['train']['until']} "
        f"({split['train']['first_faults']} first faults), test {split['test']['since']} .. "
        f"{split['test']['until']} ({split['test']['first_faults']} first faults).",
        f"Objective: {report['objective']['text']} (train part only).",
        f"Train: {describe(chosen['train'])}.",
        f"Test (not tuned on): {describe(chosen['test'])}.",
        f"Base on test: {describe(base['test'])}.",
        f"Verdict: {report['verdict']['reason']}.",
        "Run it as a shadow (rules.shadow) before making it active; docs/calibration.md.",
        "Frozen once it has predictions: to change a threshold, make a new version.",
    ]
