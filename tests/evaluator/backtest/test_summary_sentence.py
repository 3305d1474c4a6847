"""The backtest's one plain sentence per version: first faults caught, and whether the hits
warned before a first fault or came after the card had already failed."""

from __future__ import annotations

import json
from typing import Any

from gpu_health.evaluator.backtest.report import summary_sentence
from tests.shared import FIXTURES


def version(faults: int, caught: int, early: int, late: int, matured: int = 10) -> dict[str, Any]:
    def cls(faulty: int, predicted: int, hits: int) -> dict[str, Any]:
        return {"faulty_cards": faulty, "predicted_faulty_cards": predicted,
                "predictions": {"hit": hits, "miss": 0, "pending": 0, "voided": 0}}

    return {"label": "v9", "matured": matured,
            "by_class": {"first_fault": cls(faults, caught, early), "repeat": cls(0, 0, late)}}


def test_the_calchas_report_says_what_the_table_implies() -> None:
    report = json.loads((FIXTURES / "backtest-report-calchas-v2-ecc-xid-before-rollups.json")
                        .read_text())
    assert [summary_sentence(v) for v in report["versions"]] == [
        "v2-ecc-xid predicted none of the 39 first faults; every hit (72) was on a card that "
        "had already failed."]


def test_each_case_reads_plainly() -> None:
    assert summary_sentence(version(3, 2, 2, 5)) == \
        "v9 predicted 2 of the 3 first faults; 2 of its 7 hits came before a card's first fault."
    assert summary_sentence(version(1, 0, 0, 0, matured=4)) == \
        "v9 did not predict the one first fault; none of its 4 matured predictions was a hit."
    assert summary_sentence(version(0, 0, 0, 2)).startswith(
        "v9: no card had its first fault in the period, so it shows nothing about predicting one")
