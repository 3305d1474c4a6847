"""What the demo prints once everything runs: where to look, and what the live card will do."""

from __future__ import annotations

from pathlib import Path
from typing import Final

WORKER_SECONDS: Final = 60.0  # the product default is the rule file's 30 minutes


LIVE_FAKE: Final = """The live card has 9 days of seeded
history; its correctable errors now ramp up, so the v2 trend signal warns about it within
about a minute, BEFORE it logs an uncorrectable error about three minutes in (which makes
that prediction a hit). Its hourly ECC increases are in ecc-rate."""
LIVE_REAL: Final = """The live node reads your real nvidia-smi: real
data, stored and predicted like any real card (the prediction state on /metrics includes it)."""


def banner_text(ev: str, exporter: str, source: str, storage: Path, rows: int, node: str,
                live: str, folder: Path) -> str:
    api = f"{ev}/api/v1/gpu-health"
    live_card = LIVE_FAKE if live == "simulated" else LIVE_REAL
    pad = " " * len(ev)
    return f"""
gpu-health demo is running (Ctrl-C stops it).

  exporter   {exporter}/metrics
             collecting from {source}; live node "{node}"
  page       {ev}/?source=simulated
             {pad}              the GPU health page on the simulated nodes: statistics,
             {pad}              predictions, ECC rate, capabilities ({ev}/ is the real data)
  evaluator  {ev}/endpoints    what is served here, with links
             {ev}/metrics      self-metrics + the REAL prediction state (what Grafana
             {pad}              reads): the simulated cards are kept out of it, so it shows
             {pad}              no open prediction for them
             {ev}/targets      scrape status of the exporter
  API        {api}/predictions?source=simulated
             {api}/prediction-stats?source=simulated
             {api}/capabilities?source=simulated
             {api}/samples?node_id={node}&gpu_index=0&source={live}   (the live node)
             {api}/ecc-rate?node_id={node}&gpu_index=0&source={live}   (hourly increases)
             {api}/predictions?node_id={node}&source={live}   (the live node's predictions)
             {ev}/api/v1/openapi.json
  store      {storage} ({rows} simulated rows: nodes sim-<profile>)
  files      {folder}   the exporter's log (removed when the demo ends)

The demo runs the prediction worker every {WORKER_SECONDS:g} s (the product: every
scan_interval_minutes of the rule file, 30 by default). {live_card}
Simulated predictions appear only with ?source=simulated; they never alert and never count in
the real statistics. The thresholds are initial empirical values awaiting calibration.
"""
