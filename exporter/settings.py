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
from typing import Any, Final, Literal

from gpu_health import __version__
from gpu_health.contract import MAX_NODE_NAME, is_node_name
from gpu_health.durations import parse_duration
from gpu_health.errors import ConfigError
from gpu_health.logformat import FORMATS, LEVEL_NAMES, level_number

from .sources import SOURCE_CLASSES
from .xid_follower import MAX_BYTES_PER_POLL, MAX_LINE, MIN_LINE

OLD_LOG_FLAG = "--log-level"  # before the exporter-toolkit's --log.level; accepted, warned


@dataclass(frozen=True, slots=True)
class Flag:
    """One valued flag: ``default`` as typed on the command line, read into ``dest``."""

    flag: str
    dest: str  # the Settings field
    kind: Literal["duration", "count", "text"]
    default: str
    help: str


# Each flag with a value and a plain reading, once; the Settings defaults are read from here.
FLAGS: Final = (
    Flag("--collect-interval", "collect_interval_s", "duration", "60s", "time between ticks"),
    Flag("--stale-after", "stale_after_s", "duration", "180s", "drop readings older than this"),
    Flag("--tool-timeout", "tool_timeout_s", "duration", "20s", "kill a vendor tool after this"),
    Flag("--max-output-bytes", "max_output_bytes", "count", str(1024 * 1024),
         "cap on a tool's stdout"),
    # NVIDIA Xid kernel-log following ("" switches a source off).
    Flag("--kmsg-path", "kmsg_path", "text", "/dev/kmsg",
         "kernel log device followed for NVIDIA Xid lines ('' disables)"),
    Flag("--dmesg", "dmesg", "text", "dmesg", "fallback when kmsg is unreadable ('' off)"),
    Flag("--journalctl", "journalctl", "text", "journalctl",
         "second fallback: journalctl -k ('' disables)"),
    Flag("--xid-interval", "xid_interval_s", "duration", "10s", "kernel-log poll interval"),
    Flag("--xid-max-bytes-per-poll", "xid_max_bytes_per_poll", "count", str(MAX_BYTES_PER_POLL),
         "most bytes of a followed kernel log read per poll"),
    Flag("--xid-max-line-bytes", "xid_max_line_bytes", "count", str(MAX_LINE),
         "longer kernel-log lines are dropped and counted"),
)


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


def _read(flag: Flag, text: str, problems: list[str]) -> Any:
    if flag.kind == "duration":
        return _duration(text, flag.flag, problems)
    if flag.kind == "count":
        return _positive_int(text, flag.flag, problems)
    return text


_DEFAULTS: Final[dict[str, Any]] = {f.dest: _read(f, f.default, []) for f in FLAGS}


def version_line(prog: str) -> str:
    return f"{prog}, version {__version__} (python {platform.python_version()})"


@dataclass(frozen=True, slots=True)
class Settings:
    collect_interval_s: float = _DEFAULTS["collect_interval_s"]
    stale_after_s: float = _DEFAULTS["stale_after_s"]
    tool_timeout_s: float = _DEFAULTS["tool_timeout_s"]
    max_output_bytes: int = _DEFAULTS["max_output_bytes"]
    listen_host: str = ""
    listen_port: int = 10346
    once: bool = False
    textfile: Path | None = None
    binaries: Mapping[str, str] = field(default_factory=dict)  # vendor -> command; "" = off
    log_level: str = "info"
    log_format: str = "logfmt"
    notices: tuple[str, ...] = ()  # said once logging is set up (a deprecated flag, ...)
    web_config: Path | None = None  # --web.config.file: TLS and basic auth (docs/security.md)
    tool_env: Mapping[str, str] = field(default_factory=dict)  # environment the tools get
    kmsg_path: str = _DEFAULTS["kmsg_path"]
    dmesg: str = _DEFAULTS["dmesg"]
    journalctl: str = _DEFAULTS["journalctl"]
    xid_interval_s: float = _DEFAULTS["xid_interval_s"]
    xid_max_bytes_per_poll: int = _DEFAULTS["xid_max_bytes_per_poll"]
    xid_max_line_bytes: int = _DEFAULTS["xid_max_line_bytes"]
    node_name: str | None = None  # --node-name, else $NODE_NAME: gpu_health_node_info


def argument_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu-health-exporter",
        description="Export five GPU health counters per card from vendor tools.",
        exit_on_error=False,
    )
    for flag in FLAGS:
        p.add_argument(flag.flag, dest=flag.dest, default=flag.default,
                       metavar=flag.flag[2:].replace("-", "_").upper(),
                       help=flag.help if flag.kind == "text" else f"{flag.help} ({flag.default})")
    p.add_argument("--web.listen-address", dest="listen", default=":10346", help="host:port")
    p.add_argument("--web.config.file", dest="web_config", default=None,
                   help="exporter-toolkit web config: TLS and basic auth (docs/security.md)")
    p.add_argument("--node-name", dest="node_name", default=None,
                   help="the node's name, exported as gpu_health_node_info{node} (default: "
                        "$NODE_NAME; unset: not exported)")
    p.add_argument("--once", action="store_true", help="collect once, print, exit")
    p.add_argument("--textfile", help="also write the exposition atomically to this .prom file")
    p.add_argument("--log.level", OLD_LOG_FLAG, dest="log_level", default="info",
                   help=f"{LEVEL_NAMES} (info)")
    p.add_argument("--log.format", dest="log_format", default="logfmt",
                   help=f"{' or '.join(FORMATS)} (logfmt)")
    p.add_argument("--version", action="version", version=version_line("gpu-health-exporter"))
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
        args, unknown = argument_parser().parse_known_args(args_list)
    except argparse.ArgumentError as exc:
        raise ConfigError([str(exc)]) from exc
    problems = [f"unknown argument {u!r}" for u in unknown]
    values = {f.dest: _read(f, getattr(args, f.dest), problems) for f in FLAGS}
    interval, stale = values["collect_interval_s"], values["stale_after_s"]
    timeout = values["tool_timeout_s"]
    if interval and stale and stale < interval:
        problems.append(f"--stale-after ({stale:g}s) is shorter than --collect-interval "
                        f"({interval:g}s): every reading would expire before the next tick")
    if interval and timeout and timeout > interval:
        problems.append(f"--tool-timeout ({timeout:g}s) is longer than --collect-interval "
                        f"({interval:g}s)")
    host, port = _listen(args.listen, problems)
    _line_cap(values["xid_max_line_bytes"], problems)
    settings = Settings(
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
        node_name=_node_name(args.node_name, os.environ if environ is None else environ,
                             problems),
        **values,
    )
    if problems:
        raise ConfigError(problems)
    return settings


def _node_name(flag: str | None, environ: Mapping[str, str],
               problems: list[str]) -> str | None:
    name = flag if flag is not None else environ.get("NODE_NAME")
    if not name:
        return None
    if not is_node_name(name):
        problems.append(f"--node-name / $NODE_NAME: not a node name (printable, no surrounding "
                        f"spaces, at most {MAX_NODE_NAME} characters)")
        return None
    return name


def _line_cap(value: int, problems: list[str]) -> None:
    if 0 < value < MIN_LINE:
        problems.append(f"--xid-max-line-bytes: {value} is below {MIN_LINE} (a kernel log "
                        "record can be that long; shorter caps would drop valid lines)")


def _listen(text: str, problems: list[str]) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # [::1]:10346
    if not sep or not port.isdecimal() or int(port) > 65535:
        problems.append(f"--web.listen-address: {text!r} is not host:port (e.g. :10346)")
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
