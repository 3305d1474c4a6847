"""Basic-auth password checks (gpu_health/logins.py): throttled before bcrypt runs, counted
while in flight, the same work for an unknown user, and never in the way of a remembered user;
then on the exporter's real HTTPS listener under 200 wrong passwords, 40 at a time."""

from __future__ import annotations

import base64
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bcrypt
from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.http import make_app, serve
from gpu_health.logins import LoginLimits, LoginVerdict, PasswordChecks
from gpu_health.webguard import WebGuard

SLOW = {"alice": bcrypt.hashpw(b"right", bcrypt.gensalt(12)).decode()}  # ~0.2 s a check
FAST = {"alice": bcrypt.hashpw(b"right", bcrypt.gensalt(4)).decode()}


def _all(n: int, attempt: Callable[[int], LoginVerdict]) -> Counter[LoginVerdict]:
    with ThreadPoolExecutor(n) as pool:
        return Counter(pool.map(attempt, range(n)))


def test_an_unknown_user_costs_a_bcrypt_check_like_a_wrong_password() -> None:
    """An unknown user answered in 1 ms against 150 ms for a wrong password."""
    checks = PasswordChecks()
    assert checks.check(FAST, "alice", "wrong", "c")[0] is LoginVerdict.DENIED
    assert checks.bcrypt_runs == 1
    assert checks.check(FAST, "mallory", "wrong", "c")[0] is LoginVerdict.DENIED
    assert checks.bcrypt_runs == 2  # a dummy hash of the same cost


def test_failures_in_flight_count_before_bcrypt_runs() -> None:
    """One address got 59 bcrypt checks before its 429: failures counted only when done."""
    checks = PasswordChecks(LoginLimits(failure_limit=5, max_checks=100))
    verdicts = _all(60, lambda _: checks.check(SLOW, "alice", "wrong", "10.0.0.9")[0])
    assert checks.bcrypt_runs <= 5
    assert verdicts[LoginVerdict.THROTTLED] >= 55 and LoginVerdict.OK not in verdicts
    verdict, wait = checks.check(SLOW, "alice", "right", "10.0.0.9")
    assert verdict is LoginVerdict.THROTTLED and wait >= 1  # the address waits out its window
    assert checks.check(SLOW, "alice", "right", "10.0.0.10")[0] is LoginVerdict.OK


def test_rotating_addresses_share_the_bound_on_checks_at_once() -> None:
    """50 rotating addresses pushed a correct user's p95 to 8.1 s."""
    checks = PasswordChecks(LoginLimits(max_checks=2))
    peak = 0
    lock = threading.Lock()

    def attempt(i: int) -> LoginVerdict:
        nonlocal peak
        verdict = checks.check(SLOW, "alice", "wrong", f"10.1.0.{i}")[0]
        with lock:
            peak = max(peak, checks.checking)
        return verdict

    verdicts = _all(50, attempt)
    assert peak <= 2 and verdicts[LoginVerdict.THROTTLED] > 0
    assert checks.bcrypt_runs == verdicts[LoginVerdict.DENIED]  # a throttled attempt ran none


def test_a_remembered_user_never_waits_behind_password_checks() -> None:
    checks = PasswordChecks(LoginLimits(max_checks=2))
    assert checks.check(SLOW, "alice", "right", "prometheus")[0] is LoginVerdict.OK

    def attacker(i: int) -> LoginVerdict:
        return checks.check(SLOW, "alice", f"wrong-{i}", f"10.2.0.{i}")[0]

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(attacker, i) for i in range(2)]
        deadline = time.monotonic() + 10
        while checks.checking < 2 and time.monotonic() < deadline:
            time.sleep(0.001)  # until both attackers hold a check slot (another thread's act)
        assert checks.checking == 2
        # a remembered user passes at once; anyone else is told to come back, not queued
        assert checks.check(SLOW, "alice", "right", "prometheus")[0] is LoginVerdict.OK
        assert checks.check(SLOW, "alice", "wrong", "10.2.0.99")[0] is LoginVerdict.THROTTLED
        assert {f.result() for f in futures} == {LoginVerdict.DENIED}


def _get(port: int, ctx: ssl.SSLContext, user: str, password: str) -> int:
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30, context=ctx) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_exporter_serves_a_correct_user_through_200_wrong_passwords(
        tmp_path: Path) -> None:
    """200 wrong passwords, 40 at a time, pushed a correct user's /metrics to p95 12.8 s:
    bcrypt ran in the threads that serve /metrics. Every correct request is answered 200 while
    the wrong ones are refused, most of them (429) before any bcrypt runs."""
    from tests.tls_support import make_pki

    pki = make_pki(tmp_path / "pki")
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config: {{cert_file: {pki.server_cert}, "
                      f"key_file: {pki.server_key}}}\nbasic_auth_users: {SLOW}\n")
    guard = WebGuard(config)
    srv, _ = serve("127.0.0.1", 0, make_app(CollectorRegistry(), lambda: (True, "ok")),
                   guard=guard)
    try:
        port, ctx = srv.server_port, pki.client()
        assert _get(port, ctx, "alice", "right") == 200
        with ThreadPoolExecutor(44) as pool:
            wrong = [pool.submit(_get, port, ctx, "alice", f"guess-{i}") for i in range(200)]
            right = [pool.submit(_get, port, ctx, "alice", "right") for _ in range(20)]
            statuses = Counter(f.result() for f in wrong)
            assert [f.result() for f in right] == [200] * 20
        assert set(statuses) <= {401, 429} and statuses[429] > 0
        assert guard.logins.bcrypt_runs <= 1 + statuses[401]
    finally:
        srv.shutdown()
