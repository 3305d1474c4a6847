"""What ``--web.config.file`` does at run time, for both programs' listeners.

:class:`WebGuard` reads the file at start-up (a bad file stops the program, every problem
listed) and then, like the exporter-toolkit, again whenever it changes: the file's
(modification time, size, inode) is checked on every new connection and every request, so a
rotated certificate, a new client CA, changed TLS versions or a changed user list take effect
for the next connection without a restart. If the file turns bad meanwhile, connections are
refused (fail closed) and the problem is logged once, until it is fixed.

TLS: one server :class:`ssl.SSLContext` serves the listener; :meth:`WebGuard.admit` (called by
the listener for every accepted connection, before its TLS session exists) brings that context
up to date. Python cannot remove a CA from a live context, so a CA *removed* from
``client_ca_file`` stays trusted until a restart (added ones work at once). Whether the listener
speaks TLS at all is decided at start-up.

Basic auth: bcrypt is deliberately slow (~50-250 ms per check); :mod:`gpu_health.logins`
remembers successes, throttles failures before the expensive check and bounds how many checks
run at once (:meth:`WebGuard.authorize`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl
import threading
from pathlib import Path
from typing import Final

from gpu_health.errors import ConfigError
from gpu_health.files import NotReadable, read_regular
from gpu_health.logins import DEFAULT_LIMITS, LoginLimits, PasswordChecks, Verdict
from gpu_health.webconfig import MAX_BYTES, TlsServerConfig, WebConfig, parse_web_config

log = logging.getLogger(__name__)

_TLS_VERSION: Final = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                       "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_VERIFY: Final = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                  "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
REALM: Final = 'Basic realm="gpu-health"'


class Refuse(asyncio.Protocol):
    """What a connection a listener will not serve gets (over its connection limit, or while
    its web config is bad): closed at once, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


def read_web_config(path: Path) -> WebConfig:
    """Read and parse ``path``; ConfigError on a missing, oversized or bad file."""
    try:
        data = read_regular(path, MAX_BYTES)
    except NotReadable as exc:
        raise ConfigError(f"web config {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"web config {path}: cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"web config {path}: not UTF-8 text") from exc
    config = parse_web_config(text, path.parent, f"web config {path}")
    if config.tls is not None:
        _context(config.tls)  # a certificate that does not load is a start-up problem too
    return config


def _context(tls: TlsServerConfig, into: ssl.SSLContext | None = None) -> ssl.SSLContext:
    ctx = into or ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.client_ca_file is not None:
            ctx.load_verify_locations(cafile=str(tls.client_ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls_server_config: cannot load certificates: {exc}") from exc
    ctx.minimum_version = _TLS_VERSION[tls.min_version]
    ctx.maximum_version = _TLS_VERSION[tls.max_version]
    ctx.verify_mode = _VERIFY[tls.client_auth_type]
    return ctx


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class WebGuard:
    """The web config of one listener, kept current (thread-safe)."""

    def __init__(self, path: Path, limits: LoginLimits = DEFAULT_LIMITS) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp = _stamp(path)
        self._config: WebConfig | None = read_web_config(path)  # ConfigError: refuse to start
        self.logins = PasswordChecks(limits)
        self.logins.prepare(self._config.basic_auth_users)
        self.tls = self._config.tls is not None
        self.context = _context(self._config.tls) if self._config.tls is not None else None

    def current(self) -> WebConfig | None:
        """The config now (re-read if the file changed); None while the file is bad."""
        stamp = _stamp(self.path)
        with self._lock:
            if stamp == self._stamp:
                return self._config
            self._stamp = stamp
            self.logins.forget()
            try:
                config: WebConfig | None = read_web_config(self.path)
            except ConfigError as exc:
                log.error("web config %s is now invalid; refusing connections until it is "
                          "fixed: %s", self.path, exc)
                config = None
            if config is not None and (config.tls is not None) != self.tls:
                log.error("web config %s: switching TLS on or off needs a restart; refusing "
                          "connections until then", self.path)
                config = None
            if config is not None and config.tls is not None and self.context is not None:
                _context(config.tls, into=self.context)
                log.info("web config %s reloaded", self.path)
            self._config = config
            return config

    def admit(self) -> bool:
        """For each new connection: bring the TLS context up to date; False: refuse it."""
        try:
            return self.current() is not None
        except ConfigError as exc:  # a certificate that stopped loading
            log.error("web config %s: %s", self.path, exc)
            with self._lock:
                self._config = None
            return False

    def authorize(self, header: str | None, client: str) -> tuple[Verdict, float]:
        """Whether a request with this ``Authorization`` header from ``client`` (its address)
        may proceed; for THROTTLED, the seconds to wait. Call it from a worker thread: a
        password check runs bcrypt."""
        config = self.current()
        if config is None:
            return Verdict.DENIED, 0.0
        if not config.basic_auth_users:
            return Verdict.OK, 0.0
        user, password = _basic(header)
        if user is None or password is None:  # no credentials: the challenge, nothing to check
            return Verdict.DENIED, 0.0
        return self.logins.check(config.basic_auth_users, user, password, client)

    @property
    def basic_auth(self) -> bool:
        config = self.current()
        return config is None or bool(config.basic_auth_users)


def _basic(header: str | None) -> tuple[str | None, str | None]:
    if header is None or header[:6].lower() != "basic ":
        return None, None
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = text.partition(":")
    return (user, password) if sep else (None, None)
