"""The ``alerting`` section of the evaluator config (docs/alerting.md).

Part of the settings (``evaluator/config/file.py`` calls these while validating the whole file);
nothing here reads env or argv. Each reader records every problem in the shared
:class:`~gpu_health.evaluator.config.values.Checker` and returns a usable default, so one run lists
all mistakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.setting_tables import Setting, Table

ALERTING: Final = Table("alerting", (
    # A missing ``enabled`` means enabled: an alerting path that is off unless someone
    # remembers to switch it on never fires.
    Setting("enabled", "bool", True),
    Setting("alertmanagers", "custom", ()),  # http(s) URLs
    Setting("resend_interval", "duration", 60.0),
    Setting("node_removal_grace", "duration", 3600.0),
    Setting("backlog_after", "duration", 72 * 3600.0),
    Setting("timeout", "custom", 10.0),  # at most resend_interval (its default too)
))


@dataclass(frozen=True, slots=True)
class AlertingConfig:
    """The ``alerting`` section (durations in seconds)."""

    enabled: bool = ALERTING.defaults["enabled"]
    alertmanagers: tuple[str, ...] = ALERTING.defaults["alertmanagers"]
    resend_interval: float = ALERTING.defaults["resend_interval"]
    node_removal_grace: float = ALERTING.defaults["node_removal_grace"]
    backlog_after: float = ALERTING.defaults["backlog_after"]
    timeout: float = ALERTING.defaults["timeout"]


def parse_alerting(c: Checker, raw: Mapping[str, Any]) -> AlertingConfig:
    """The ``alerting`` section; every problem is recorded, defaults stand in for bad values."""
    section = c.section(raw, "alerting", ALERTING.keys)
    values = ALERTING.read(c, section)
    timeout = c.duration_at_most(section, "timeout", "alerting.timeout",
                                 ALERTING.defaults["timeout"], values["resend_interval"],
                                 "alerting.resend_interval")
    return AlertingConfig(
        alertmanagers=tuple(c.urls(section, "alertmanagers", "alerting.alertmanagers")),
        timeout=timeout, **values,
    )
