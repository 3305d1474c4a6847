"""Bearer-token authentication, scopes and per-tenant node visibility for the HTTP API.

Tokens are never stored: the tokens file holds the hex SHA-256 of each token, and a presented
token is hashed and compared against *every* entry with ``hmac.compare_digest`` (no early exit,
so the time taken does not reveal which entry, if any, matched). Each entry carries scopes
(``nodes:read`` for the read API, ``alerts:write`` for the later resolve endpoint) and the
tenants whose nodes it may see (``["*"]`` for all, including nodes without a tenant label).

Without a tokens file the API is open only when the server listens on loopback; on any other
address every request is refused, because "forgot to configure auth" must not mean "open".
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

import yaml

from gpu_health.errors import ApiError, ConfigError
from gpu_health.files import NotReadable, read_regular
from gpu_health.yamlload import load_yaml

log = logging.getLogger(__name__)

SCOPE_NODES_READ: Final = "nodes:read"
SCOPE_ALERTS_WRITE: Final = "alerts:write"
SCOPES: Final[tuple[str, ...]] = (SCOPE_NODES_READ, SCOPE_ALERTS_WRITE)
ALL_TENANTS: Final = "*"
# A tokens file holds names, hashes and scopes: thousands of tokens fit in far less.
MAX_TOKENS_BYTES: Final = 4 * 1024 * 1024

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ENTRY_KEYS = frozenset({"name", "sha256", "scopes", "tenants"})
_BEARER = re.compile(r"Bearer[ \t]+(\S+)[ \t]*", re.IGNORECASE)


def hash_token(token: str) -> str:
    """Hex SHA-256 of a token, as written in the tokens file."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling. ``tenants`` None means every node (the ``*`` token or open loopback)."""

    name: str
    scopes: frozenset[str]
    tenants: frozenset[str] | None

    @property
    def tenant_list(self) -> list[str] | None:
        """Tenants as a sorted list for the store queries (None: no tenant filter)."""
        return None if self.tenants is None else sorted(self.tenants)


LOOPBACK_PRINCIPAL: Final = Principal("loopback-without-tokens", frozenset(SCOPES), None)
# A user of --web.config.file's basic_auth_users (which cannot be combined with a tokens file:
# both use the Authorization header): the listener's own gate, so every scope and tenant.
BASIC_AUTH_PRINCIPAL: Final = Principal("web-config-basic-auth", frozenset(SCOPES), None)


@dataclass(frozen=True, slots=True)
class TokenEntry:
    name: str
    sha256: str
    principal: Principal


@dataclass(slots=True)
class TokenSet:
    """The validated tokens file. Mutable in one way only: :meth:`swap` replaces every entry at
    once (one assignment), so a reload (evaluator/http/api/token_file.py) reaches every holder
    of this object and no request ever sees half of two files."""

    entries: tuple[TokenEntry, ...]

    def swap(self, other: TokenSet) -> None:
        self.entries = other.entries

    def find(self, token: str) -> Principal | None:
        digest = hash_token(token)
        found: Principal | None = None
        for entry in self.entries:  # every entry, always: constant work whatever matches
            if hmac.compare_digest(entry.sha256, digest):
                found = entry.principal
        return found


def _check_list(value: object, where: str, problems: list[str]) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{where}: must be a non-empty list of non-empty strings")
        return []
    return [str(v) for v in value]


def _parse_entry(item: object, where: str, problems: list[str]) -> TokenEntry | None:
    if not isinstance(item, Mapping):
        problems.append(f"{where}: must be a mapping with name, sha256, scopes, tenants")
        return None
    before = len(problems)
    for key in sorted(set(map(str, item)) - _ENTRY_KEYS):
        hint = " (store sha256 of the token, never the token itself)" if key == "token" else ""
        problems.append(f"{where}: unknown key {key!r}{hint}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{where}.name: must be a non-empty string")
    digest = item.get("sha256")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest.lower()):
        problems.append(f"{where}.sha256: must be 64 hex digits (gpu-health-evaluator tokens-hash)")
    scopes = _check_list(item.get("scopes"), f"{where}.scopes", problems)
    for scope in scopes:
        if scope not in SCOPES:
            problems.append(f"{where}.scopes: unknown scope {scope!r} (known: {', '.join(SCOPES)})")
    tenants = _check_list(item.get("tenants"), f"{where}.tenants", problems)
    if ALL_TENANTS in tenants and len(tenants) > 1:
        problems.append(f"{where}.tenants: '*' must be the only entry")
    if len(problems) > before:
        return None
    assert isinstance(name, str) and isinstance(digest, str)
    visible = None if tenants == [ALL_TENANTS] else frozenset(tenants)
    return TokenEntry(name, digest.lower(), Principal(name, frozenset(scopes), visible))


