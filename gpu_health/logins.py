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
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import bcrypt


class Verdict(enum.Enum):
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


class PasswordChecks:
    """The state behind :meth:`check` (thread-safe: the programs call it from worker threads)."""

    def __init__(self, limits: LoginLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._good: set[str] = set()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._in_flight: Counter[str] = Counter()
        self._dummies: dict[int, bytes] = {}
        self.checking = 0  # bcrypt checks running now
        self.bcrypt_runs = 0  # how many ran, ever (tests and self-metrics)

    def forget(self) -> None:
        """The users file changed: remembered successes no longer hold."""
        with self._lock:
            self._good.clear()

    def check(self, users: Mapping[str, str], user: str, password: str,
              client: str) -> tuple[Verdict, float]:
        """The verdict for one attempt, and for THROTTLED the seconds to wait."""
        digest = users.get(user)
        key = hashlib.sha256(f"{user}\0{password}\0{digest}".encode()).hexdigest()
        with self._lock:
            if digest is not None and key in self._good:
                return Verdict.OK, 0.0
            wait = self._admit(client)
            if wait is not None:
                return Verdict.THROTTLED, wait
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
                return Verdict.OK, 0.0
            self._failed(client)
        return Verdict.DENIED, 0.0

    def _admit(self, client: str) -> float | None:
        """Under the lock: None and one more check in flight, or the seconds to wait."""
        now, limits = self.clock(), self.limits
        failures = self._failures.get(client, deque())
        while failures and failures[0] <= now - limits.window_s:
            failures.popleft()
        if len(failures) + self._in_flight[client] >= limits.failure_limit:
            oldest = failures[0] if failures else now
            return max(1.0, math.ceil(oldest + limits.window_s - now))
        if self.checking >= limits.max_checks:
            return 1.0
        self.checking += 1
        self._in_flight[client] += 1
        self.bcrypt_runs += 1
        return None

    def _failed(self, client: str) -> None:
        failures = self._failures.pop(client, None) or deque(maxlen=self.limits.failure_limit)
        failures.append(self.clock())
        self._failures[client] = failures  # most recent last
        while len(self._failures) > self.limits.max_clients:
            self._failures.popitem(last=False)

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
