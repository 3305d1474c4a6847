"""``--web.config.file``: the Prometheus exporter-toolkit's web configuration, parsed (pure).

The same file format dcgm-exporter and nvidia_gpu_exporter take, so one file serves every
exporter of a node::

    tls_server_config:
      cert_file: server.crt          # relative paths: against this file's folder
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
      client_ca_file: clients-ca.crt
      min_version: TLS12             # TLS10 .. TLS13
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')

What the toolkit offers and Python's ``ssl`` cannot do is refused with the reason, never
silently ignored: the client auth types that accept a certificate without verifying it
(``RequestClientCert``, ``RequireAnyClientCert``), ``cipher_suites``, ``curve_preferences``,
``client_allowed_sans``, inline ``cert``/``key`` and ``http_server_config.headers``.
``http_server_config.http2`` is accepted and has no effect (HTTP/1.1 is served).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from gpu_health.errors import ConfigError
from gpu_health.yamlload import load_yaml

CLIENT_AUTH: Final = ("NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
VERSIONS: Final = ("TLS10", "TLS11", "TLS12", "TLS13")
_UNVERIFIED: Final = ("RequestClientCert", "RequireAnyClientCert")
_TLS_KEYS: Final = ("cert_file", "key_file", "client_auth_type", "client_ca_file",
                    "min_version", "max_version")
_UNSUPPORTED: Final = ("cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
                       "client_allowed_sans", "cert", "key")
_BCRYPT: Final = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")
MAX_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str = "TLS13"


@dataclass(frozen=True, slots=True)
class WebConfig:
    """A parsed web config file; ``tls`` None serves plain HTTP, no users means no basic auth."""

    tls: TlsServerConfig | None = None
    basic_auth_users: Mapping[str, str] = field(default_factory=dict)  # user -> bcrypt hash


def parse_web_config(text: str, base: Path, origin: str) -> WebConfig:
    """The file's text -> WebConfig; ConfigError lists every problem (``origin`` names it)."""
    problems: list[str] = []
    try:
        doc = load_yaml(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin}: not valid YAML: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{origin}: must be a mapping")
    for key in doc:
        if key not in ("tls_server_config", "basic_auth_users", "http_server_config"):
            problems.append(f"{origin}: unknown key {key!r}")
    tls = _tls(doc.get("tls_server_config"), base, origin, problems)
    users = _users(doc.get("basic_auth_users"), origin, problems)
    _http(doc.get("http_server_config"), origin, problems)
    if problems:
        raise ConfigError(problems)
    return WebConfig(tls, users)


def _tls(raw: Any, base: Path, origin: str, problems: list[str]) -> TlsServerConfig | None:
    if raw is None:
        return None
    where = f"{origin}: tls_server_config"
    if not isinstance(raw, Mapping):
        problems.append(f"{where} must be a mapping")
        return None
    for key in raw:
        if key in _UNSUPPORTED:
            problems.append(f"{where}.{key} is not supported by gpu-health (Python's ssl)")
        elif key not in _TLS_KEYS:
            problems.append(f"{where}: unknown key {key!r}")
    paths = {k: _path(raw.get(k), base) for k in ("cert_file", "key_file", "client_ca_file")}
    if paths["cert_file"] is None or paths["key_file"] is None:
        problems.append(f"{where}: cert_file and key_file are both required")
    auth = str(raw.get("client_auth_type", "NoClientCert"))
    if auth in _UNVERIFIED:
        problems.append(f"{where}.client_auth_type {auth} accepts a client certificate without "
                        "verifying it, which gpu-health does not offer: use "
                        "VerifyClientCertIfGiven or RequireAndVerifyClientCert")
    elif auth not in CLIENT_AUTH:
        problems.append(f"{where}.client_auth_type must be one of {', '.join(CLIENT_AUTH)}")
    if auth != "NoClientCert" and paths["client_ca_file"] is None:
        problems.append(f"{where}: client_auth_type {auth} needs client_ca_file")
    versions = [str(raw.get(k, d)) for k, d in (("min_version", "TLS12"),
                                                ("max_version", "TLS13"))]
    for version in versions:
        if version not in VERSIONS:
            problems.append(f"{where}: TLS version {version!r} is not one of {', '.join(VERSIONS)}")
    if all(v in VERSIONS for v in versions) and versions[0] > versions[1]:
        problems.append(f"{where}: min_version is above max_version")
    if paths["cert_file"] is None or paths["key_file"] is None:
        return None
    return TlsServerConfig(paths["cert_file"], paths["key_file"], auth, paths["client_ca_file"],
                           versions[0], versions[1])


def _path(value: Any, base: Path) -> Path | None:
    if value is None or value == "":
        return None
    path = Path(str(value))
    return path if path.is_absolute() else base / path


def _users(raw: Any, origin: str, problems: list[str]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{origin}: basic_auth_users must be a mapping of user to bcrypt hash")
        return {}
    users: dict[str, str] = {}
    for user, digest in raw.items():
        if not isinstance(user, str) or not user or ":" in user:
            problems.append(f"{origin}: basic_auth_users: a user name must be text without ':'")
        elif not isinstance(digest, str) or _BCRYPT.fullmatch(digest) is None:
            # Never quote the value: it may be a password pasted by mistake.
            problems.append(f"{origin}: basic_auth_users.{user} is not a bcrypt hash ($2y$...)")
        else:
            users[user] = digest
    return users


def _http(raw: Any, origin: str, problems: list[str]) -> None:
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        problems.append(f"{origin}: http_server_config must be a mapping")
        return
    for key in raw:
        if key == "headers":
            problems.append(f"{origin}: http_server_config.headers is not supported by "
                            "gpu-health")
        elif key != "http2":
            problems.append(f"{origin}: http_server_config: unknown key {key!r}")
