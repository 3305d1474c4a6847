"""``gpu-health-evaluator demo``: the whole product on one machine in one command.

1. Seeds simulated history (``source='simulated'``, nodes ``sim-<profile>``: degrading, burst,
   card swap, ...) into the store, replacing the previous demo's simulated rows. Simulated data
   shows up only with ``?source=simulated`` and never alerts.
2. Starts the exporter as a subprocess (this package is the one part of the evaluator that
   launches processes) under :mod:`~gpu_health.evaluator.demo.guard`, which ends it and removes
   the demo's temporary folder however the evaluator ends (SIGKILL included): with the real
   ``nvidia-smi`` when one is on PATH, else with the packaged fake one
   (:data:`gpu_health.resources.FAKEBIN`) replaying a degrading H100 whose state file
   (:mod:`~gpu_health.evaluator.demo.card`) is advanced over time: its correctable count grows
   faster and faster, and after about three minutes it logs one uncorrectable error.
3. Runs the evaluator (scrape, store, predict, /metrics, the API) on the embedded DuckDB file,
   prints where to look, and runs until Ctrl-C or ``--duration`` seconds; then stops everything.
   The demo runs the prediction worker every minute (the product: every
   ``scan_interval_minutes`` of the rule file, 30 by default), so the live card's first
   prediction appears within the first few minutes; the banner says so.

Everything that can refuse the demo (no tool, a bad ``--config``, a rule set that does not
load) is checked by :func:`plan` before the store is written.

Readings scraped from the fake tool are stored as ``source='simulated'`` (fake readings are not
real data: they must never reach real statistics or alerts, even in the default store); readings
of a real ``nvidia-smi`` are real data and stored as ``source='real'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from gpu_health import resources
from gpu_health.errors import ConfigError
from gpu_health.evaluator.config.file import Config, load_config, parse_config
from gpu_health.evaluator.config.rules import load_ruleset
from gpu_health.evaluator.config.storage import StorageConfig
from gpu_health.evaluator.config.values import Checker
from gpu_health.evaluator.demo.banner import WORKER_SECONDS, banner_text
from gpu_health.evaluator.demo.card import FakeCard
from gpu_health.evaluator.demo.guard import STOP_S
from gpu_health.evaluator.simulate.options import SimulateOptions

log = logging.getLogger(__name__)

DEMO_NODE: Final = "demo-node-01"
FAKE_TOOL: Final = resources.FAKEBIN / "nvidia-smi"  # packaged: works from a wheel too
SIM_DAYS: Final = 9.0  # the degrading profile fires from day 7.7: predictions at start-up
SIM_CARDS: Final = 2
COLLECT_SECONDS: Final = 5
ADVANCE_SECONDS: Final = 10.0
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
    (:data:`gpu_health.evaluator.simulate.profiles.LIVE_DAILY`), ending now, so its trend can be
    judged within minutes. Returns (rows written, the live card's count now)."""
    from gpu_health.contract import SOURCE_SIMULATED
    from gpu_health.evaluator.model import CardKey
    from gpu_health.evaluator.simulate.profiles import LIVE_DAILY, PROFILES, live_history
    from gpu_health.evaluator.simulate.writer import run_simulation, write_series

    run_simulation(SimulateOptions(storage_path=storage, purge=True), progress=False)
    written = sum(run_simulation(SimulateOptions(
        storage_path=storage, profiles=PROFILES, cards=SIM_CARDS, days=SIM_DAYS),
        progress=False).values())
    if live:
        written += write_series(storage, live_history(
            CardKey(DEMO_NODE, 0, SOURCE_SIMULATED), FAKE_UUID, datetime.now(UTC), HISTORY_STEP))
    return written, sum(LIVE_DAILY)


@dataclass(frozen=True, slots=True)
class Plan:
    """What the demo will run, all checked before anything is written: the tool it collects
    from (None: the real nvidia-smi on PATH, else the packaged fake), the ports, the config."""

    options: DemoOptions
    fake: Path | None
    node: str
    exporter_url: str
    config: Config


def real_tool(environ: Mapping[str, str]) -> bool:
    """A real nvidia-smi on PATH: the demo reads it (real data), else the fake one."""
    return shutil.which("nvidia-smi", path=environ.get("PATH")) is not None


