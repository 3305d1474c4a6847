"""Reloading the tokens file: on SIGHUP and when the file changes (checked every few seconds).

A valid new file replaces every token at once (:meth:`TokenSet.swap`); a broken one is refused
with every problem logged and the last good tokens stay in force, as Prometheus does with a bad
config on reload. Adding or removing the tokens file itself (open mode <-> tokens) still needs a
restart: it changes which routes are open at all. Counted in
``gpu_health_evaluator_tokens_reloads_total{result}``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from gpu_health.errors import ConfigError
from gpu_health.evaluator.http.api.auth import TokenSet, load_tokens

log = logging.getLogger(__name__)
CHECK_SECONDS: Final = 5.0
Stamp = tuple[int, int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class TokenFile:
    """The tokens file behind a live :class:`TokenSet`."""

    def __init__(self, path: Path, tokens: TokenSet, registry: CollectorRegistry) -> None:
        self.path = path
        self.tokens = tokens
        self._stamp = _stamp(path)
        self._lock = threading.Lock()
        self.reloads = Counter("gpu_health_evaluator_tokens_reloads", "Reloads of the tokens "
                               "file (SIGHUP or a change), by result: ok, or error (the last "
                               "good tokens stay)", ["result"], registry=registry)
        for result in ("ok", "error"):
            self.reloads.labels(result)

    async def check(self) -> None:
        """Reload when the file changed since the last load (a loop tick), off the event loop:
        reading and parsing a file must never hold the API's requests."""
        if _stamp(self.path) != self._stamp:
            await asyncio.to_thread(self.reload, "the file changed")

    def reload(self, why: str = "SIGHUP") -> bool:
        """Load the file again (in a worker thread; one reload at a time); True when the new
        tokens are in force. A bad file is said once per change of the file."""
        with self._lock:
            self._stamp = _stamp(self.path)
            try:
                fresh = load_tokens(self.path)
            except ConfigError as exc:
                self.reloads.labels("error").inc()
                log.error("tokens file not reloaded (%s), the last good tokens stay: %s", why,
                          exc)
                return False
            self.tokens.swap(fresh)
            self.reloads.labels("ok").inc()
            log.warning("tokens file %s reloaded (%s): %d tokens", self.path, why,
                        len(fresh.entries))
            return True

