"""What ``--web.config.file`` does at run time, for both programs' listeners.

:class:`WebGuard` reads the file at start-up (a bad file stops the program, every problem
listed) and then, like the exporter-toolkit, again whenever it changes: the file's
(modification time, size, inode) is checked on every new connection and every request, so a
rotated certificate, a new client CA, changed TLS versions or a changed user list take effect
within moments, without a restart. The re-read runs in a worker thread, never on a listener's
event loop (the file is a capped regular-file read, its YAML bounded): connections go on being
served with the version in force meanwhile. A file that turns bad (or switches TLS on or off,
which needs a restart) is refused with the reason, logged once per change; the last good
version stays in force until the file is fixed, as Prometheus keeps its last good config.

TLS: each version of the file gets its own :class:`ssl.SSLContext`, made whole in that worker
thread and never changed afterwards; at each Client Hello the listener's context hands the
handshake to the one in force (its ``sni_callback``, which runs with or without SNI), so a
rotated certificate and an added *or removed* client CA take effect for the next connection.
The few settings a handshake takes from the listener's own context (client auth type, TLS
versions) are set on the event loop by :meth:`WebGuard.admit`, which reads no file. Whether the
listener speaks TLS at all is decided at start-up.

Basic auth: bcrypt is deliberately slow (~50-250 ms per check); :mod:`gpu_health.logins`
remembers successes, throttles failures before the expensive check and bounds how many checks
run at once (:meth:`WebGuard.authorize`).
"""

from __future__ import annotations

import base64
import binascii
import logging
import ssl
import threading
from pathlib import Path
from typing import Final

from gpu_health.errors import ConfigError
from gpu_health.files import NotReadable, read_regular
from gpu_health.logins import DEFAULT_LIMITS, LoginLimits, LoginVerdict, PasswordChecks
from gpu_health.webconfig import MAX_BYTES, TlsServerConfig, WebConfig, parse_web_config

log = logging.getLogger(__name__)

_TLS_VERSION: Final = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                       "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_VERIFY: Final = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                  "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
REALM: Final = 'Basic realm="gpu-health"'


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
    return parse_web_config(text, path.parent, f"web config {path}")


def _load(path: Path) -> tuple[WebConfig, ssl.SSLContext | None]:
    """The file and, for TLS, a context with its certificates (ConfigError if they fail)."""
    config = read_web_config(path)
    return config, None if config.tls is None else _context(config.tls)


def _context(tls: TlsServerConfig) -> ssl.SSLContext:
    """A new server context for ``tls``: its files are read here, once, and never again (a
    context in use is never changed: see :meth:`WebGuard._select`)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        for path in (tls.cert_file, tls.key_file):
            read_regular(path, MAX_BYTES)  # a FIFO or a device would block load_cert_chain
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.client_ca_file is not None:
            data = read_regular(tls.client_ca_file, MAX_BYTES)
            ctx.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls_server_config: cannot load certificates: {exc}") from exc
    _settings(ctx, tls)
    return ctx


def _settings(ctx: ssl.SSLContext, tls: TlsServerConfig) -> None:
    """The settings a handshake takes from the listener's own context (no file read)."""
    ctx.minimum_version = _TLS_VERSION[tls.min_version]
    ctx.maximum_version = _TLS_VERSION[tls.max_version]
    ctx.verify_mode = _VERIFY[tls.client_auth_type]


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
        self._lock = threading.Condition()
        self._stamp = _stamp(path)
        self._config, self._live = _load(path)  # ConfigError: refuse to start
        self._loading = False  # a re-read in flight (at most one)
        self._applied = self._config  # the version whose settings the listener's context has
        self.logins = PasswordChecks(limits)
        self.logins.prepare(self._config.basic_auth_users)
        self.tls = self._config.tls is not None
        self.context: ssl.SSLContext | None = None  # the listener's, when it speaks TLS
        if self._config.tls is not None:
            self.context = _context(self._config.tls)
            self.context.sni_callback = self._select

    def current(self) -> WebConfig:
        """The version in force; when the file changed, a re-read starts in a worker thread
        (never waited for here: this runs on listeners' event loops)."""
        stamp = _stamp(self.path)
        with self._lock:
            if stamp != self._stamp and not self._loading:
                self._loading = True
                threading.Thread(target=self._reload, args=(stamp,), name="web-config",
                                 daemon=True).start()
            return self._config

    def settle(self, timeout: float) -> WebConfig:
        """Start a re-read if the file changed and wait for it: for callers off the event
        loop that must see the file as it is now. TimeoutError after ``timeout`` seconds."""
        self.current()
        with self._lock:
            if not self._lock.wait_for(lambda: not self._loading, timeout):
                raise TimeoutError(f"web config {self.path}: still being read")
            return self._config

    def _reload(self, stamp: tuple[int, int, int] | None) -> None:
        config: WebConfig | None = None
        live: ssl.SSLContext | None = None
        try:
            config, live = _load(self.path)
            if (config.tls is not None) != self.tls:
                raise ConfigError("switching TLS on or off needs a restart")
            self.logins.prepare(config.basic_auth_users)  # bcrypt: before the lock
        except ConfigError as exc:
            log.error("web config %s is invalid; the last good version stays in force until "
                      "it is fixed: %s", self.path, exc)
            config = None
        except Exception:  # this thread's one catch-all: a re-read never sticks
            log.exception("web config %s: re-read failed; the last good version stays in force",
                          self.path)
            config = None
        with self._lock:
            self._stamp = stamp  # said once per change: the same bad file is not read again
            if config is not None:
                self._config, self._live = config, live
                self.logins.forget()
                log.info("web config %s reloaded", self.path)
            self._loading = False
            self._lock.notify_all()

    def admit(self) -> None:
        """For each new connection, on the listener's event loop, before its TLS session
        exists: start a re-read if the file changed, and give the listener's context the
        settings a handshake takes from it (client auth type, TLS versions; no file read)."""
        config = self.current()
        if config is not self._applied and self.context is not None and config.tls is not None:
            _settings(self.context, config.tls)
        self._applied = config

    def _select(self, sslobj: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        """Each handshake, at its Client Hello (with or without SNI): the certificates and the
        client CAs of the version in force. That context was made whole off the event loop
        and is never changed, so no handshake sees one half loaded."""
        if self._live is not None:
            sslobj.context = self._live

    def authorize(self, header: str | None, client: str) -> tuple[LoginVerdict, float]:
        """Whether a request with this ``Authorization`` header from ``client`` (its address)
        may proceed; for THROTTLED, the seconds to wait. Call it from a worker thread: a
        password check runs bcrypt."""
        config = self.current()
        if not config.basic_auth_users:
            return LoginVerdict.OK, 0.0
        user, password = _basic(header)
        if user is None or password is None:  # no credentials: the challenge, nothing to check
            return LoginVerdict.DENIED, 0.0
        return self.logins.check(config.basic_auth_users, user, password, client)

    @property
    def basic_auth(self) -> bool:
        return bool(self.current().basic_auth_users)


def _basic(header: str | None) -> tuple[str | None, str | None]:
    if header is None or header[:6].lower() != "basic ":
        return None, None
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = text.partition(":")
    return (user, password) if sep else (None, None)
