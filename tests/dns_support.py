"""A real DNS server on loopback for discovery tests: Debian's dnsmasq (``.ci/run`` installs
``dnsmasq-base``), authoritative for ``test.`` (an unknown name there is NXDOMAIN), answering
A/AAAA records from a hosts file (re-read on SIGHUP) and SRV records from its command line. No
upstream server and no /etc/hosts: nothing outside the test is asked or answered."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest


def _free_udp_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 (dnsmasq listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket() as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port for dnsmasq")


@dataclass
class DnsServer:
    port: int
    hosts: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def nameserver(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_hosts(self, records: Sequence[tuple[str, str]]) -> None:
        """Replace the A/AAAA records ((address, name) pairs) and make dnsmasq re-read them."""
        before = self._reads()
        self.hosts.write_text("".join(f"{ip} {name}\n" for ip, name in records))
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while self._reads() == before:  # dnsmasq logs "read <file> - N names" when done
            if time.monotonic() > deadline:
                raise RuntimeError("dnsmasq did not re-read its hosts file within 10 s")
            time.sleep(0.02)  # a poll of its log, not a wait for time to pass

    def _reads(self) -> int:
        return self.log.read_text(errors="replace").count(f"read {self.hosts}")


@contextlib.contextmanager
def dns_server(folder: Path, records: Sequence[tuple[str, str]] = (),
               srv: Sequence[str] = ()) -> Iterator[DnsServer]:
    """dnsmasq on 127.0.0.1 (a free port) with ``records`` and ``srv`` (dnsmasq's
    ``--srv-host`` values: ``_service._tcp.name,target,port``)."""
    binary = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
    if not Path(binary).is_file():
        pytest.skip("dnsmasq is not installed (Debian: apt-get install dnsmasq-base)")
    hosts = folder / "hosts"
    hosts.write_text("".join(f"{ip} {name}\n" for ip, name in records))
    port = _free_udp_port()
    log = folder / "dnsmasq.log"
    argv = [binary, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            f"--addn-hosts={hosts}", "--listen-address=127.0.0.1", "--bind-interfaces",
            f"--port={port}", "--local=/test/", "--pid-file=", "--log-facility=-",
            "--log-queries", *(f"--srv-host={s}" for s in srv)]
    if os.geteuid() == 0:
        argv.append("--user=root")  # keeps reading the hosts file the test writes
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    server = DnsServer(port, hosts, process, log)
    try:
        _wait_listening(server)
        yield server
    finally:
        process.terminate()
        process.wait(10)


def _wait_listening(server: DnsServer) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"dnsmasq exited: {server.log.read_text(errors='replace')}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", server.port)) == 0:
                return
        time.sleep(0.05)  # a poll of its port, not a wait for time to pass
    raise RuntimeError("dnsmasq did not start listening within 10 s")
