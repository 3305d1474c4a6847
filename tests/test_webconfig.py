"""gpu_health.webconfig: the exporter-toolkit's web config file, parsed; every problem listed,
what Python's ssl cannot do refused with the reason, never silently ignored."""

from __future__ import annotations

import os
from pathlib import Path

import bcrypt
import pytest

from gpu_health.errors import ConfigError
from gpu_health.webconfig import WebConfig, parse_web_config
from tests.shared import swap_for_hostile

HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()


def parse(text: str) -> WebConfig:
    return parse_web_config(text, Path("/etc/gpu-health"), "web.yml")


def test_a_full_file_with_relative_paths() -> None:
    config = parse(f"""
tls_server_config:
  cert_file: tls/server.crt
  key_file: /abs/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: clients.crt
  min_version: TLS13
http_server_config: {{http2: true}}
basic_auth_users:
  prometheus: '{HASH.replace("$2b$", "$2y$")}'
""")
    assert config.tls is not None
    assert config.tls.cert_file == Path("/etc/gpu-health/tls/server.crt")
    assert config.tls.key_file == Path("/abs/server.key")
    assert config.tls.client_ca_file == Path("/etc/gpu-health/clients.crt")
    assert (config.tls.min_version, config.tls.max_version) == ("TLS13", "TLS13")
    assert set(config.basic_auth_users) == {"prometheus"}


def test_empty_means_plain_http_without_auth() -> None:
    assert parse("") == WebConfig()


def test_every_problem_is_listed_and_no_secret_is_quoted() -> None:
    with pytest.raises(ConfigError) as info:
        parse("""
tls_server_config:
  key_file: k
  client_auth_type: RequireAnyClientCert
  cipher_suites: [TLS_AES_128_GCM_SHA256]
  min_version: TLS13
  max_version: TLS12
basic_auth_users:
  ops: hunter2
http_server_config: {headers: {X-Frame-Options: deny}}
listen: 1
""")
    text = str(info.value)
    for needle in ("unknown key 'listen'", "cert_file and key_file are both required",
                   "RequireAnyClientCert accepts a client certificate without verifying",
                   "needs client_ca_file", "cipher_suites is not supported",
                   "min_version is above max_version", "basic_auth_users.ops is not a bcrypt",
                   "headers is not supported"):
        assert needle in text, needle
    assert "hunter2" not in text


def test_not_yaml_or_not_a_mapping() -> None:
    for text in ("[1, 2]", "a: [", "just text"):
        with pytest.raises(ConfigError, match=r"web\.yml"):
            parse(text)


@pytest.mark.parametrize("swap", ["fifo", "dev-zero", "alias bomb"])
def test_a_web_config_swapped_for_a_fifo_a_device_or_a_bomb_keeps_the_last_good_version(
        tmp_path: Path, swap: str) -> None:
    """A FIFO in its place hung both programs forever, even after the file was fixed; an
    alias bomb in a TLS field froze the listener over 40 s at ~740 MB. Now the re-read runs in
    a worker thread and never waits on the file: the listener goes on with the last good
    version, and the fixed file is taken as soon as it is written."""
    from gpu_health.webguard import WebGuard

    def users(*names: str) -> str:
        digest = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
        return "basic_auth_users: {" + ", ".join(f"{n}: '{digest}'" for n in names) + "}\n"

    path = tmp_path / "web.yml"
    path.write_text(users("alice"))
    guard = WebGuard(path)
    swap_for_hostile(path, swap)
    guard.admit()  # on the event loop: returns at once
    assert "alice" in guard.current().basic_auth_users
    assert "alice" in guard.settle(30).basic_auth_users  # refused: TimeoutError if it hung
    path.unlink()
    path.write_text(users("alice", "bob"))
    assert "bob" in guard.settle(10).basic_auth_users


def test_certificates_that_are_not_regular_files_are_refused_without_waiting(
        tmp_path: Path) -> None:
    """``load_cert_chain`` on a FIFO would block the re-read for ever; it is refused first."""
    from gpu_health.webguard import _context, read_web_config

    fifo = tmp_path / "server.crt"
    os.mkfifo(fifo)
    (tmp_path / "web.yml").write_text("tls_server_config: {cert_file: server.crt, "
                                      "key_file: server.key}\n")
    config = read_web_config(tmp_path / "web.yml")
    assert config.tls is not None
    with pytest.raises(ConfigError, match="not a regular file"):
        _context(config.tls)
