"""Command-line settings of ``gpu-health-exporter``: the only exporter module reading argv/env.

Every value is validated before anything starts, and ALL problems are reported together (a
:class:`~gpu_health.errors.ConfigError`, exit status 2), so a typo never costs one restart per
mistake. The per-vendor binary flags (``--nvidia-smi``, ``--xpu-smi``, ``--npu-smi``, ...) come
from the vendor registry; an empty value disables that vendor, as it does an Xid log source
(``--kmsg-path``, ``--dmesg``, ``--journalctl``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_health import __version__
from gpu_health.durations import parse_duration
from gpu_health.errors import ConfigError
from gpu_health.logformat import FORMATS, LEVEL_NAMES, level_number

from .sources import SOURCE_CLASSES
from .xid_follower import MAX_BYTES_PER_POLL, MAX_LINE, MIN_LINE

OLD_LOG_FLAG = "--log-level"  # before the exporter-toolkit's --log.level; accepted, warned


def version_line(prog: str) -> str:
    return f"{prog}, version {__version__} (python {platform.python_version()})"


@dataclass(frozen=True, slots=True)
class Settings:
    collect_interval_s: float = 60.0
    stale_after_s: float = 180.0
    tool_timeout_s: float = 20.0
    max_output_bytes: int = 1024 * 1024
    listen_host: str = ""
    listen_port: int = 9835
    once: bool = False
    textfile: Path | None = None
    binaries: Mapping[str, str] = field(default_factory=dict)  # vendor -> command; "" = off
    log_level: str = "info"
    log_format: str = "logfmt"
    notices: tuple[str, ...] = ()  # said once logging is set up (a deprecated flag, ...)
    web_config: Path | None = None  # --web.config.file: TLS and basic auth (docs/security.md)
    tool_env: Mapping[str, str] = field(default_factory=dict)  # environment the tools get
    # NVIDIA Xid kernel-log following ("" switches a source off).
    kmsg_path: str = "/dev/kmsg"
    dmesg: str = "dmesg"
    journalctl: str = "journalctl"
    xid_interval_s: float = 10.0
    xid_max_bytes_per_poll: int = MAX_BYTES_PER_POLL
    xid_max_line_bytes: int = MAX_LINE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu-health-exporter",
        description="Export five GPU health counters per card from vendor tools.",
        exit_on_error=False,
    )
    p.add_argument("--collect-interval", default="60s", help="time between ticks (60s)")
    p.add_argument("--stale-after", default="180s", help="drop readings older than this (180s)")
    p.add_argument("--tool-timeout", default="20s", help="kill a vendor tool after this (20s)")
    p.add_argument("--max-output-bytes", default="1048576", help="cap on a tool's stdout")
    p.add_argument("--web.listen-address", dest="listen", default=":9835", help="host:port")
    p.add_argument("--web.config.file", dest="web_config", default=None,
                   help="exporter-toolkit web config: TLS and basic auth (docs/security.md)")
    p.add_argument("--once", action="store_true", help="collect once, print, exit")
    p.add_argument("--textfile", help="also write the exposition atomically to this .prom file")
    p.add_argument("--log.level", OLD_LOG_FLAG, dest="log_level", default="info",
                   help=f"{LEVEL_NAMES} (info)")
    p.add_argument("--log.format", dest="log_format", default="logfmt",
                   help=f"{' or '.join(FORMATS)} (logfmt)")
    p.add_argument("--version", action="version", version=version_line("gpu-health-exporter"))
    p.add_argument("--kmsg-path", default="/dev/kmsg",
                   help="kernel log device followed for NVIDIA Xid lines ('' disables)")
    p.add_argument("--dmesg", default="dmesg", help="fallback when kmsg is unreadable ('' off)")
    p.add_argument("--journalctl", default="journalctl",
                   help="second fallback: journalctl -k ('' disables)")
    p.add_argument("--xid-interval", default="10s", help="kernel-log poll interval (10s)")
    p.add_argument("--xid-max-bytes-per-poll", default=str(MAX_BYTES_PER_POLL),
                   help=f"most bytes of a followed kernel log read per poll ({MAX_BYTES_PER_POLL})")
    p.add_argument("--xid-max-line-bytes", default=str(MAX_LINE),
                   help=f"longer kernel-log lines are dropped and counted ({MAX_LINE})")
    for cls in SOURCE_CLASSES:
        p.add_argument(cls.flag, dest=f"bin_{cls.vendor}", default=cls.default_binary,
                       help=f"{cls.vendor} tool path or name on PATH ('' disables)")
    return p


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Settings from argv (default ``sys.argv[1:]``); ConfigError listing every problem."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args, unknown = _parser().parse_known_args(args_list)
    except argparse.ArgumentError as exc:
        raise ConfigError([str(exc)]) from exc
    problems = [f"unknown argument {u!r}" for u in unknown]
    interval = _duration(args.collect_interval, "--collect-interval", problems)
    stale = _duration(args.stale_after, "--stale-after", problems)
    timeout = _duration(args.tool_timeout, "--tool-timeout", problems)
    if interval and stale and stale < interval:
        problems.append(f"--stale-after ({stale:g}s) is shorter than --collect-interval "
                        f"({interval:g}s): every reading would expire before the next tick")
    if interval and timeout and timeout > interval:
        problems.append(f"--tool-timeout ({timeout:g}s) is longer than --collect-interval "
                        f"({interval:g}s)")
    host, port = _listen(args.listen, problems)
    settings = Settings(
        collect_interval_s=interval,
        stale_after_s=stale,
        tool_timeout_s=timeout,
        max_output_bytes=_positive_int(args.max_output_bytes, "--max-output-bytes", problems),
        listen_host=host,
        listen_port=port,
        once=args.once,
        textfile=_textfile(args.textfile, problems),
        binaries={cls.vendor: getattr(args, f"bin_{cls.vendor}") for cls in SOURCE_CLASSES},
        log_level=_log_level(args.log_level, problems),
        log_format=_log_format(args.log_format, problems),
        notices=_notices(args_list),
        web_config=None if not args.web_config else Path(args.web_config),
        tool_env=dict(os.environ if environ is None else environ),
        **_kernel_log(args, problems),
    )
    if problems:
        raise ConfigError(problems)
    return settings


def _kernel_log(args: argparse.Namespace, problems: list[str]) -> dict[str, Any]:
    """The Xid follower's settings (``""`` switches a source off)."""
    return {
        "kmsg_path": args.kmsg_path,
        "dmesg": args.dmesg,
        "journalctl": args.journalctl,
        "xid_interval_s": _duration(args.xid_interval, "--xid-interval", problems),
        "xid_max_bytes_per_poll": _positive_int(args.xid_max_bytes_per_poll,
                                                "--xid-max-bytes-per-poll", problems),
        "xid_max_line_bytes": _line_cap(args.xid_max_line_bytes, problems),
    }


