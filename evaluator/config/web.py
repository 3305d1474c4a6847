"""The ``web`` section: where the evaluator listens and how others reach it.

    web:
      listen_address: 127.0.0.1:10347   # host:port, [v6]:port or :port (all interfaces)
      external_url: https://gpu-health.example.com   # alert links; default http://<listen>

TLS and basic auth come from ``--web.config.file`` (the exporter-toolkit's file,
``gpu_health.webconfig``), not from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

DEFAULT_LISTEN: Final = "127.0.0.1:10347"
WEB: Final = Table("web", (
    Setting("listen_address", "custom", DEFAULT_LISTEN),  # host:port, [v6]:port or :port
    Setting("external_url", "custom", None),  # None: http://<listen address>
))


def split_listen(text: str) -> tuple[str, int] | None:
    """``host:port``, ``[v6]:port`` or ``:port`` (all interfaces); port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else (host or "0.0.0.0")
    if (
        not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535
        or (":" in host and not bracketed)
    ):
        return None
    return host, int(port)


def join_listen(host: str, port: int) -> str:
    """The address :func:`split_listen` reads back (``[v6]:port`` for an IPv6 host)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """``listen_address`` as ``host:port`` (``:port`` already read as 0.0.0.0)."""

    listen_address: str = WEB.defaults["listen_address"]
    external_url: str | None = WEB.defaults["external_url"]

    @property
    def listen_host(self) -> str:
        return self._split()[0]

    @property
    def listen_port(self) -> int:
        return self._split()[1]

    @property
    def url(self) -> str:
        """Base URL of this evaluator as others reach it (alert links point here)."""
        return self.external_url or f"http://{self.listen_address}"

    def _split(self) -> tuple[str, int]:
        address = split_listen(self.listen_address)
        if address is None:  # parse_web refuses it; a hand-built config must not pass either
            raise ValueError(f"web.listen_address {self.listen_address!r} is not host:port")
        return address



def parse_web(c: Checker, raw: Mapping[str, Any]) -> ListenerConfig:
    section = c.section(raw, "web", WEB.keys)
    text = c.string(section, "listen_address", "web.listen_address", DEFAULT_LISTEN)
    address = split_listen(text)
    if address is None:
        c.problem(f"web.listen_address {text!r} must be 'host:port' (port 0-65535)")
        address = split_listen(DEFAULT_LISTEN)
        assert address is not None  # the default parses
    return ListenerConfig(join_listen(*address), _external_url(c, section))


def _external_url(c: Checker, web: Mapping[str, Any]) -> str | None:
    """``web.external_url``: an absolute http(s) URL without query or fragment."""
    if web.get("external_url") is None:
        return None
    url = c.url(web, "external_url", "web.external_url")
    if url and ("?" in url or "#" in url):
        c.problem(f"web.external_url {url!r} must not have a query or fragment")
    return url.rstrip("/") or None