def plan(options: DemoOptions, environ: Mapping[str, str]) -> Plan:
    """Everything that can refuse the demo, refused before the store is touched: no nvidia-smi
    and no packaged fake, a bad ``--config``, a rule set that does not load, busy ports."""
    fake = None if real_tool(environ) else FAKE_TOOL
    if fake is not None and not os.access(fake, os.X_OK):
        raise ConfigError(f"no nvidia-smi on PATH and the packaged fake tool {fake} is missing "
                          "or not executable: reinstall gpu-health")
    base = load_config(options.config, environ) if options.config else None
    options = replace(options, exporter_port=_free_port(options.exporter_port),
                      port=_free_port(options.port) if options.port else 0)
    exporter_url = f"http://127.0.0.1:{options.exporter_port}"
    node = DEMO_NODE if fake is not None else socket.gethostname()
    raw = {
        "scrape": {"interval": f"{COLLECT_SECONDS}s", "timeout": f"{COLLECT_SECONDS}s"},
        "static_configs": [{"targets": [exporter_url.removeprefix("http://")],
                            "labels": {"node": node, "tenant": "demo"}}],
        "web": {"listen_address": f"127.0.0.1:{options.port}"},
    }
    changes: dict[str, Any] = {"storage": StorageConfig(path=options.storage_path),
                               "ingest_source": "real" if fake is None else "simulated"}
    if base is not None:
        changes["rules"] = base.rules  # a --config only chooses the rule set
    config = replace(parse_config(raw, base=Path.cwd()), **changes)
    load_ruleset(config.rules.dir / f"{config.rules.active}.yaml", env=environ)
    return Plan(options, fake, node, exporter_url, config)


def _start_exporter(p: Plan, folder: Path, environ: Mapping[str, str],
                    corrected: int) -> tuple[subprocess.Popen[bytes], str, FakeCard | None]:
    """The exporter, started under :mod:`~gpu_health.evaluator.demo.guard` (which ends it and
    removes ``folder`` however this process ends), what it collects from, and the fake card."""
    argv = [sys.executable, "-m", "gpu_health.exporter.main",
            f"--web.listen-address=127.0.0.1:{p.options.exporter_port}",
            f"--collect-interval={COLLECT_SECONDS}s", f"--stale-after={3 * COLLECT_SECONDS}s",
            f"--tool-timeout={COLLECT_SECONDS}s"]
    env = dict(environ)
    card: FakeCard | None = None
    source = "the real nvidia-smi on PATH"
    if p.fake is not None:
        card = FakeCard(folder / "nvidia-state.json", corrected)
        card.write()
        env["FAKE_NVIDIA_STATE"] = str(card.path)
        argv += [f"--nvidia-smi={p.fake}", "--xpu-smi=", "--cnmon="]
        source = "the packaged fake nvidia-smi replaying a degrading H100"
    guard = [sys.executable, "-m", "gpu_health.evaluator.demo.guard", str(os.getpid()),
             str(folder), str(folder / "exporter.log"), "--", *argv]
    proc = subprocess.Popen(guard, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
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


def _stop(guard: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the guard: it ends the exporter and removes the demo's folder."""
    if guard.poll() is None:
        guard.terminate()
        try:
            guard.wait(2 * STOP_S)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait(5)


async def _serve(p: Plan, card: FakeCard | None, banner: tuple[str, Path, int, Path],
                 environ: Mapping[str, str]) -> None:
    from gpu_health.evaluator.compose import build_service
    from gpu_health.evaluator.http.server import bind, listening

    service = build_service(p.config, environ, worker_interval=WORKER_SECONDS)
    async with listening(service.web_app, bind("127.0.0.1", p.options.port)) as port:
        print(banner_text(f"http://127.0.0.1:{port}", p.exporter_url, banner[0], banner[1],
                      banner[2], p.node, "real" if card is None else "simulated", banner[3]),
              flush=True)
        await _until_stopped(p.options.duration, card)


async def _until_stopped(duration: float | None, card: FakeCard | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
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
    p = plan(demo_options(args), environ)
    rows, corrected = _seed(p.options.storage_path, live=p.fake is not None)
    folder = Path(tempfile.mkdtemp(prefix="gpu-health-demo-"))
    guard: subprocess.Popen[bytes] | None = None
    try:
        guard, source, card = _start_exporter(p, folder, environ, corrected)
        _wait_for_exporter(guard, f"{p.exporter_url}/metrics", folder / "exporter.log")
        asyncio.run(_serve(p, card, (source, p.options.storage_path, rows, folder), environ))
    finally:
        if guard is not None:
            _stop(guard)
        shutil.rmtree(folder, ignore_errors=True)
    return 0
