"""The ``alerting`` section and ``web.external_url`` of the evaluator config (docs/alerting.md).

Part of the settings (``evaluator/config/file.py`` calls these while validating the whole file);
nothing here reads env or argv. Each reader records every problem in the shared
:class:`~evaluator.config.values.Checker` and returns a usable default, so one run lists all
mistakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evaluator.config.values import Checker


@dataclass(frozen=True, slots=True)
class AlertingConfig:
    """The ``alerting`` section (durations in seconds). A missing ``enabled`` means enabled:
    an alerting path that is off unless someone remembers to switch it on never fires."""

    enabled: bool = True
    alertmanagers: tuple[str, ...] = ()
    resend_interval: float = 60.0
    node_removal_grace: float = 3600.0
    backlog_after: float = 72 * 3600.0
    timeout: float = 10.0


def parse_alerting(c: Checker, raw: Mapping[str, Any]) -> AlertingConfig:
    """The ``alerting`` section; every problem is recorded, defaults stand in for bad values."""
    section = c.section(raw, "alerting", ("enabled", "alertmanagers", "resend_interval",
                                          "node_removal_grace", "backlog_after", "timeout"))
    d = AlertingConfig()
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        c.problem(f"alerting.enabled must be true or false, got {enabled!r}")
        enabled = True
    resend = c.duration(section, "resend_interval", "alerting.resend_interval",
                        d.resend_interval)
    timeout = c.duration(section, "timeout", "alerting.timeout", min(d.timeout, resend))
    if timeout > resend:
        c.problem(f"alerting.timeout ({timeout:g}s) must not exceed alerting.resend_interval "
                  f"({resend:g}s)")
    return AlertingConfig(
        enabled=enabled,
        alertmanagers=tuple(c.urls(section, "alertmanagers", "alerting.alertmanagers")),
        resend_interval=resend,
        node_removal_grace=c.duration(section, "node_removal_grace",
                                      "alerting.node_removal_grace", d.node_removal_grace),
        backlog_after=c.duration(section, "backlog_after", "alerting.backlog_after",
                                 d.backlog_after),
        timeout=timeout,
    )


def parse_external_url(c: Checker, web: Mapping[str, Any]) -> str | None:
    """``web.external_url``: an absolute http(s) URL without query or fragment."""
    if web.get("external_url") is None:
        return None
    url = c.url(web, "external_url", "web.external_url")
    if url and ("?" in url or "#" in url):
        c.problem(f"web.external_url {url!r} must not have a query or fragment")
    return url.rstrip("/") or None
