"""``gpu-health-evaluator demo``: the whole product on one machine in one command.

1. Seeds simulated history (``source='simulated'``, nodes ``sim-<profile>``: degrading, burst,
   card swap, ...) into the store, replacing the previous demo's simulated rows. Simulated data
   shows up only with ``?source=simulated`` and never alerts.
2. Starts the exporter as a subprocess (this is the one module of the evaluator that launches
   processes): with the real ``nvidia-smi`` when one is on PATH, else with the fake one of a
   source checkout (``tests/fakebin``) replaying a degrading H100 whose state file this module
   advances over time: its correctable count grows faster and faster, and after about two
   minutes it logs one uncorrectable error.
3. Runs the evaluator (scrape, store, predict, /metrics, the API) on the embedded DuckDB file,
   prints where to look, and runs until Ctrl-C or ``--duration`` seconds; then stops everything.
   The demo runs the prediction worker every minute (the product: every
   ``scan_interval_minutes`` of the rule file, 30 by default), so the live card's first
   prediction appears within the first few minutes; the banner says so.

Readings scraped from the fake tool are stored as ``source='simulated'`` (fake readings are not
real data: they must never reach real statistics or alerts, even in the default store); readings
of a real ``nvidia-smi`` are real data and stored as ``source='real'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from evaluator.config.file import load_config, parse_config
from evaluator.config.values import Checker
from evaluator.simulate.options import SimulateOptions
from gpu_health.errors import ConfigError

log = logging.getLogger(__name__)

DEMO_NODE: Final = "demo-node-01"
FAKE_TOOL: Final = Path(__file__).resolve().parents[1] / "tests" / "fakebin" / "nvidia-smi"
SIM_DAYS: Final = 9.0  # the degrading profile fires from day 7.7: predictions at start-up
SIM_CARDS: Final = 2
COLLECT_SECONDS: Final = 5
ADVANCE_SECONDS: Final = 10.0
WORKER_SECONDS: Final = 60.0  # the product default is the rule file's 30 minutes
FAULT_AFTER_ADVANCES: Final = 18  # the live card's uncorrectable error, ~3 minutes in
FAKE_UUID: Final = "GPU-00000000-0000-0000-0000-000000000000"  # card 0 of the fake nvidia-smi
HISTORY_STEP: Final = timedelta(minutes=5)
EXPORTER_START_S: Final = 20.0


@dataclass(frozen=True, slots=True)
class DemoOptions:
    storage_path: Path
    duration: float | None
    port: int
    exporter_port: int
    config: Path | None


def demo_options(args: argparse.Namespace) -> DemoOptions:
    c = Checker()
    if args.duration is not None and not 0 < args.duration <= 30 * 86400:
        c.problem(f"--duration must be a number of seconds > 0, got {args.duration:g}")
    for name in ("port", "exporter_port"):
        if not 0 <= getattr(args, name) <= 65535:
            c.problem(f"--{name.replace('_', '-')} must be 0..65535")
    c.raise_if_any()
    return DemoOptions(args.storage, args.duration, args.port, args.exporter_port, args.config)


def _free_port(wanted: int) -> int:
    """``wanted`` if it can be bound on 127.0.0.1, else (or for 0) a free one."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
        except OSError:
            if wanted == 0:
                raise
            log.warning("port %d is busy; picking a free one", wanted)
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(storage: Path, live: bool) -> tuple[int, int]:
    """Replace the simulated history (``simulate --purge`` touches simulated rows only); with
    the fake tool, also the live card's past days
    (:data:`evaluator.simulate.profiles.LIVE_DAILY`), ending now, so its trend can be judged
    within minutes. Returns (rows written, the live card's count now)."""
    from evaluator.model import CardKey
    from evaluator.simulate.profiles import LIVE_DAILY, PROFILES, live_history
    from evaluator.simulate.writer import run_simulation, write_series
    from gpu_health.contract import SOURCE_SIMULATED

    run_simulation(SimulateOptions(storage_path=storage, purge=True), progress=False)
    written = sum(run_simulation(SimulateOptions(
        storage_path=storage, profiles=PROFILES, cards=SIM_CARDS, days=SIM_DAYS),
        progress=False).values())
    if live:
        written += write_series(storage, live_history(
            CardKey(DEMO_NODE, 0, SOURCE_SIMULATED), FAKE_UUID, datetime.now(UTC), HISTORY_STEP))
    return written, sum(LIVE_DAILY)


class FakeCard:
    """The fake tool's state file: a card whose correctable count grows faster and faster (the
    v2 trend signal warns within about a minute, given its seeded past days) and which, after
    ``FAULT_AFTER_ADVANCES`` advances, logs one uncorrectable error (the strong signal)."""

    def __init__(self, path: Path, corrected: int = 40) -> None:
        self.path = path
        self.corrected = corrected
        self.uncorrected = 0
        self.step = 1

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cards": {"0": {
            "ecc.errors.corrected.aggregate.total": self.corrected,
            "ecc.errors.uncorrected.aggregate.total": self.uncorrected}}}))
        tmp.replace(self.path)  # atomic: the fake re-reads it on every call

    def advance(self) -> None:
        self.corrected += self.step
        self.step += 1
        if self.step > FAULT_AFTER_ADVANCES:
            self.uncorrected = 1
        self.write()


Exporter = tuple[subprocess.Popen[bytes], str, "FakeCard | None"]


def real_tool(environ: Mapping[str, str]) -> bool:
    """A real nvidia-smi on PATH: the demo reads it (real data), else the fake one."""
    return shutil.which("nvidia-smi", path=environ.get("PATH")) is not None


