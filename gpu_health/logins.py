"""Password checks for ``--web.config.file`` basic auth, on both programs: throttled before the
expensive check, the same cost for an unknown user as for a wrong password, and a bounded
number at once, so no client can make an authenticated ``/metrics`` wait.

Measured before: 200 wrong passwords (40 at a time) pushed a correct user's exporter ``/metrics``
to p95 12.8 s (bcrypt shared the request threads); a limit that counted a failure only once it
finished let one address run 59 checks before its 429; 50 rotating addresses went around a
per-address limit; and an unknown user answered in 1 ms against 150 ms for a wrong password,
which told anyone which users exist.

- A correct (user, password, hash) seen before is remembered (a SHA-256 of the three, never
  the password) until the file changes: no bcrypt, no waiting, whatever else is going on.
- Otherwise the client's failures in the window *plus its checks in flight* must be under
  ``failure_limit``, and fewer than ``max_checks`` bcrypt checks may run at once over all
  clients (rotating addresses share it); else the answer is "throttled" at once (429 with
  ``Retry-After``), without running bcrypt.
- An unknown user is checked against a dummy hash of the same cost as the configured ones.
"""

from __future__ import annotations

import enum
import hashlib
import math
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import bcrypt


class LoginVerdict(enum.Enum):
    OK = "ok"
    DENIED = "denied"  # 401
    THROTTLED = "throttled"  # 429, Retry-After


@dataclass(frozen=True, slots=True)
class LoginLimits:
    failure_limit: int = 20  # failed logins per client address within the window
    window_s: float = 10.0
    max_checks: int = 2  # bcrypt checks running at once, all clients together
    max_clients: int = 10_000  # addresses remembered (least recently failed forgotten first)


DEFAULT_LIMITS = LoginLimits()


def _cost(digest: str) -> int:
    """The cost of a ``$2b$10$...`` hash (10 when it cannot be read)."""
    parts = digest.split("$")
    return int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else 10


class RecentFailures:
    """Failed attempts per client address within a window, bounded: beyond ``max_clients``
    the least recently failed are forgotten first. Not locked: its users hold their own."""

    def __init__(self, limit: int, window_s: float, max_clients: int) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_clients = max_clients
        self._by_client: OrderedDict[str, deque[float]] = OrderedDict()

    def __iter__(self) -> Iterator[str]:
        """The clients remembered, least recently failed first."""
        return iter(self._by_client)

    def count(self, client: str, now: float) -> int:
        """Failures of ``client`` still inside the window at ``now``."""
        failures = self._by_client.get(client)
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return len(failures) if failures else 0

    def retry_after(self, client: str, now: float) -> float:
        """Seconds until the oldest failure in the window leaves it (0 with none)."""
        failures = self._by_client.get(client)
        return max(0.0, failures[0] + self.window_s - now) if failures else 0.0

    def add(self, client: str, now: float) -> None:
        self.count(client, now)
        failures = self._by_client.pop(client, None) or deque(maxlen=self.limit)
        failures.append(now)
        self._by_client[client] = failures  # most recent last
        while len(self._by_client) > self.max_clients:
            self._by_client.popitem(last=False)


class PasswordChecks:
    """The state behind :meth:`check` (thread-safe: the programs call it from worker threads)."""

    def __init__(self, limits: LoginLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._good: set[str] = set()
        self._failures = RecentFailures(limits.failure_limit, limits.window_s,
                                        limits.max_clients)
        self._in_flight: Counter[str] = Counter()
        self._dummies: dict[int, bytes] = {}
        self.checking = 0  # bcrypt checks running now
        self.bcrypt_runs = 0  # how many ran, ever (tests and self-metrics)

    def forget(self) -> None:
        """The users file changed: remembered successes no longer hold."""
        with self._lock:
            self._good.clear()

    def check(self, users: Mapping[str, str], user: str, password: str,
              client: str) -> tuple[LoginVerdict, float]:
        """The verdict for one attempt, and for THROTTLED the seconds to wait."""
        digest = users.get(user)
        key = hashlib.sha256(f"{user}\0{password}\0{digest}".encode()).hexdigest()
        with self._lock:
            if digest is not None and key in self._good:
                return LoginVerdict.OK, 0.0
            wait = self._admit(client)
            if wait is not None:
                return LoginVerdict.THROTTLED, wait
        try:
            hashed = digest.encode() if digest is not None else self._dummy(users)
            ok = bcrypt.checkpw(password.encode(), hashed) and digest is not None
        except ValueError:  # a hash bcrypt cannot read: the file parser lets none through
            ok = False
        finally:
            with self._lock:
                self.checking -= 1
                self._in_flight[client] -= 1
                if self._in_flight[client] <= 0:
                    del self._in_flight[client]
        with self._lock:
            if ok:
                self._good.add(key)
                return LoginVerdict.OK, 0.0
            self._failures.add(client, self.clock())
        return LoginVerdict.DENIED, 0.0

    def _admit(self, client: str) -> float | None:
        """Under the lock: None and one more check in flight, or the seconds to wait."""
        now, limits = self.clock(), self.limits
        if self._failures.count(client, now) + self._in_flight[client] >= limits.failure_limit:
            return max(1.0, math.ceil(self._failures.retry_after(client, now)))
        if self.checking >= limits.max_checks:
            return 1.0
        self.checking += 1
        self._in_flight[client] += 1
        self.bcrypt_runs += 1
        return None

    def prepare(self, users: Mapping[str, str]) -> None:
        """Make the dummy hash now (at start-up), so the first unknown user costs no more."""
        if users:
            self._dummy(users)

    def _dummy(self, users: Mapping[str, str]) -> bytes:
        """A hash as costly as the configured ones, for unknown users (made once per cost)."""
        cost = max((_cost(d) for d in users.values()), default=10)
        with self._lock:
            dummy = self._dummies.get(cost)
        if dummy is None:
            dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(min(max(cost, 4), 31)))
            with self._lock:
                self._dummies[cost] = dummy
        return dummy
