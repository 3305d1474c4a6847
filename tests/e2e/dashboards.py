"""Reading the Grafana dashboards for tests: every panel (rows included), every PromQL
expression with its panel, the template variables, and Grafana's variable substitution.

Used by tests/evaluator/test_grafana_dashboards.py (structure, gap semantics with promtool) and
by the end-to-end test (every expression against the real Prometheus).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "grafana" / "dashboards"
PROVISIONING = REPO / "grafana" / "provisioning"

# What Grafana puts in for its built-in interval variables when a panel runs.
BUILTINS = {"__interval": "1m", "__rate_interval": "4m", "__range": "1h",
            "__interval_ms": "60000", "__range_s": "3600", "__range_ms": "3600000"}
_LABEL_VALUES = re.compile(r"label_values\((?:(?P<metric>.+),\s*)?(?P<label>\w+)\)\s*$")


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel_id: int
    panel: str
    ref: str
    expr: str


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def all_dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: load(p) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows keep their panels inside


def queries(name: str, dashboard: Mapping[str, Any]) -> list[Query]:
    return [Query(name, p["id"], p.get("title", ""), t["refId"], t["expr"])
            for p in panels(dashboard) for t in p.get("targets", []) if t.get("expr")]


def variables(dashboard: Mapping[str, Any]) -> dict[str, str]:
    """Query variable name -> its query (``label_values(...)``). The ``datasource`` variable
    (a data-source picker, no PromQL) is not one of them."""
    result: dict[str, str] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var.get("query")
        result[var["name"]] = query["query"] if isinstance(query, dict) else str(query)
    return result


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Grafana's substitution: ``$name``, ``${name}``, ``[[name]]`` and the built-ins."""
    merged = {**BUILTINS, **values}
    for name in sorted(merged, key=len, reverse=True):  # $__range_ms before $__range
        value = merged[name]
        expr = expr.replace("${" + name + "}", value).replace("[[" + name + "]]", value)
        expr = re.sub(r"\$" + re.escape(name) + r"(?![A-Za-z0-9_])", value, expr)
    return expr


def label_values(query: str) -> tuple[str, str]:
    """``label_values(metric{...}, label)`` -> (series selector, label) to run as PromQL."""
    match = _LABEL_VALUES.match(query.strip())
    if match is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return match.group("metric") or "up", match.group("label")


def unresolved(expr: str) -> list[str]:
    """Template references left after substitution (a typo in a variable name)."""
    return re.findall(r"\$\{?\w+\}?|\[\[\w+\]\]", expr)
