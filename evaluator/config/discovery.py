"""The ``file_sd_configs``, ``http_sd_configs`` and ``dns_sd_configs`` sections of the evaluator
config (Prometheus's names and file formats; docs/evaluator-ingest.md). Every problem is recorded
in the Checker."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_health.evaluator.config.targets import labels_problems, split_address
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

# One table per list item (``where`` gets the item's index when read).
FILE_SD: Final = Table("file_sd_configs[]", (
    Setting("files", "custom", None),  # required: .json, .yml or .yaml; a glob in the name only
    Setting("refresh_interval", "duration", 300.0),
))
HTTP_SD: Final = Table("http_sd_configs[]", (
    Setting("url", "custom", None),  # required: an http(s) URL
    Setting("refresh_interval", "duration", 60.0),
))
DNS_SD: Final = Table("dns_sd_configs[]", (
    Setting("names", "custom", None),  # required: DNS names to look up
    Setting("type", "custom", "SRV"),  # SRV (Prometheus's default), A or AAAA
    Setting("port", "custom", None),  # required for A and AAAA; SRV records carry their own
    Setting("refresh_interval", "duration", 30.0),
    Setting("nameservers", "custom", ()),  # "host:port" list; default: /etc/resolv.conf
    Setting("labels", "custom", None),  # tenant, slurm_node-free labels for every target
))
DNS_TYPES: Final = ("SRV", "A", "AAAA")
MAX_DNS_NAMES: Final = 100
_DNS_NAME: Final = re.compile(r"(?=.{1,253}\.?$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
                              r"\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?\.?")


@dataclass(frozen=True, slots=True)
class FileSDConfig:
    files: tuple[str, ...]
    refresh_interval: float = FILE_SD.defaults["refresh_interval"]


@dataclass(frozen=True, slots=True)
class HttpSDConfig:
    url: str
    refresh_interval: float = HTTP_SD.defaults["refresh_interval"]


@dataclass(frozen=True, slots=True)
class DnsSDConfig:
    names: tuple[str, ...]
    type: str = "SRV"
    port: int | None = None
    refresh_interval: float = DNS_SD.defaults["refresh_interval"]
    nameservers: tuple[tuple[str, int], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


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


def parse_dns_sd(c: Checker, value: object) -> tuple[DnsSDConfig, ...]:
    result: list[DnsSDConfig] = []
    for i, item in enumerate(c.list_of_mappings(value, "dns_sd_configs")):
        where = f"dns_sd_configs[{i}]"
        c.unknown_keys(item, DNS_SD.keys, where)
        names = c.string_list(item, "names", f"{where}.names", required=True)
        if len(names) > MAX_DNS_NAMES:
            c.problem(f"{where}.names: {len(names)} names, more than {MAX_DNS_NAMES}")
        for name in names[:MAX_DNS_NAMES]:
            if _DNS_NAME.fullmatch(name) is None:
                c.problem(f"{where}.names: {name[:80]!r} is not a DNS name")
        kind = str(item.get("type", "SRV")).upper()
        if kind not in DNS_TYPES:
            c.problem(f"{where}.type must be one of {', '.join(DNS_TYPES)}")
        result.append(DnsSDConfig(
            names=tuple(names[:MAX_DNS_NAMES]), type=kind, port=_port(c, item, kind, where),
            nameservers=_nameservers(c, item, where), labels=_labels(c, item.get("labels"), where),
            **DNS_SD.read(c, item, where=where)))
    return tuple(result)


def _port(c: Checker, item: Any, kind: str, where: str) -> int | None:
    port = item.get("port")
    if port is None:
        if kind != "SRV":
            c.problem(f"{where}.port is required for type {kind} (an SRV record carries its own)")
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        c.problem(f"{where}.port must be a port number (1-65535)")
        return None
    return port


def _nameservers(c: Checker, item: Any, where: str) -> tuple[tuple[str, int], ...]:
    servers = []
    for text in c.string_list(item, "nameservers", f"{where}.nameservers"):
        pair = split_address(text)
        if pair is None or not _is_ip(pair[0]):
            c.problem(f"{where}.nameservers: {text[:80]!r} is not ip:port (e.g. 127.0.0.1:53)")
        else:
            servers.append(pair)
    return tuple(servers)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _labels(c: Checker, raw: object, where: str) -> tuple[tuple[str, str], ...]:
    pairs, problems = labels_problems(raw, where)
    for problem in problems:
        c.problem(problem)
    if any(name == "node" for name, _ in pairs):  # one label for all of a name's addresses
        c.problem(f"{where}.labels.node: a DNS name's addresses are many nodes; the exporters "
                  "name their own (--node-name)")
    return tuple(p for p in pairs if p[0] != "node")
