"""Log line formats of both programs: ``--log.format logfmt`` (default) or ``json``, and
``--log.level`` names, as the Prometheus exporter-toolkit spells them.

Pure: a :class:`logging.Formatter` per format; each program's entry point installs it on its
stderr handler. One record is one line in both formats (a traceback is escaped into the line),
so a log shipper never splits an event.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Final

from gpu_health.clock import rfc3339

FORMATS: Final = ("logfmt", "json")
# The toolkit's names; "warning" is accepted too (our flag's old spelling).
LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
                 "warning": logging.WARNING, "error": logging.ERROR}
LEVEL_NAMES: Final = "debug, info, warn, error"


def level_number(name: str) -> int | None:
    """The logging level for a flag value (any case); None when it is not one."""
    return LEVELS.get(name.strip().lower())


def _fields(fmt: logging.Formatter, r: logging.LogRecord) -> dict[str, str]:
    when = rfc3339(datetime.fromtimestamp(r.created, UTC), "milliseconds")
    fields = {"ts": when, "level": _level(r.levelno),
              "logger": r.name, "msg": r.getMessage()}
    if r.exc_info:
        fields["err"] = fmt.formatException(r.exc_info)
    return fields


def _level(number: int) -> str:
    if number >= logging.ERROR:
        return "error"
    if number >= logging.WARNING:
        return "warn"
    return "info" if number >= logging.INFO else "debug"


def _logfmt_value(value: str) -> str:
    if value and not any(c in value for c in ' ="\\\n\r\t') and value.isprintable():
        return value
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info logger=gpu_health.evaluator.compose msg="..."`` (UTC timestamps)."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_logfmt_value(v)}" for k, v in _fields(self, record).items())


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the same keys as logfmt."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(self, record), ensure_ascii=False)


def formatter(name: str) -> logging.Formatter:
    """The formatter for a ``--log.format`` value (already validated against FORMATS)."""
    return JsonFormatter() if name == "json" else LogfmtFormatter()