def parse_tokens(doc: object, origin: str) -> TokenSet:
    """Validate a loaded tokens document; ConfigError lists every problem found."""
    problems: list[str] = []
    items = doc.get("tokens") if isinstance(doc, Mapping) else None
    if not isinstance(doc, Mapping) or set(map(str, doc)) != {"tokens"}:
        problems.append(f"{origin}: must be a mapping with exactly one key 'tokens'")
    if not isinstance(items, list) or not items:
        problems.append(f"{origin}: 'tokens' must be a non-empty list")
        items = []
    entries: list[TokenEntry] = []
    for i, item in enumerate(items):
        entry = _parse_entry(item, f"{origin}: tokens[{i}]", problems)
        if entry is not None:
            entries.append(entry)
    for field in ("name", "sha256"):
        values = [getattr(e, field) for e in entries]
        for dup in sorted({v for v in values if values.count(v) > 1}):
            problems.append(f"{origin}: duplicate {field} {dup!r}")
    if problems:
        raise ConfigError(problems)
    return TokenSet(tuple(entries))


def load_tokens(path: str | Path) -> TokenSet:
    """Read and validate the tokens file (YAML). Fails fast with every problem listed."""
    try:
        text = read_regular(Path(path), MAX_TOKENS_BYTES).decode("utf-8")
        mode = Path(path).stat().st_mode
    except NotReadable as exc:
        raise ConfigError(f"tokens file {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"tokens file {path}: cannot read: {exc}") from exc
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        # Anyone who can write it can grant themselves every tenant at the next start.
        log.warning("tokens file %s is writable by users other than its owner (mode %s): "
                    "anyone who can write it can add a token; chmod go-w it", path,
                    stat.filemode(mode))
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"tokens file {path}: not valid YAML: {exc}") from exc
    return parse_tokens(doc, f"tokens file {path}")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and 'localhost'. "" or 0.0.0.0 listens everywhere: not loopback."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authenticate(authorization: str | None, tokens: TokenSet | None, listen_host: str) -> Principal:
    """The caller behind an ``Authorization`` header, or ApiError(401)."""
    if tokens is None:
        if is_loopback(listen_host):
            return LOOPBACK_PRINCIPAL
        raise ApiError(
            401,
            "the API requires a tokens file (api.tokens_file) when listening on a non-loopback "
            f"address ({listen_host!r}); every request is refused until one is configured",
        )
    if authorization is None:
        raise ApiError(401, "missing Authorization: Bearer <token> header")
    match = _BEARER.fullmatch(authorization)
    if match is None:
        raise ApiError(401, "the Authorization header must be 'Bearer <token>'")
    principal = tokens.find(match.group(1))
    if principal is None:
        raise ApiError(401, "unknown token")
    return principal


def require_scope(principal: Principal, scope: str) -> None:
    """ApiError(403) unless the principal holds ``scope``."""
    if scope not in principal.scopes:
        raise ApiError(403, f"token {principal.name!r} lacks the scope {scope!r}")


def node_not_found() -> ApiError:
    """The one 404 for "no such node" and "not yours": identical, so nodes cannot be enumerated."""
    return ApiError(404, "node not found", param="node_id")


def tokens_hash_main(stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """``gpu-health-evaluator tokens-hash``: sha256 of the token on stdin (trailing newline
    removed), for the tokens file. Reading stdin keeps the token out of argv and shell history."""
    token = stdin.read().rstrip("\r\n")
    if not token or token != token.strip():
        stderr.write("tokens-hash: expected one token without surrounding whitespace on stdin\n")
        return 2
    stdout.write(hash_token(token) + "\n")
    return 0