def _line_cap(text: str, problems: list[str]) -> int:
    value = _positive_int(text, "--xid-max-line-bytes", problems)
    if 0 < value < MIN_LINE:
        problems.append(f"--xid-max-line-bytes: {value} is below {MIN_LINE} (a kernel log "
                        "record can be that long; shorter caps would drop valid lines)")
    return value


def _duration(text: str, flag: str, problems: list[str]) -> float:
    value = parse_duration(text, unitless=True)
    if value is None:
        problems.append(f"{flag}: {text!r} is not a positive duration (e.g. 60s, 500ms, 3m)")
        return 0.0
    return value


def _positive_int(text: str, flag: str, problems: list[str]) -> int:
    if text.strip().isdecimal() and int(text) > 0:
        return int(text)
    problems.append(f"{flag}: {text!r} is not a positive integer")
    return 0


def _listen(text: str, problems: list[str]) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # [::1]:9835
    if not sep or not port.isdecimal() or int(port) > 65535:
        problems.append(f"--web.listen-address: {text!r} is not host:port (e.g. :9835)")
        return "", 0
    return host, int(port)


def _textfile(text: str | None, problems: list[str]) -> Path | None:
    if text is None:
        return None
    path = Path(text)
    if path.suffix != ".prom":
        problems.append(f"--textfile: {text!r} must end in .prom (node_exporter reads only those)")
    if not path.parent.is_dir():
        problems.append(f"--textfile: directory {str(path.parent)!r} does not exist")
    elif not os.access(path.parent, os.W_OK):
        problems.append(f"--textfile: directory {str(path.parent)!r} is not writable")
    return path


def _log_level(text: str, problems: list[str]) -> str:
    if level_number(text) is None:
        problems.append(f"--log.level: {text!r} is not one of {LEVEL_NAMES}")
    return text.lower()


def _log_format(text: str, problems: list[str]) -> str:
    if text not in FORMATS:
        problems.append(f"--log.format: {text!r} is not one of {', '.join(FORMATS)}")
    return text


def _notices(argv: Sequence[str]) -> tuple[str, ...]:
    if any(a == OLD_LOG_FLAG or a.startswith(OLD_LOG_FLAG + "=") for a in argv):
        return (f"{OLD_LOG_FLAG} is deprecated and will be removed: use --log.level",)
    return ()
