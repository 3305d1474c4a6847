"""Property-based tests (Hypothesis) of the evaluator's exposition parser: arbitrary text
never raises past the parser boundary (only ``ParseError``: that target's scrape fails), and a
counter is 0 only when the sample's value is literally zero."""

from __future__ import annotations

import contextlib
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.ingest.exposition import (
    _parse_any_labels,
    _parse_labels,
    parse_plain_lines,
    parse_samples,
    parse_value,
)
from gpu_health.evaluator.ingest.wire_values import MAX_COUNTER, counter_value
from tests.evaluator.ingest_support import Card, a100, render

QUICK = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL = render([Card(0, "GPU-a", a100(3)), Card(1, "GPU-b", a100(0, 2), xids={48: 0})])
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "-0", "0e0", "0x0p0", "1e-300", "00", "1_0", "0.5",
                     "9223372036854775808", " 0", "٠"]),
    st.text(max_size=8))


@QUICK
@given(text=st.text(max_size=600))
def test_arbitrary_text_is_a_parse_error_or_cards(text: str) -> None:
    try:
        extraction = parse_cards(text, sample_limit=5000, max_cards=64)
    except ParseError:
        return
    for card in extraction.cards:
        assert all(v is None or v >= 0 for v in card.counters.as_tuple())


@QUICK
@given(start=st.integers(0, len(REAL)), length=st.integers(0, 80), junk=st.text(max_size=30))
def test_damaged_real_exposition_stays_behind_the_boundary(start: int, length: int,
                                                          junk: str) -> None:
    with contextlib.suppress(ParseError):
        parse_cards(REAL[:start] + junk + REAL[start + length:])


@QUICK
@given(value=VALUES, xid_value=VALUES)
def test_a_counter_is_zero_only_for_a_literal_zero(value: str, xid_value: str) -> None:
    text = (f'gpu_health_ecc_corrected_total{{gpu="0",uuid="GPU-a",vendor="nvidia"}} {value}\n'
            f'gpu_health_xid_errors_total{{gpu="0",uuid="GPU-a",vendor="nvidia",xid="48"}} '
            f"{xid_value}\n")
    try:
        cards = parse_cards(text).cards
    except ParseError:
        return
    if not cards:
        return
    card = cards[0]
    if card.counters.ecc_corrected_total == 0:
        assert parse_value(value.strip()) == 0
    if dict(card.xids).get(48) == 0:
        assert parse_value(xid_value.strip()) == 0


def _through_float(text: str) -> tuple[int | None, str | None] | str:
    """What counter_value gave before its "N.0" shortcut (the float path, or the error)."""
    try:
        value = float(text)
    except ValueError as exc:
        return str(exc)
    if math.isnan(value) or math.isinf(value) or value < 0 or not value.is_integer() or \
            value > MAX_COUNTER:
        return counter_value(text)  # an unknown value: the reasons are tested elsewhere
    return int(value), None


@QUICK
@given(text=st.one_of(st.from_regex(r"[0-9]{1,19}\.0", fullmatch=True),
                      st.from_regex(r"[+-]?[0-9٠]{0,17}\.0?", fullmatch=True)))
def test_the_whole_float_shortcut_reads_what_float_reads(text: str) -> None:
    if text.isascii() and text.isdigit():
        return
    try:
        got: object = counter_value(text)
    except ValueError as exc:
        got = str(exc)
    assert got == _through_float(text)


_LABEL_NAMES = st.sampled_from(["gpu", "uuid", "a", "_b", "__name__", "9x", "le"])
_LABEL_VALUES = st.text(alphabet=st.sampled_from(list('ab0,={}" \\n\t')), max_size=6)
_BLANKS = st.sampled_from(["", "", " ", "\t"])


@st.composite
def _label_texts(draw: st.DrawFn) -> str:
    """Label sets as written between the braces: mostly well formed, some not (duplicates,
    ``__name__``, blanks, escapes, stray quotes, trailing commas)."""
    terms = [draw(_BLANKS) + draw(_LABEL_NAMES) + draw(_BLANKS) + "=" + draw(_BLANKS)
             + '"' + draw(_LABEL_VALUES) + '"' + draw(_BLANKS)
             for _ in range(draw(st.integers(0, 4)))]
    return ",".join(terms) + draw(st.sampled_from(["", ",", ",,", " "]))


@QUICK
@given(text=_label_texts() | st.text(max_size=40))
def test_the_label_fast_path_reads_what_the_general_reading_does(text: str) -> None:
    outcomes: list[dict[str, str] | str] = []
    for parse in (_parse_labels, _parse_any_labels):
        try:
            outcomes.append(parse(text))
        except ValueError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


_NAMES = st.sampled_from(["gpu_health_ecc_corrected_total", "a:b", "_x", "9bad", "a-b", ""])


@st.composite
def _sample_lines(draw: st.DrawFn) -> str:
    """A sample line, mostly in the exporter's plain shape, some with blanks, timestamps, empty
    or missing braces, bad values or junk; stripped, as the scrape hands lines over."""
    braces = draw(st.sampled_from(["{%s}", "{%s}", "", "{}", " {%s}", "{%s} "]))
    label_part = braces % draw(_label_texts()) if "%s" in braces else braces
    tail = draw(st.sampled_from(["", "", " 1700000000000", " 1.5", " x"]))
    line = draw(_NAMES) + label_part + draw(st.sampled_from([" ", " ", "\t", "  "])) \
        + draw(VALUES) + tail
    return draw(st.sampled_from([line, line, line, draw(st.text(max_size=20))])).strip()


def test_the_exporters_own_lines_take_the_plain_pass() -> None:
    lines = [line for line in REAL.splitlines() if line and not line.startswith("#")]
    assert parse_plain_lines(lines) == parse_samples(REAL)
    assert parse_plain_lines([*lines, lines[0] + "\nx 1"]) is None


@QUICK
@given(lines=st.lists(_sample_lines().filter(bool), max_size=6))
def test_the_plain_line_pass_reads_what_the_line_parser_does(lines: list[str]) -> None:
    plain = parse_plain_lines(lines)
    try:
        expected = parse_samples("\n".join(lines))
    except ParseError:
        assert plain is None
        return
    assert plain is None or plain == expected
