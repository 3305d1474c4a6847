"""Prometheus text exposition (format 0.0.4) parsing: text in, samples out, no I/O.

A faster equivalent of ``prometheus_client.parser.text_string_to_metric_families`` for what the
evaluator needs: every sample line is validated (one malformed line fails the whole scrape, as it
does in Prometheus), but labels are only decoded for the metric names the caller asks for. On
valid input the samples are identical to prometheus_client's (``tests/evaluator/
test_scrape_exposition.py`` checks that on a corpus). On malformed input this parser is stricter
than prometheus_client where Prometheus itself (the Go parser) is too: more than one timestamp,
a non-integer timestamp, ``__name__`` inside the braces, an empty label term (``{,}``) and an
unknown ``# TYPE``.
UTF-8 quoted metric/label names (a Prometheus 3 extension) are rejected too: the exporter never
emits them and accepting half of that syntax would be worse than refusing it clearly.
Sample names are kept as written on the wire (prometheus_client renames a ``counter`` sample
that lacks ``_total``; the contract's counters already end in ``_total``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from typing import NamedTuple

from gpu_health.errors import ParseError

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# name, optional {labels} (greedy to the last '}' because label values may contain '}' but the
# value and timestamp never do), value, optional timestamp. The line is stripped beforehand.
_SAMPLE_RE = re.compile(
    rf"({_NAME})(?:[ \t]*\{{(.*)\}}[ \t]*|[ \t]+)([^\s{{}}]+)(?:[ \t]+([^\s{{}}]+))?"
)
_LABEL_RE = re.compile(
    r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(?:,|$)'
)
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\\n]|\\.)*"'
# Structure-only check for series whose labels we do not decode (cheaper than building a dict).
_LABEL_SET_RE = re.compile(rf"[ \t]*(?:{_PAIR}[ \t]*,[ \t]*)*(?:{_PAIR}[ \t]*,?[ \t]*)?")
_HEAD_RE = re.compile(r",([a-zA-Z_][a-zA-Z0-9_]*)=")
_HEADS: dict[str, str] = {}  # `,name=` -> name, for the label names seen (bounded)
_MAX_HEADS = 1024
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_NAME_RE = re.compile(_NAME)
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_TIMESTAMP_RE = re.compile(r"-?[0-9]+")
# A value of the plain sample shape (below): no blank, brace or digit separator.
_PLAIN_VALUE_RE = re.compile(r"[^\s{}_]+")
_MAX_LINE_PREVIEW = 120


class RawSample(NamedTuple):
    """One sample line: metric name, decoded labels, and the value exactly as written."""

    name: str
    labels: dict[str, str]
    value: str


def parse_value(text: str) -> float:
    """A sample value as Prometheus reads it (Go ``ParseFloat`` plus ``NaN``/``+Inf``/``-Inf``).

    Python's ``float`` also accepts digit separators (``1_000``); Go and prometheus_client do
    not, so neither do we.
    """
    if "_" in text:
        raise ValueError(f"invalid value {text!r}")
    return float(text)


def _unescape(match: re.Match[str]) -> str:
    return _ESCAPES[match.group(0)]


def _parse_labels(text: str) -> dict[str, str]:
    # Nearly every label set an exporter writes is `a="x",b="y"`: no blanks, no escapes, so
    # every '"' delimits a value and str.split reads the set; the `,name=` between values is
    # checked once per distinct text (a bounded cache). Anything else (blanks, escapes,
    # duplicates, ``__name__``) goes the long way, which says what is wrong.
    if "\\" not in text and "\n" not in text:
        parts = ("," + text).split('"')
        if len(parts) >= 3 and len(parts) % 2 == 1 and parts[-1] in ("", ","):
            labels = {}
            for i in range(0, len(parts) - 1, 2):
                name = _HEADS.get(parts[i]) or _head(parts[i])
                if name is None:
                    break
                labels[name] = parts[i + 1]
            else:
                if len(labels) == len(parts) // 2 and "__name__" not in labels:
                    return labels
    return _parse_any_labels(text)


def _head(text: str) -> str | None:
    """The label name of a `,name=` between two values, or None when it is not one."""
    match = _HEAD_RE.fullmatch(text)
    if match is None:
        return None
    if len(_HEADS) < _MAX_HEADS:
        _HEADS[text] = match.group(1)
    return match.group(1)


def _parse_any_labels(text: str) -> dict[str, str]:
    """The general reading: blanks around each term, escapes in values; says what is wrong."""
    labels: dict[str, str] = {}
    pos, end = 0, len(text)
    while pos < end:
        match = _LABEL_RE.match(text, pos)
        if match is None:
            if text[pos:].strip(" \t"):
                raise ValueError(f"invalid label set near {text[pos:pos + 40]!r}")
            break
        name, raw = match.group(1), match.group(2)
        if name in labels:
            raise ValueError(f"duplicate label name {name!r}")
        if name == "__name__":
            raise ValueError("metric name given inside the braces")
        labels[name] = _ESCAPE_RE.sub(_unescape, raw) if "\\" in raw else raw
        pos = match.end()
    return labels


def _decoded(label_text: str, decoded: dict[str, dict[str, str]]) -> dict[str, str]:
    labels = decoded.get(label_text)
    if labels is None:
        labels = decoded[label_text] = _parse_labels(label_text)
    return labels


def _check_comment(line: str) -> None:
    # HELP text is free-form; TYPE must name a metric and a known type (Prometheus rejects others).
    parts = line[1:].split(None, 3)
    if len(parts) < 2 or parts[0] not in ("HELP", "TYPE"):
        return
    if _NAME_RE.fullmatch(parts[1]) is None:
        raise ValueError(f"invalid metric name {parts[1]!r} in {parts[0]} line")
    if parts[0] == "TYPE" and (len(parts) != 3 or parts[2] not in _TYPES):
        raise ValueError("TYPE line needs a metric name and one of " + ", ".join(sorted(_TYPES)))


def _checked(line: str) -> tuple[str, str | None, str]:
    """A sample line's name, label text and value, with the value and timestamp checked."""
    match = _SAMPLE_RE.fullmatch(line)
    if match is None:
        raise ValueError("not a sample line")
    name, label_text, value, timestamp = match.groups()
    parse_value(value)
    if timestamp is not None and _TIMESTAMP_RE.fullmatch(timestamp) is None:
        raise ValueError(f"timestamp {timestamp!r} is not integer milliseconds")
    return name, label_text, value


