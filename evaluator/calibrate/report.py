"""The calibration report: JSON for machines, sentences for people, the verdict first.

JSON: ``split.{train,test}.{since,until,first_faults}``; ``base``, ``chosen`` (null when no
candidate met the objective) and ``baselines[]``, each with ``version``, ``params`` and
``train``/``test`` metrics (:mod:`gpu_health.evaluator.calibrate.scores`); ``candidates[]`` with
their train metrics; ``verdict.{status,reason}``; ``rule_file`` (null unless written). The text on
stdout says the same: the verdict, then the numbers of base, chosen and baselines on both parts
with intervals, then the best candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu_health.evaluator.backtest.rulesets import Variant
from gpu_health.evaluator.calibrate.choose import Candidate
from gpu_health.evaluator.rules.params import FROZEN_KEYS
from gpu_health.evaluator.rules.ruleset import RuleSet
from gpu_health.evaluator.stats.document import DISCLAIMER

TOP_CANDIDATES = 10


def changes(base: RuleSet, other: RuleSet) -> dict[str, list[Any]]:
    """Frozen parameters that differ: {key: [base value, other value]}."""
    a, b = base.params.as_dict(), other.params.as_dict()
    return {k: [_plain(a[k]), _plain(b[k])] for k in FROZEN_KEYS if a[k] != b[k]}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def entry(rs: RuleSet, base: RuleSet, train: dict[str, Any],
          test: dict[str, Any] | None) -> dict[str, Any]:
    return {"version": rs.version, "params": rs.params.as_dict(), "changes": changes(base, rs),
            "train": train, "test": test}


def candidate_rows(found: Sequence[Variant], ranked: Sequence[Candidate],
                   met: set[str]) -> list[dict[str, Any]]:
    by_version = {v.ruleset.version: v for v in found}
    return [{"version": c.version, "label": by_version[c.version].label,
             "searched": dict(by_version[c.version].swept), "changes": c.changes,
             "meets_objective": c.version in met, "train": c.train} for c in ranked]


def _num(value: Any) -> str:
    if value is None:
        return "null"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _ci(interval: list[float] | None) -> str:
    return "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def describe(metrics: dict[str, Any] | None) -> str:
    """First-fault precision and recall with intervals and counts, in one phrase."""
    if metrics is None:
        return "not measured"
    f = metrics["first_fault"]
    p = f["predictions"]
    text = (f"first-fault precision {_num(f['precision'])}{_ci(f['precision_ci95'])} "
            f"({p['hit']} hit / {f['matured']} matured), recall {_num(f['recall'])}"
            f"{_ci(f['recall_ci95'])} ({f['predicted_faulty_cards']} of {f['faulty_cards']} "
            f"first faults, {f['credited_from_other_part']} of them held by a window opened "
            f"in the other part), median lead {_num(f['lead_time_days']['median'])} d")
    if metrics.get("gpu_hours_saved") is not None:
        text += f", {metrics['gpu_hours_saved']:g} GPU-hours saved"
    return text


def render_text(report: dict[str, Any]) -> str:
    v, split = report["verdict"], report["split"]
    lines = [f"VERDICT {v['status']}: {v['reason']}"]
    if report["rule_file"]:
        lines.append(f"rule written: {report['rule_file']} (run it as a shadow first: "
                     "rules.shadow, docs/calibration.md)")
    lines += [
        "",
        f"period {report['period']['since']} .. {report['period']['until']}; train "
        f"{split['train']['since']} .. {split['train']['until']} "
        f"({split['train']['first_faults']} first faults), test {split['test']['since']} .. "
        f"{split['test']['until']} ({split['test']['first_faults']} first faults)",
        f"objective: {report['objective']['text']}; {report['search']['candidates']} "
        f"candidates ({'default space' if report['search']['default'] else 'your --search'})",
        "",
    ]
    rows = [("base", report["base"])]
    if report["chosen"] is not None:
        rows.append(("chosen", report["chosen"]))
    rows += [("baseline", b) for b in report["baselines"]]
    for role, e in rows:
        changed = ", ".join(f"{k}={new}" for k, (_, new) in e["changes"].items())
        lines.append(f"{role} {e['version']}{f' ({changed})' if changed else ''}")
        lines.append(f"  train: {describe(e['train'])}")
        lines.append(f"  test:  {describe(e['test'])}")
    lines += ["", f"best candidates on the train part (of {len(report['candidates'])}):"]
    for c in report["candidates"][:TOP_CANDIDATES]:
        mark = "*" if c["meets_objective"] else " "
        lines.append(f" {mark} {c['label']}: {describe(c['train'])}")
    lines += ["", f"input: {report['input'].get('summary', report['input'].get('kind'))}",
              report["disclaimer"]]
    return "\n".join(lines) + "\n"


def base_report(**parts: Any) -> dict[str, Any]:
    """The report's fixed frame around the parts the pipeline computed."""
    return {"tool": "gpu-health-evaluator calibrate", **parts, "disclaimer": DISCLAIMER}
