"""The ``file_sd_configs`` and ``http_sd_configs`` sections of the evaluator config (Prometheus's
names and file formats; docs/evaluator-ingest.md). Every problem is recorded in the Checker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gpu_health.evaluator.config.table import Setting, Table
from gpu_health.evaluator.config.values import Checker

# One table per list item (``where`` gets the item's index when read).
FILE_SD: Final = Table("file_sd_configs[]", (
    Setting("files", "custom", None),  # required: .json, .yml or .yaml; a glob in the name only
    Setting("refresh_interval", "duration", 300.0),
))
HTTP_SD: Final = Table("http_sd_configs[]", (
    Setting("url", "custom", None),  # required: an http(s) URL
    Setting("refresh_interval", "duration", 60.0),
))


@dataclass(frozen=True, slots=True)
class FileSDConfig:
    files: tuple[str, ...]
    refresh_interval: float = FILE_SD.defaults["refresh_interval"]


@dataclass(frozen=True, slots=True)
class HttpSDConfig:
    url: str
    refresh_interval: float = HTTP_SD.defaults["refresh_interval"]


def parse_file_sd(c: Checker, value: object, base: Path) -> tuple[FileSDConfig, ...]:
    result: list[FileSDConfig] = []
    for i, item in enumerate(c.list_of_mappings(value, "file_sd_configs")):
        where = f"file_sd_configs[{i}]"
        c.unknown_keys(item, FILE_SD.keys, where)
        files = c.string_list(item, "files", f"{where}.files", required=True)
        for pattern in files:
            if not pattern.endswith((".json", ".yml", ".yaml")):
                c.problem(f"{where}.files: {pattern!r} must end in .json, .yml or .yaml")
            if any(ch in str(Path(pattern).parent) for ch in "*?["):
                c.problem(f"{where}.files: {pattern!r}: a glob may only be in the file name")
        result.append(FileSDConfig(
            files=tuple(str(base / f) for f in files),
            **FILE_SD.read(c, item, where=where),
        ))
    return tuple(result)


def parse_http_sd(c: Checker, value: object) -> tuple[HttpSDConfig, ...]:
    result: list[HttpSDConfig] = []
    for i, item in enumerate(c.list_of_mappings(value, "http_sd_configs")):
        where = f"http_sd_configs[{i}]"
        c.unknown_keys(item, HTTP_SD.keys, where)
        result.append(HttpSDConfig(
            url=c.url(item, "url", f"{where}.url"),
            **HTTP_SD.read(c, item, where=where),
        ))
    return tuple(result)