def _check_label_set(label_text: str | None) -> None:
    """Validate labels that are not decoded (cheaper than building a dict)."""
    if label_text and _LABEL_SET_RE.fullmatch(label_text) is None:
        raise ValueError("invalid label set")


def _check_sample(line: str) -> str:
    """Validate a sample line whose labels are not decoded; its metric name."""
    name, label_text, _ = _checked(line)
    _check_label_set(label_text)
    return name


def split_wanted(text: str, wanted: Collection[str], unused: Counter[str],
                 sample_limit: int | None = None) -> list[str] | None:
    """The sample lines of ``text`` whose name is in ``wanted``, stripped and *not yet
    validated*; every other line validated and its name counted in ``unused``, as
    :func:`parse_samples` does. None when a line is bad or the samples pass ``sample_limit``:
    :func:`parse_samples` then says which, with the line's number.

    The cheap half of a scrape whose wanted lines may be the same as last time (compare them,
    then validate and decode them only when they differ: :mod:`gpu_health.evaluator.ingest.
    parse_memo`). A wanted line is recognised by the name before its first ``{`` (or blank);
    a malformed one fails when it is parsed, as it would here."""
    lines: list[str] = []
    seen = 0
    limit = sample_limit if sample_limit is not None else -1
    try:
        for raw_line in text.split("\n"):
            line = raw_line.strip()
            if not line:
                continue
            if line[0] == "#":
                _check_comment(line)
                continue
            seen += 1
            if seen == limit + 1:
                return None
            # A valid sample's name ends at its first '{' (there are no braces after the
            # labels), else at its first blank: str methods, not a regex, on every line.
            brace = line.find("{")
            name = line[:brace].rstrip(" \t") if brace >= 0 else line.split(None, 1)[0]
            if name in wanted:
                lines.append(line)
            else:
                unused[_check_sample(line)] += 1
    except ValueError:
        return None
    return lines


def parse_plain_lines(lines: list[str]) -> list[RawSample] | None:
    """What ``parse_samples("\\n".join(lines))`` returns when every line has the shape an
    exporter writes, ``name{labels} value`` (one blank, no timestamp), and is valid; None
    otherwise (then :func:`parse_samples` says what is wrong, with the line's number).

    ``lines`` are stripped sample lines (:func:`split_wanted`). str methods split each line
    and a name, a value or a label set is checked once per distinct text: the same checks as
    the line regex, at a fraction of its cost on the long label sets of a GPU's series."""
    if any("\n" in line for line in lines):
        return None
    decoded: dict[str, dict[str, str]] = {}
    names: set[str] = set()
    values: set[str] = set()
    empty: dict[str, str] = {}
    samples: list[RawSample] = []
    append = samples.append
    try:
        for line in lines:
            name, _, rest = line.partition("{")
            # the value has no brace, so the last "} " closes the labels, as the line regex's
            # greedy match does; a line without it (no braces, a tab, a timestamp) is not plain
            label_text, close, value = rest.rpartition("} ")
            if not close:
                return None
            if name not in names:
                if _NAME_RE.fullmatch(name) is None:
                    return None
                names.add(name)
            if value not in values:
                if _PLAIN_VALUE_RE.fullmatch(value) is None:
                    return None
                parse_value(value)
                values.add(value)
            append(RawSample(name, _decoded(label_text, decoded) if label_text else empty,
                             value))
    except ValueError:
        return None
    return samples


def parse_samples(text: str, wanted: Collection[str] | None = None,
                  unused: Counter[str] | None = None,
                  sample_limit: int | None = None) -> list[RawSample]:
    """Validate every line of ``text``; return the samples named in ``wanted`` (None: all).

    ``unused``, when given, counts the other sample lines by metric name (validated, not
    decoded), so callers can say what they ignored. Raises :class:`ParseError` naming the first
    bad line (1-based) and showing its start, and ``ParseError(reason="sample_limit")`` as soon
    as the text holds more than ``sample_limit`` samples (every sample line counts, wanted or
    not, as Prometheus's ``sample_limit`` does), before it decodes the rest.
    """
    samples: list[RawSample] = []
    decoded: dict[str, dict[str, str]] = {}
    seen = 0
    limit = sample_limit if sample_limit is not None else -1
    for number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.strip()
        if not line:
            continue
        try:
            if line[0] == "#":
                _check_comment(line)
                continue
            seen += 1
            if seen == limit + 1:
                raise ParseError(f"more than {limit} samples (scrape.sample_limit): the "
                                 "target is refused whole", reason="sample_limit")
            name, label_text, value = _checked(line)
            if wanted is None or name in wanted:
                # One card's label set recurs in each of its families: decoded once per text
                # (the dicts are shared, read only).
                labels = _decoded(label_text, decoded) if label_text else {}
                samples.append(RawSample(name, labels, value))
            else:
                _check_label_set(label_text)
                if unused is not None:
                    unused[name] += 1
        except ValueError as exc:
            preview = line[:_MAX_LINE_PREVIEW]
            raise ParseError(f"line {number}: {exc}: {preview!r}", reason="parse") from exc
    return samples
