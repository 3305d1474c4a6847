"""grafana/: dashboard structure (unique ids, no overlapping panels, the ``${datasource}`` picker,
the four sections in order, the permanent calibration notice, "insufficient samples" instead of
a ratio) and the PromQL gap semantics of the hourly ECC panels, evaluated by the real promtool:
an hour that cannot be computed (unknown, counter drop, card swap) is a gap, never 0 or a spike.
Every expression also runs against a real Prometheus in tests/e2e."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import dashboards as d
from tests.promtool import promtool

ALL = d.all_dashboards()
MAIN = ALL["gpu-health.json"]


def test_both_dashboards_exist_with_unique_uids() -> None:
    assert set(ALL) == {"gpu-health.json", "gpu-health-fleet.json"}
    uids = [dash["uid"] for dash in ALL.values()]
    assert len(set(uids)) == len(uids)
    for dash in ALL.values():
        assert dash["title"] and dash["schemaVersion"] >= 36 and "gpu-health" in dash["tags"]


@pytest.mark.parametrize("name", sorted(ALL))
def test_panel_ids_are_unique_and_panels_do_not_overlap(name: str) -> None:
    panels = list(d.panels(ALL[name]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    boxes = [(p["id"], p["gridPos"]) for p in panels]
    for i, (a, ga) in enumerate(boxes):
        assert ga["x"] + ga["w"] <= 24, a
        for b, gb in boxes[i + 1:]:
            apart = (ga["x"] + ga["w"] <= gb["x"] or gb["x"] + gb["w"] <= ga["x"]
                     or ga["y"] + ga["h"] <= gb["y"] or gb["y"] + gb["h"] <= ga["y"])
            assert apart, f"panels {a} and {b} overlap"


DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_query_uses_the_datasource_variable(name: str) -> None:
    """Loaded by kube-prometheus-stack's sidecar (its Prometheus uid is ``prometheus``) or
    imported in the UI, a dashboard that names a uid fails on every panel (reported against
    dcgm-exporter's dashboards): every panel, target and query variable reads
    ``${datasource}``."""
    dash = ALL[name]
    [picker] = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
    assert picker["name"] == "datasource" and picker["query"] == "prometheus"
    assert picker["current"] == {}, "a saved choice would name a uid of one Grafana"
    for panel in d.panels(dash):
        if not panel.get("targets"):
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == DATASOURCE, var["name"]
    [ds_input] = dash["__inputs"]
    assert ds_input["type"] == "datasource" and ds_input["pluginId"] == "prometheus"


@pytest.mark.parametrize("name", sorted(ALL))
def test_no_panel_names_a_datasource_uid_literally(name: str) -> None:
    def uids(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                yield str(node["datasource"].get("uid"))
            for value in node.values():
                yield from uids(value)
        elif isinstance(node, list):
            for value in node:
                yield from uids(value)

    found = set(uids(ALL[name]))
    assert found == {"${datasource}"}, found
    text = (d.DASHBOARDS / name).read_text()
    assert "gpu-health-prometheus" not in text and "${DS_PROMETHEUS}" not in text


@pytest.mark.parametrize("name", sorted(ALL))
def test_rates_use_the_rate_interval(name: str) -> None:
    """``rate()`` over a fixed window breaks at scrape intervals above a quarter of it;
    Grafana's ``$__rate_interval`` follows the data source's scrape interval. Panels that
    count per fixed window (``increase(...[15m])`` titled "per 15 min") keep theirs."""
    for q in d.queries(name, ALL[name]):
        for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", q.expr):
            assert window == "$__rate_interval", f"{q.panel}: rate over {window}"
        for window in re.findall(r"\bincrease\([^\[]*\[([^\]]+)\]", q.expr):
            if window != "$__rate_interval" and "offset" not in q.expr:
                minutes = window.removesuffix("m")
                assert f"per {minutes} min" in q.panel, f"{q.panel}: increase over {window}"


def test_dashboard_provisioning_points_at_the_mounted_folder() -> None:
    doc = yaml.safe_load((d.PROVISIONING / "dashboards" / "gpu-health.yml").read_text())
    [provider] = doc["providers"]
    assert provider["type"] == "file" and provider["folder"] == "GPU health"
    compose = yaml.safe_load((d.REPO / "deploy" / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"../grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "../grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_calibration_notice_is_the_first_panel(name: str) -> None:
    first = min(d.panels(ALL[name]), key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    assert first["type"] == "text"
    assert "awaiting calibration" in first["options"]["content"]
    assert "not 0%" in first["options"]["content"]


def test_the_four_sections_are_in_the_reference_order() -> None:
    rows = sorted((p for p in d.panels(MAIN) if p["type"] == "row"),
                  key=lambda p: p["gridPos"]["y"])
    titles = [r["title"] for r in rows]
    assert [t.split(".")[0] for t in titles] == ["1", "2", "3", "4"]
    for title, word in zip(titles, ("statistics", "Predictions", "ECC", "capability"),
                           strict=True):
        assert word in title


def test_ratios_show_insufficient_samples_instead_of_a_number() -> None:
    ratio_panels = [p for p in d.panels(MAIN) if any(
        k in p.get("title", "") for k in ("Precision", "Recall", "F1"))]
    assert len(ratio_panels) == 6  # three ratios x the 7-day and 30-day windows
    for panel in ratio_panels:
        assert panel["fieldConfig"]["defaults"]["noValue"] == "insufficient samples"
    for window in ("7", "30"):
        assert sum(f'window_days="{window}"' in t["expr"] for p in ratio_panels
                   for t in p["targets"]) == 3


def hourly_panels() -> list[dict[str, Any]]:
    return [p for p in d.panels(MAIN) if p.get("title", "").endswith("ECC errors per hour")]


def test_hourly_panels_never_turn_unknown_into_zero() -> None:
    panels = hourly_panels()
    assert len(panels) == 2
    for panel in panels:
        [target] = panel["targets"]
        expr = target["expr"]
        assert "offset 1h" in expr and ">= 0" in expr and 'uuid' not in expr
        for forbidden in ("increase(", "rate(", "or vector(0)", "> bool"):
            assert forbidden not in expr, f"{panel['title']}: {forbidden}"
        custom = panel["fieldConfig"]["defaults"]["custom"]
        assert custom["spanNulls"] is False and custom["drawStyle"] == "bars"
        assert panel["interval"] == "1h" and "nullValueMode" not in panel


def test_template_variables_resolve_everywhere() -> None:
    assert set(d.variables(MAIN)) == {"node", "gpu"}
    for name, dash in ALL.items():
        for q in d.queries(name, dash):
            left = d.unresolved(d.substitute(q.expr, {"node": "n1", "gpu": "0"}))
            assert left == [], f"{name} {q.panel}: {left}"


# -- gap semantics, evaluated by promtool's PromQL engine ----------------------------------------

LABELS = 'gpu="0",instance="n1:10346",job="gpu-health-exporter",node="n1",vendor="nvidia"'


def _values(points: dict[int, int]) -> str:
    """5-minute steps 0..72 (6 h); a step without a point is missing ('_')."""
    return " ".join(str(points[i]) if i in points else "_" for i in range(73))


def _series(metric: str) -> list[dict[str, str]]:
    card_a = {i: 10 * i for i in range(13)}  # +120 in the first hour
    card_a |= dict.fromkeys(range(13, 25), 120)  # then flat: a real, known 0
    # 2h05-2h55 unknown (the metric is absent), then back at a higher value
    card_a |= {i: 1000 + 10 * (i - 36) for i in range(36, 48)}
    card_a |= {i: 5 + (i - 48) for i in range(48, 60)}  # 4h: counter drop (driver reset)
    card_b = {i: 3 + (i - 60) for i in range(60, 73)}  # 5h: the slot holds a new card
    return [{"series": f'{metric}{{{LABELS},uuid="GPU-A"}}', "values": _values(card_a)},
            {"series": f'{metric}{{{LABELS},uuid="GPU-B"}}', "values": _values(card_b)}]


def _sample(uuid: str, value: int) -> dict[str, Any]:
    return {"labels": f'{{{LABELS},uuid="{uuid}"}}', "value": value}


# eval time -> expected samples (empty: a gap)
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "1h": [_sample("GPU-A", 120)],
    "2h": [_sample("GPU-A", 0)],  # both ends known and equal: a true zero
    "2h30m": [],  # unknown now: gap, not 0
    "3h30m": [],  # unknown an hour ago: gap, not a spike of +1060
    "4h": [],  # counter dropped 1000 -> 5: gap, not a negative bar
    "4h30m": [],
    "5h30m": [],  # card swapped (new UUID): gap, no spike, no cross-card subtraction
    "6h": [_sample("GPU-B", 12)],  # the new card, once it has an hour of its own
}


@pytest.mark.parametrize("panel", hourly_panels(), ids=lambda p: p["title"])
def test_hourly_increase_gaps_with_promtool(panel: dict[str, Any], tmp_path: Path) -> None:
    expr = d.substitute(panel["targets"][0]["expr"], {"node": "n1", "gpu": "0"})
    metric = expr.split("{", 1)[0].strip("( ")
    doc = {"evaluation_interval": "5m", "tests": [{
        "interval": "5m", "input_series": _series(metric),
        "promql_expr_test": [{"expr": expr, "eval_time": t, "exp_samples": samples}
                             for t, samples in EXPECTED.items()],
    }]}
    path = tmp_path / "hourly.test.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
