"""Pure parsing and validation of API query parameters.

Everything here is text in, typed values out, no I/O and no clock reads (``now`` is passed in).
Every refusal is an ``ApiError(400, ..., param=name)`` so the caller learns which parameter to
fix. Parsing is deliberately strict: an SRE who typed ``limt=50`` or ``limit=50.0`` should get a
400 naming the parameter, not a silently different answer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from gpu_health.contract import SOURCE_REAL, SOURCES
from gpu_health.errors import ApiError
from gpu_health.evaluator.model import STATUSES
from gpu_health.timestamps import parse_timestamp

# Upper bounds keep values inside the store's column types (INTEGER / BIGINT): an out-of-range
# value must be a 400 here, not a driver error (500) later.
INT32_MAX = 2**31 - 1
MAX_TEXT = 256

_INT = re.compile(r"0|[1-9][0-9]{0,18}")


# Error bodies never echo what a client sent: no value is quoted back, and the name of an
# unknown parameter only when it is a short plain identifier (what a typo looks like).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\[\]-]{1,40}")
UNNAMED = "(a parameter name that is not shown)"


def echo_name(name: str) -> str:
    """``name`` if it is safe to name in an error body, else a placeholder."""
    return name if _PLAIN_NAME.fullmatch(name) else UNNAMED


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param)


def parse_int(param: str, raw: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> int:
    """A plain decimal integer (no sign, no leading zeros, no fraction) in [minimum, maximum]."""
    if not _INT.fullmatch(raw):
        raise _bad(param, "expected a non-negative integer")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise _bad(param, f"must be between {minimum} and {maximum}")
    return value


def parse_time(param: str, raw: str) -> datetime:
    """A query value through :func:`gpu_health.timestamps.parse_timestamp`; 400 naming the
    parameter otherwise."""
    try:
        return parse_timestamp(raw)
    except ValueError as exc:
        raise _bad(param, str(exc)) from None


def parse_choice(param: str, raw: str, choices: Collection[str]) -> str:
    if raw not in choices:
        raise _bad(param, f"must be one of {', '.join(choices)}")
    return raw


@dataclass(frozen=True, slots=True)
class Query:
    """The query string of one request: each allowed name at most once, nothing else."""

    values: Mapping[str, str]

    @classmethod
    def parse(cls, pairs: Iterable[tuple[str, str]], allowed: Collection[str]) -> Query:
        values: dict[str, str] = {}
        unknown: list[str] = []
        for name, value in pairs:
            if name not in allowed:
                unknown.append(name)
            elif name in values:
                raise _bad(name, "given more than once")
            else:
                values[name] = value
        if unknown:
            names = sorted({echo_name(name) for name in unknown})
            raise ApiError(
                400,
                f"unknown query parameter(s): {', '.join(names)}; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}",
                param=names[0] if names[0] != UNNAMED else None,
            )
        return cls(values)

    def text(self, name: str) -> str | None:
        """The raw value (1..MAX_TEXT characters) or None when absent."""
        raw = self.values.get(name)
        if raw is not None and not 0 < len(raw) <= MAX_TEXT:
            raise _bad(name, f"must be 1 to {MAX_TEXT} characters")
        return raw

    def required_text(self, name: str) -> str:
        raw = self.text(name)
        if raw is None:
            raise _bad(name, "is required")
        return raw

    def integer(self, name: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> int | None:
        raw = self.text(name)
        return None if raw is None else parse_int(name, raw, minimum=minimum, maximum=maximum)

    def integer_or(
        self, name: str, default: int, *, minimum: int = 0, maximum: int = INT32_MAX
    ) -> int:
        value = self.integer(name, minimum=minimum, maximum=maximum)
        return default if value is None else value

    def required_integer(self, name: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> int:
        return parse_int(name, self.required_text(name), minimum=minimum, maximum=maximum)

    def time(self, name: str, default: datetime | None = None) -> datetime | None:
        raw = self.text(name)
        return default if raw is None else parse_time(name, raw)

    def source(self) -> str:
        """``real`` (default) or ``simulated``; ``all`` is refused: the two never mix."""
        raw = self.text("source")
        return SOURCE_REAL if raw is None else parse_choice("source", raw, SOURCES)

    def status(self) -> str | None:
        raw = self.text("status")
        return None if raw is None else parse_choice("status", raw, STATUSES)

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        """(since, until) as given, either absent; since after until is refused."""
        since, until = self.time("since"), self.time("until")
        if since is not None and until is not None and since > until:
            raise _bad("since", f"is after until ({since.isoformat()} > {until.isoformat()})")
        return since, until

    def open_time_range(self, now: datetime) -> tuple[datetime | None, datetime]:
        """(since, until) where since has no default (no lower bound) and until defaults to
        ``now``; since after until is refused."""
        until = self.time("until") or now
        since = self.time("since")
        if since is not None and since > until:
            raise _bad("since", f"is after until ({since.isoformat()} > {until.isoformat()})")
        return since, until

    def time_range(self, now: datetime, default_span: timedelta) -> tuple[datetime, datetime]:
        """(since, until). until defaults to ``now``; since to ``until - default_span``, so
        ``?until=<last month>`` alone still means "the span before that"."""
        since, until = self.open_time_range(now)
        return (until - default_span if since is None else since), until


# -- the parameters as the OpenAPI document describes them (evaluator/http/api/openapi.py) --

_STR: Final[dict[str, Any]] = {"type": "string"}


def _param(name: str, schema: dict[str, Any], description: str, example: Any, *,
           required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema,
            "description": description, "example": example}


TIME_DESC: Final = ("RFC 3339 with an offset (2026-01-31T08:00:00Z) or Unix seconds. ")
PARAMETERS: Final[dict[str, dict[str, Any]]] = {
    "node_id": _param("node_id", _STR, "Only this node. A node you may not see is 404.",
                      "gpu-node-01"),
    "node_id_req": _param("node_id", _STR, "The node (404 when unknown or not visible to you).",
                          "gpu-node-01", required=True),
    "gpu_index": _param("gpu_index", {"type": "integer", "minimum": 0},
                        "Only this physical GPU index (as the vendor tool reports it).", 0),
    "gpu_index_req": _param("gpu_index", {"type": "integer", "minimum": 0},
                            "Physical GPU index (as the vendor tool reports it).", 0,
                            required=True),
    "source": _param("source", {"type": "string", "enum": list(SOURCES), "default": "real"},
                     "Data source. The two never mix: there is no 'all'.", "real"),
    "status": _param("status", {"type": "string", "enum": list(STATUSES)},
                     "Only predictions in this state.", "hit"),
    "since": _param("since", _STR, TIME_DESC + "Lower bound (inclusive).",
                    "2026-01-01T00:00:00Z"),
    "until": _param("until", _STR, TIME_DESC + "Upper bound (inclusive); default now.",
                    "2026-01-08T00:00:00Z"),
    "rule_version": _param("rule_version", _STR, "Only this rule version's predictions (an "
                           "active or a shadow version; without it: the active versions', never "
                           "a shadow's).", "v2-ecc-xid"),
    "limit_pred": _param("limit", {"type": "integer", "minimum": 1, "maximum": 500,
                                   "default": 100}, "Page size.", 50),
    "offset": _param("offset", {"type": "integer", "minimum": 0, "default": 0},
                     "Rows to skip (newest t0 first).", 0),
    "limit_samples": _param("limit", {"type": "integer", "minimum": 1, "maximum": 20000,
                                      "default": 5000},
                            "At most this many samples: the NEWEST ones (truncated=true).", 100),
}
