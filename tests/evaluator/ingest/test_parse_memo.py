"""The parse memo answers exactly what the parser answers: the same cards, the same error (line
number and reason) for any text, damaged real expositions included, whether its entry for the
target was fresh, stale or absent; an unchanged answer is recognised without parsing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.cards import CardExtraction, parse_cards
from gpu_health.evaluator.ingest.parse_memo import ParseMemo
from tests.evaluator.ingest_support import Card, a100, render

QUICK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL = render([Card(0, "GPU-a", a100(3)), Card(1, "GPU-b", a100(0, 2), xids={48: 0})])
SELF = "gpu_health_exporter_collect_duration_seconds{vendor=\"nvidia\"} 0.0{n}\n"
OTHER = "gpu_health_fan_speed_ratio{gpu=\"0\"} 0.5\n"  # a contract series we do not know


def outcome(memo: ParseMemo | None, text: str,
            **limits: int) -> CardExtraction | tuple[str, str]:
    """The cards, or the error and its reason (through ``memo``; None: the parser itself)."""
    try:
        return parse_cards(text, **limits) if memo is None else memo.parse("t", text, **limits)
    except ParseError as exc:
        return str(exc), exc.reason


def same(memo: ParseMemo, text: str, **limits: int) -> None:
    assert outcome(memo, text, **limits) == outcome(None, text, **limits)


@settings(QUICK)
@given(start=st.integers(0, len(REAL)), length=st.integers(0, 80), junk=st.text(max_size=30),
       sample_limit=st.sampled_from([None, 3, 40]), max_cards=st.sampled_from([None, 1, 8]))
def test_damaged_real_expositions_give_what_the_parser_gives(
        start: int, length: int, junk: str, sample_limit: int | None,
        max_cards: int | None) -> None:
    limits = {k: v for k, v in (("sample_limit", sample_limit), ("max_cards", max_cards))
              if v is not None}
    damaged = REAL[:start] + junk + REAL[start + length:]
    for earlier in (None, REAL, damaged):  # no entry, another answer's, this one's
        memo = ParseMemo()
        if earlier is not None:
            outcome(memo, earlier, **limits)
        same(memo, damaged, **limits)
        same(memo, damaged, **limits)


@settings(QUICK)
@given(text=st.text(max_size=400))
def test_arbitrary_text_gives_what_the_parser_gives(text: str) -> None:
    memo = ParseMemo()
    same(memo, text, sample_limit=50)
    same(memo, REAL + text, sample_limit=50)


def test_an_unchanged_answer_is_recognised_while_its_own_timings_change() -> None:
    memo = ParseMemo()
    for n in range(3):
        text = REAL + SELF.replace("{n}", str(n)) + OTHER
        assert memo.parse("t", text) == parse_cards(text)
    assert (memo.hits, memo.misses) == (2, 1)
    assert memo.parse("t", text).ignored_series["unknown_metric"] == 1
    changed = render([Card(0, "GPU-a", a100(4)), Card(1, "GPU-b", a100(0, 2), xids={48: 0})])
    assert memo.parse("t", changed) == parse_cards(changed)
    assert memo.parse("t", changed).cards[0].counters.ecc_corrected_total != \
        parse_cards(REAL).cards[0].counters.ecc_corrected_total
    assert (memo.hits, memo.misses) == (4, 2)


def test_targets_that_left_are_forgotten() -> None:
    memo = ParseMemo()
    for key in ("a", "b", "c"):
        memo.parse(key, REAL)
    memo.retain({"b"})
    assert len(memo) == 1
    memo.parse("a", REAL)
    assert memo.misses == 4
