"""Where the files the programs read at run time are: the package's own data folder.

The wheel carries them as package data under ``gpu_health/data/``: the rule sets, action
policies and baselines (``rules/``), the Prometheus rule files (``rules/prometheus/``), the
Grafana dashboards and provisioning (``grafana/``), and the demo's fake vendor tools
(``fakebin/``) with the captured output they replay (``fixtures/``). In a source checkout the
same names are links to the top-level folders (``rules/``, ``grafana/``, ``tests/fakebin/``,
``tests/fixtures/``), so an installed wheel and a checkout read one layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

DATA: Final = Path(__file__).parent / "data"
RULES: Final = DATA / "rules"
PROMETHEUS_RULES: Final = RULES / "prometheus"
DASHBOARDS: Final = DATA / "grafana" / "dashboards"
FAKEBIN: Final = DATA / "fakebin"
