"""Typed readers for config values that collect problems instead of stopping at the first.

Part of the settings (``evaluator/config/file.py`` uses it; nothing here reads env or argv). Each
reader returns a usable default after recording a problem, so validation always walks the whole
file and the user sees every mistake in one run.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from gpu_health.durations import parse_duration
from gpu_health.errors import ConfigError

_SIZE_RE: Final = re.compile(r"(\d+)\s*(B|KB|MB|GB|KiB|MiB|GiB)?")
_SIZE_UNITS: Final = {
    None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
}
MIN_RESPONSE_BYTES: Final = 1024


def parse_size(value: object) -> int | None:
    """Bytes from an integer or a string like "10MiB"; None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE_RE.fullmatch(value.strip())
        if match:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2)]
    return None


class Checker:
    """Collects problems while reading a loaded YAML document."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def raise_if_any(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)

    def unknown_keys(self, raw: Mapping[Any, Any], allowed: Sequence[str], where: str) -> None:
        for key in raw:
            if key in allowed:
                continue
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            prefix = f"{where}: " if where else ""
            self.problem(f"{prefix}unknown key {key!r}{hint}")

    def section(
        self, raw: Mapping[str, Any], key: str, allowed: Sequence[str], where: str | None = None
    ) -> Mapping[str, Any]:
        value = raw.get(key)
        where = where or key
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(f"{where} must be a mapping with keys {', '.join(allowed)}")
            return {}
        self.unknown_keys(value, allowed, where)
        return value

    def boolean(self, raw: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.problem(f"{where} must be true or false, got {value!r}")
            return default
        return value

    def string(self, raw: Mapping[str, Any], key: str, where: str, default: str) -> str:
        value = raw.get(key, default)
        if not isinstance(value, str) or not value:
            self.problem(f"{where} must be a non-empty string, got {value!r}")
            return default
        return value

    def optional_string(self, raw: Mapping[str, Any], key: str, where: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            self.problem(f"{where} must be a non-empty string or null, got {value!r}")
            return None
        return value

    def integer(self, raw: Mapping[str, Any], key: str, where: str, default: int, low: int,
                high: int) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.problem(f"{where} must be a whole number in {low}..{high}, got {value!r}")
            return default
        return value

    def duration(self, raw: Mapping[str, Any], key: str, where: str, default: float) -> float:
        if key not in raw or raw[key] is None:
            return default
        seconds = parse_duration(raw[key])
        if seconds is None:
            self.problem(f"{where} must be a positive duration like 60, \"60s\", \"5m\" or "
                         f"\"1h30m\", got {raw[key]!r}")
            return default
        return seconds

    def duration_at_most(self, raw: Mapping[str, Any], key: str, where: str, default: float,
                         limit: float, limit_where: str) -> float:
        """A duration that must not exceed ``limit`` (the value of ``limit_where``, e.g. a
        timeout and its interval); the default is capped at it."""
        value = self.duration(raw, key, where, min(default, limit))
        if value > limit:
            self.problem(f"{where} ({value:g}s) must not exceed {limit_where} ({limit:g}s)")
        return value

    def size(self, raw: Mapping[str, Any], key: str, where: str, default: int) -> int:
        if key not in raw or raw[key] is None:
            return default
        size = parse_size(raw[key])
        if size is None or size < MIN_RESPONSE_BYTES:
            self.problem(f"{where} must be a byte count >= {MIN_RESPONSE_BYTES} (e.g. 10485760 "
                         f"or \"10MiB\"), got {raw[key]!r}")
            return default
        return size

    def list_of_mappings(self, value: object, where: str) -> list[Mapping[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(f"{where} must be a list")
            return []
        good: list[Mapping[str, Any]] = []
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                good.append(item)
            else:
                self.problem(f"{where}[{i}] must be a mapping")
        return good

    def string_list(self, raw: Mapping[str, Any], key: str, where: str,
                    required: bool = False) -> list[str]:
        value = raw.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list) or (not value and required):
            self.problem(f"{where} must be a non-empty list of strings")
            return []
        good = [v for v in value if isinstance(v, str) and v]
        if len(good) != len(value):
            self.problem(f"{where} must contain only non-empty strings")
        return good

    def urls(self, raw: Mapping[str, Any], key: str, where: str) -> list[str]:
        good: list[str] = []
        for url in self.string_list(raw, key, where):
            problem = url_problem(url)
            if problem:
                self.problem(f"{where}: {problem}")
            else:
                good.append(url)
        return good

    def url(self, raw: Mapping[str, Any], key: str, where: str) -> str:
        value = raw.get(key)
        problem = url_problem(value)
        if problem:
            self.problem(f"{where}: {problem}")
            return ""
        return str(value)


def url_problem(url: object) -> str | None:
    """Why ``url`` is not an absolute http(s) URL with a host (None when it is one)."""
    if not isinstance(url, str) or not url:
        return f"{url!r} must be an http(s) URL"
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return f"{url!r} is not an http(s) URL with a host"
    return None
