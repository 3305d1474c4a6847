"""Exposition parsing: same samples as prometheus_client on valid text, clear errors on bad text,
and the card rules (gpu label, uuid, unknown values, duplicates)."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_health.errors import ParseError
from gpu_health.evaluator.ingest.cards import parse_cards
from gpu_health.evaluator.ingest.exposition import parse_samples, parse_value
from gpu_health.evaluator.ingest.wire_values import MAX_COUNTER, counter_value
from gpu_health.evaluator.model import Counters
from tests.evaluator.ingest_support import Card, a100, render

HAND_WRITTEN_VALID = [
    "foo 1\n",
    "foo 1 1700000000000\n",
    "foo{} 2\n",
    'foo{a="b",} 3\n',
    'foo { a = "b" , c="d" } 4\n',
    'foo{a="b"}5\n',
    "foo\t6\n",
    '  foo{a="x\\"y\\\\z\\nw"}  7  \n',
    'foo{a="}{,=\'"} 8\n',
    "foo NaN\nbar +Inf\nbaz -Inf\nqux -0\n",
    "foo 1e3\nbar 1.5E-3\nbaz .5\nqux 5.\n",
    "# just a comment\n# HELP foo_total a \\\\ b \\n\n# TYPE foo_total counter\nfoo_total 1\n\n",
    'foo{a="\\t"} 9\n',  # unknown escapes stay as written (prometheus_client does the same)
    "foo:bar_baz{_a1=\"v\"} 10\n",
    "foo 1\r\nbar 2\r\n",
]

BOTH_REJECT = [
    'foo{a="b" 1\n',
    "foo{a=b} 1\n",
    'foo{a="b"}\n',
    "foo 1x\n",
    'foo{a="b",a="c"} 1\n',
    "1foo 1\n",
    'foo{a="b"c="d"} 1\n',
    'foo{a="b\\"} 1\n',
    "foo 1_000\n",
    "# TYPE foo\n",
    'foo{a="b",,c="d"} 1\n',
    "foo\n",
]

# prometheus_client is laxer than Prometheus here; we follow Prometheus (the Go parser).
STRICTER = [
    "foo 1 2 3\n",
    "foo 1 1.5\n",
    'foo{__name__="bar"} 1\n',
    "foo{,} 1\n",
    "# TYPE foo countr\n",
]


def _reference(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _ours(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, parse_value(s.value)) for s in parse_samples(text)]


def _same(a: list[tuple[str, dict[str, str], float]],
          b: list[tuple[str, dict[str, str], float]]) -> bool:
    if len(a) != len(b):
        return False
    for (n1, l1, v1), (n2, l2, v2) in zip(a, b, strict=True):
        if n1 != n2 or l1 != l2 or not (v1 == v2 or (math.isnan(v1) and math.isnan(v2))):
            return False
    return True


@pytest.mark.parametrize("text", HAND_WRITTEN_VALID)
def test_same_samples_as_prometheus_client_hand_written(text: str) -> None:
    assert _same(_ours(text), _reference(text))


def _random_cards(rng: random.Random) -> list[Card]:
    weird = ['GPU-"quoted"', "GPU-back\\slash", "GPU-new\nline", "GPU-}{,=", "", "GPU-ünï"]
    values: list[int | None] = [None, 0, 1, 17, 2**31, 2**52, 123456789]
    cards = []
    for gpu in rng.sample(range(16), rng.randint(0, 8)):
        counters = Counters(*(rng.choice(values) for _ in range(5)))
        cards.append(Card(gpu, rng.choice([*weird, f"GPU-{rng.getrandbits(64):x}"]), counters))
    return cards


def test_same_samples_as_prometheus_client_on_rendered_corpus() -> None:
    rng = random.Random(7)
    for _ in range(200):
        text = render(_random_cards(rng), vendor=rng.choice(["nvidia", "kunlunxin"]))
        assert _same(_ours(text), _reference(text)), text


@pytest.mark.parametrize("text", BOTH_REJECT)
def test_malformed_rejected_like_prometheus_client(text: str) -> None:
    with pytest.raises(ValueError):
        _reference(text)
    with pytest.raises(ParseError, match="line 1"):
        parse_samples(text)


@pytest.mark.parametrize("text", STRICTER)
def test_stricter_than_prometheus_client_where_prometheus_is(text: str) -> None:
    with pytest.raises(ParseError):
        parse_samples(text)


def test_error_names_the_line_and_shows_it() -> None:
    text = render([Card(0, "GPU-a", a100(1))]) + "garbage here\n"
    with pytest.raises(ParseError) as info:
        parse_cards(text)
    assert f"line {text.count(chr(10))}" in str(info.value)
    assert "garbage here" in str(info.value)
    assert info.value.reason == "parse"


def test_malformed_line_in_unrelated_series_fails_the_whole_exposition() -> None:
    text = render([Card(0, "GPU-a", a100(1))]) + 'python_info{version="3.11" 1\n'
    with pytest.raises(ParseError):
        parse_cards(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", (0, None)), ("5.0", (5, None)), ("1e3", (1000, None)), ("+7", (7, None)),
        ("-0", (0, None)), (str(MAX_COUNTER), (MAX_COUNTER, None)),
        ("9007199254740993", (9007199254740993, None)),  # exact, no float rounding
        (str(MAX_COUNTER + 1), (None, "too_large")), ("1e19", (None, "too_large")),
        ("NaN", (None, "nan")), ("+Inf", (None, "inf")), ("-Inf", (None, "inf")),
        ("-1", (None, "negative")), ("1.5", (None, "non_integer")),
    ],
)
def test_counter_values(text: str, expected: tuple[int | None, str | None]) -> None:
    assert counter_value(text) == expected


def _line(name: str, labels: str, value: str) -> str:
    return f"gpu_health_{name}{{{labels}}} {value}\n"


def test_unusable_values_are_unknown_and_counted() -> None:
    text = "".join([
        _line("ecc_corrected_total", 'gpu="0",uuid="GPU-a"', "NaN"),
        _line("ecc_uncorrected_total", 'gpu="0",uuid="GPU-a"', "-3"),
        _line("retired_pages", 'gpu="0",uuid="GPU-a"', "2.5"),
        _line("remapped_rows_pending", 'gpu="0",uuid="GPU-a"', "1e300"),
        _line("remapped_rows_failure", 'gpu="0",uuid="GPU-a"', "+Inf"),
        _line("ecc_corrected_total", 'gpu="1",uuid="GPU-b"', "12"),
    ])
    result = parse_cards(text)
    assert [c.gpu_index for c in result.cards] == [0, 1]
    assert result.cards[0].counters == Counters()
    assert result.cards[0].counters.all_unknown()
    assert result.cards[1].counters == Counters(ecc_corrected_total=12)
    assert result.unknown_values == {
        "nan": 1, "negative": 1, "non_integer": 1, "too_large": 1, "inf": 1,
    }


def test_duplicate_series_make_that_metric_unknown() -> None:
    text = "".join([
        _line("ecc_corrected_total", 'gpu="0",uuid="GPU-a",vendor="nvidia",copy="1"', "5"),
        _line("ecc_corrected_total", 'gpu="0",uuid="GPU-a",vendor="nvidia",copy="2"', "7"),
        _line("ecc_uncorrected_total", 'gpu="0",uuid="GPU-a"', "0"),
    ])
    result = parse_cards(text)
    card = result.cards[0]
    assert card.counters.ecc_corrected_total is None  # conflicting data: unknown, never a pick
    assert card.counters.ecc_uncorrected_total == 0
    assert result.unknown_values == {"duplicate": 1}


def test_gpu_label_is_the_index_and_required() -> None:
    text = "".join([
        _line("ecc_corrected_total", 'gpu="3",uuid="GPU-d"', "1"),
        _line("ecc_corrected_total", 'gpu="1",uuid="GPU-b"', "2"),
        _line("ecc_corrected_total", 'uuid="GPU-x"', "3"),
        _line("ecc_corrected_total", 'gpu="abc",uuid="GPU-y"', "4"),
        _line("ecc_corrected_total", 'gpu="-1",uuid="GPU-z"', "5"),
        'gpu_health_exporter_up{vendor="nvidia"} 1\n',  # not a card series: silently skipped
    ])
    result = parse_cards(text)
    assert [(c.gpu_index, c.gpu_uuid) for c in result.cards] == [(1, "GPU-b"), (3, "GPU-d")]
    assert result.ignored_series == {"no_gpu_label": 1, "bad_gpu_label": 2}


def test_empty_uuid_is_none_and_conflicting_uuids_drop_the_card() -> None:
    text = "".join([
        _line("ecc_corrected_total", 'gpu="0",uuid=""', "1"),
        _line("ecc_corrected_total", 'gpu="1",uuid="GPU-a"', "1"),
        _line("ecc_uncorrected_total", 'gpu="1",uuid="GPU-b"', "0"),
        _line("ecc_uncorrected_total", 'gpu="2",uuid=""', "0"),
        _line("ecc_corrected_total", 'gpu="2",uuid="GPU-c"', "4"),
    ])
    result = parse_cards(text)
    assert [(c.gpu_index, c.gpu_uuid) for c in result.cards] == [(0, None), (2, "GPU-c")]
    assert result.ignored_series == {"conflicting_uuid": 2}


def test_rendered_exporter_output_round_trips() -> None:
    cards = [Card(0, "GPU-a", a100(5, 0)), Card(7, None, a100(None, None)),
             Card(2, "GPU-c", Counters())]
    result = parse_cards(render(cards))
    assert [(c.gpu_index, c.gpu_uuid, c.counters) for c in result.cards] == [
        (0, "GPU-a", a100(5, 0)), (2, "GPU-c", Counters()), (7, None, a100(None, None)),
    ]
    assert result.ignored_series == {} and result.unknown_values == {}


# -- XID series and what the parser does not use ------------------------------


def test_xid_series_are_read_per_card_and_never_fill_a_counter() -> None:
    cards = [Card(0, "GPU-a", a100(5, 0), {48: 2, 13: 7, 94: 0}),
             Card(1, "GPU-b", a100(3, 0))]
    result = parse_cards(render(cards))
    with_xid, without = result.cards
    assert with_xid.xids == ((13, 7), (48, 2), (94, 0))  # sorted by code; a 0 is a real zero
    assert with_xid.counters == a100(5, 0)  # the same counters as without XID series
    assert without.xids == () and without.counters == a100(3, 0)
    assert result.ignored_series == {} and result.unknown_values == {}
    assert "gpu_health_xid_errors_total{" in render(cards)  # the wire name really is _total


def test_a_card_with_only_xid_series_is_kept_with_unknown_counters() -> None:
    result = parse_cards(render([Card(2, "GPU-c", Counters(), {48: 0, 63: 1})]))
    card = result.cards[0]
    assert card.counters.all_unknown() and card.xids == ((48, 0), (63, 1))


def test_unusable_xid_series_are_ignored_or_unknown_and_counted() -> None:
    labels = 'gpu="0",uuid="GPU-a",vendor="nvidia"'
    text = "".join([
        _line("xid_errors_total", labels, "1"),  # no xid label
        _line("xid_errors_total", labels + ',xid="abc"', "1"),
        _line("xid_errors_total", labels + ',xid="-4"', "1"),
        _line("xid_errors_total", labels + ',xid="48"', "NaN"),
        _line("xid_errors_total", labels + ',xid="63"', "-1"),
        _line("xid_errors_total", labels + ',xid="64",copy="1"', "1"),
        _line("xid_errors_total", labels + ',xid="64",copy="2"', "2"),
        _line("xid_errors_total", labels + ',xid="64",copy="3"', "3"),
        _line("xid_errors_total", labels + ',xid="94"', "3"),
        _line("xid_errors_total", 'uuid="GPU-a",xid="95"', "3"),  # no gpu label
        _line("ecc_uncorrected_total", labels, "0"),
    ])
    result = parse_cards(text)
    card = result.cards[0]
    assert card.xids == ((94, 3),)  # unknown values are left out, never written as 0
    assert card.counters == Counters(ecc_uncorrected_total=0)
    assert result.ignored_series == {"no_xid_label": 1, "bad_xid_label": 2, "no_gpu_label": 1}
    assert result.unknown_values == {"nan": 1, "negative": 1, "duplicate": 2}


def test_two_vendors_on_one_index_drop_the_card_with_its_xids() -> None:
    text = "".join([
        _line("ecc_uncorrected_total", 'gpu="0",uuid="",vendor="nvidia"', "0"),
        _line("xid_errors_total", 'gpu="0",uuid="",vendor="nvidia",xid="48"', "1"),
        _line("ecc_uncorrected_total", 'gpu="0",uuid="",vendor="ascend"', "4"),  # duplicate too
        _line("gpu_info", 'gpu="1",uuid="",vendor="ascend",model="910B"', "1"),
        _line("ecc_corrected_total", 'gpu="1",uuid="",vendor="nvidia"', "1"),
        _line("ecc_corrected_total", 'gpu="2",uuid="",vendor="ascend"', "1"),
        _line("ecc_uncorrected_total", 'gpu="2",uuid=""', "0"),  # no vendor: not a second one
    ])
    result = parse_cards(text)
    assert [c.gpu_index for c in result.cards] == [2]
    assert result.ignored_series == {"conflicting_vendor": 5}


def test_unknown_contract_series_are_counted_not_used() -> None:
    text = "".join([
        _line("ecc_corrected_total", 'gpu="0",uuid="GPU-a"', "1"),
        _line("row_remap_histogram", 'gpu="0",uuid="GPU-a",bucket="max"', "1"),
        _line("row_remap_histogram", 'gpu="1",uuid="GPU-b",bucket="max"', "1"),
        "gpu_health_exporter_last_success_timestamp_seconds{vendor=\"nvidia\"} 1\n",
        "gpu_health_exporter_xid_log_readable{source=\"kmsg\"} 1\n",
        "process_cpu_seconds_total 3.5\n",
        "python_info{implementation=\"CPython\"} 1\n",
        _line("recovery_action", 'gpu="0",uuid="GPU-a",vendor="nvidia",action="none"', "1"),
        _line("retired_pages_pending", 'gpu="0",uuid="GPU-a",vendor="nvidia"', "0"),
    ])
    result = parse_cards(text)
    assert [c.counters for c in result.cards] == [Counters(ecc_corrected_total=1)]
    # the exporter's own self-metrics and process metrics are not contract series, and the
    # recovery action and pending retirement are known ones (stored): none is counted
    assert result.ignored_series == {"unknown_metric": 2}
