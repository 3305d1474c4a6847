"""A throwaway Slurm cluster on 127.0.0.1 for tests: Debian's ``munge`` and ``slurm-wlm``
(slurmctld and one slurmd per node on this host, each node on its own port), all state under a
temp dir, nothing in /etc. Needs root (slurmd runs as root; CI does) and the packages
(``.ci/run`` installs them); otherwise the tests skip saying so.

Started in ~2 s here (munged, slurmctld, two slurmd; the nodes report ``idle``), stopped with
SIGTERM through the pid files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
NODES = ("gh-n1", "gh-n2", "gh-n3")


def require_slurm() -> None:
    missing = [p for p in (MUNGED, SLURMCTLD, SLURMD) if not os.access(p, os.X_OK)]
    missing += [c for c in ("sinfo", "scontrol") if shutil.which(c) is None]
    if missing:
        pytest.skip(f"Slurm not installed ({', '.join(missing)} missing; Debian packages "
                    "slurm-wlm and munge, .ci/run installs them)")
    if os.geteuid() != 0:
        pytest.skip("the throwaway Slurm cluster needs root (slurmd runs as root; CI runs as "
                    "root)")


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class SlurmCluster:
    root: Path
    env: dict[str, str]

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30,
                              check=True)
        return done.stdout

    def states(self) -> dict[str, tuple[str, str]]:
        """node -> (long state, reason) from ``sinfo``."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N|%T|%E")
        return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.splitlines())}

    def drain(self, node: str, reason: str) -> None:
        self.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")

    def wait_idle(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.states()
            if len(states) == len(NODES) and all(s == "idle" for s, _ in states.values()):
                return
            time.sleep(0.2)
        raise AssertionError(f"Slurm nodes never became idle: {self.states()}")


def _config(root: Path, ports: list[int]) -> str:
    host = socket.gethostname()
    nodes = "\n".join(
        f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=1 "
        "RealMemory=100 State=UNKNOWN" for n, p in zip(NODES, ports[2:], strict=True))
    return f"""ClusterName=ghtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdTimeout=300
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
{nodes}
PartitionName=gpu Nodes=ALL Default=YES State=UP
"""


def _stop(root: Path) -> None:
    pids = [*list((root / "run").glob("*.pid")), root / "munge" / "munged.pid"]
    for pid_file in pids:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)


def start_cluster(root: Path) -> SlurmCluster:
    for sub in ("state", "run", "log", "munge"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    subprocess.run([MUNGED, "--force", f"--socket={root}/munge/munge.sock",
                    f"--key-file={key}", f"--pid-file={root}/munge/munged.pid",
                    f"--log-file={root}/munge/munged.log", f"--seed-file={root}/munge/seed"],
                   check=True, timeout=30)
    conf = root / "slurm.conf"
    conf.write_text(_config(root, _free_ports(2 + len(NODES))))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = SlurmCluster(root, env)
    try:
        subprocess.run([SLURMCTLD, "-i"], env=env, check=True, timeout=30)
        for node in NODES:
            subprocess.run([SLURMD, "-N", node], env=env, check=True, timeout=30)
        cluster.wait_idle()
    except BaseException:
        _stop(root)
        raise
    return cluster


def slurm_cluster_fixture() -> Iterator[SlurmCluster]:
    """A started cluster under a short temp dir (munge's socket path must stay under the
    108-byte limit of a unix socket address, which pytest's tmp_path can exceed)."""
    require_slurm()
    root = Path(tempfile.mkdtemp(prefix="ghslurm-"))
    try:
        cluster = start_cluster(root)
        try:
            yield cluster
        finally:
            _stop(cluster.root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