def _start_exporter(port: int, folder: Path, environ: Mapping[str, str], real: bool,
                    corrected: int) -> Exporter:
    """The exporter subprocess, what it collects from, and the fake card (None: ``real``, the
    nvidia-smi on PATH)."""
    argv = [sys.executable, "-m", "exporter.main", f"--web.listen-address=127.0.0.1:{port}",
            f"--collect-interval={COLLECT_SECONDS}s", f"--stale-after={3 * COLLECT_SECONDS}s",
            f"--tool-timeout={COLLECT_SECONDS}s"]
    env = dict(environ)
    card: FakeCard | None = None
    if real:
        source = "the real nvidia-smi on PATH"
    elif FAKE_TOOL.exists():
        card = FakeCard(folder / "nvidia-state.json", corrected)
        card.write()
        env["FAKE_NVIDIA_STATE"] = str(card.path)
        argv += [f"--nvidia-smi={FAKE_TOOL}", "--xpu-smi=", "--cnmon="]
        source = "the fake nvidia-smi (tests/fakebin) replaying a degrading H100"
    else:
        raise ConfigError("no nvidia-smi on PATH and no fake tools (tests/fakebin, in a source "
                          "checkout): the demo needs one of them")
    log_file = (folder / "exporter.log").open("wb")
    with log_file:
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    return proc, source, card


def _wait_for_exporter(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + EXPORTER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"the exporter exited ({proc.returncode}); see {log_path}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            if b"gpu_health_gpu_info{" in response.read():
                return
        time.sleep(0.2)  # polling a starting process, bounded by the deadline
    raise ConfigError(f"the exporter did not serve a card within {EXPORTER_START_S:g}s; "
                      f"see {log_path}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


LIVE_FAKE: Final = """The live card has 9 days of seeded
history; its correctable errors now ramp up, so the v2 trend signal warns about it within
about a minute, BEFORE it logs an uncorrectable error about three minutes in (which makes
that prediction a hit). Its hourly ECC increases are in ecc-rate."""
LIVE_REAL: Final = """The live node reads your real nvidia-smi: real
data, stored and predicted like any real card (the prediction state on /metrics includes it)."""


def _banner(ev: str, exporter: str, source: str, storage: Path, rows: int, node: str,
            live: str) -> str:
    api = f"{ev}/api/v1/gpu-health"
    live_card = LIVE_FAKE if live == "simulated" else LIVE_REAL
    pad = " " * len(ev)
    return f"""
gpu-health demo is running (Ctrl-C stops it).

  exporter   {exporter}/metrics
             collecting from {source}; live node "{node}"
  page       {ev}/             the GPU health page: statistics, predictions, ECC rate,
             {pad}              capabilities (switch it to "simulated" for the seeded nodes)
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

The demo runs the prediction worker every {WORKER_SECONDS:g} s (the product: every
scan_interval_minutes of the rule file, 30 by default). {live_card}
Simulated predictions appear only with ?source=simulated; they never alert and never count in
the real statistics. The thresholds are initial empirical values awaiting calibration.
"""


async def _serve(options: DemoOptions, exporter_url: str, card: FakeCard | None,
                 node: str, banner: tuple[str, Path, int], environ: Mapping[str, str]) -> None:
    from evaluator.compose import build_service
    from evaluator.http.server import bind, listening

    base = load_config(options.config, environ) if options.config else None
    raw = {
        "scrape": {"interval": f"{COLLECT_SECONDS}s", "timeout": f"{COLLECT_SECONDS}s"},
        "static_configs": [{"targets": [exporter_url.removeprefix("http://")],
                            "labels": {"node": node, "tenant": "demo"}}],
        "web": {"listen_address": f"127.0.0.1:{options.port}"},
    }
    config = parse_config(raw, base=Path.cwd())
    changes: dict[str, Any] = {"storage_path": options.storage_path,
                               "ingest_source": "real" if card is None else "simulated"}
    if base is not None:
        changes["rules"] = base.rules  # a --config only chooses the rule set
    service = build_service(replace(config, **changes), environ,
                            worker_interval=WORKER_SECONDS)
    async with listening(service.web_app, bind("127.0.0.1", options.port)) as port:
        print(_banner(f"http://127.0.0.1:{port}", exporter_url, banner[0], banner[1],
                      banner[2], node, "real" if card is None else "simulated"), flush=True)
        await _until_stopped(options.duration, card)


async def _until_stopped(duration: float | None, card: FakeCard | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    ends = None if duration is None else loop.time() + duration
    while not stop.is_set():
        wait = ADVANCE_SECONDS if ends is None else min(ADVANCE_SECONDS, ends - loop.time())
        if wait <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)
        if card is not None and not stop.is_set():
            card.advance()
    print("stopping the demo", flush=True)


def run_demo(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = demo_options(args)
    real = real_tool(environ)
    rows, corrected = _seed(options.storage_path, live=not real)
    exporter_port = _free_port(options.exporter_port)
    options = DemoOptions(options.storage_path, options.duration,
                          _free_port(options.port) if options.port else 0, exporter_port,
                          options.config)
    folder = Path(tempfile.mkdtemp(prefix="gpu-health-demo-"))
    exporter_url = f"http://127.0.0.1:{exporter_port}"
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc, source, card = _start_exporter(exporter_port, folder, environ, real, corrected)
        node = DEMO_NODE if card is not None else socket.gethostname()
        _wait_for_exporter(proc, f"{exporter_url}/metrics", folder / "exporter.log")
        asyncio.run(_serve(options, exporter_url, card, node,
                           (source, options.storage_path, rows), environ))
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
    return 0
