"""The exporter's ``--web.config.file`` on a real HTTPS server bound to 127.0.0.1, with real
certificates (openssl) and real clients: TLS, basic auth with bcrypt hashes, client
certificates, and the file re-read off the event loop when it changes (no restart), like the
exporter-toolkit; a bad file stops the program at start, and at run time is refused while the
last good version stays in force."""

from __future__ import annotations

import base64
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import yaml
from prometheus_client.registry import CollectorRegistry

from gpu_health.exporter.http import HttpServer, make_app, serve
from gpu_health.webguard import WebGuard
from tests.tls_support import Pki, make_pki

from .support import NVIDIA_SMI
from .test_main import NO_KERNEL_LOG, run


def bcrypt_hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def write(path: Path, pki: Pki, users: dict[str, str] | None = None,
          client_auth: str = "NoClientCert") -> None:
    tls = {"cert_file": str(pki.server_cert), "key_file": str(pki.server_key),
           "client_auth_type": client_auth}
    if client_auth != "NoClientCert":
        tls["client_ca_file"] = str(pki.ca)
    doc: dict[str, object] = {"tls_server_config": tls}
    if users:
        doc["basic_auth_users"] = {u: bcrypt_hash(p) for u, p in users.items()}
    path.write_text(yaml.safe_dump(doc))


Served = tuple[HttpServer, Path, WebGuard]


@pytest.fixture
def server(tmp_path: Path, pki: Pki) -> Iterator[Served]:
    config = tmp_path / "web.yml"
    write(config, pki, {"prometheus": "s3cret"})
    app = make_app(CollectorRegistry(), lambda: (True, "ok"))
    guard = WebGuard(config)
    srv, _ = serve("127.0.0.1", 0, app, guard=guard)
    try:
        yield srv, config, guard
    finally:
        srv.shutdown()


def get(srv: HttpServer, ctx: ssl.SSLContext | None, user: str | None = None,
        password: str = "", scheme: str = "https") -> int:
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{srv.server_port}/metrics")
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=ctx) as response:
            assert b"process_cpu_seconds_total" in response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            assert exc.headers["WWW-Authenticate"] == 'Basic realm="gpu-health"'
        return exc.code


def test_https_with_basic_auth(server: Served, pki: Pki) -> None:
    srv, _, _ = server
    assert get(srv, pki.client(), "prometheus", "s3cret") == 200
    assert get(srv, pki.client(), "prometheus", "wrong") == 401
    assert get(srv, pki.client(), "nobody", "s3cret") == 401
    assert get(srv, pki.client()) == 401
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP, TLS port
        get(srv, None, "prometheus", "s3cret", scheme="http")
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(srv, ssl.create_default_context(), "prometheus", "s3cret")  # untrusted CA


def test_the_file_is_read_again_when_it_changes(server: Served, pki: Pki,
                                                tmp_path: Path) -> None:
    srv, config, guard = server
    assert get(srv, pki.client(), "grafana", "pw2") == 401
    write(config, pki, {"prometheus": "s3cret", "grafana": "pw2"})
    guard.settle(10)  # the re-read runs in a worker thread
    assert get(srv, pki.client(), "grafana", "pw2") == 200  # a user added: no restart
    other = make_pki(tmp_path / "rotated", "rotated-ca")
    write(config, other, {"prometheus": "s3cret"})  # a rotated certificate from a new CA
    guard.settle(10)
    assert get(srv, other.client(), "prometheus", "s3cret") == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(srv, pki.client(), "prometheus", "s3cret")


def test_a_file_turned_bad_keeps_the_last_good_version_said_once(
        server: Served, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    srv, config, guard = server
    config.write_text("basic_auth_users: [not, a, mapping]\n")
    with caplog.at_level(logging.ERROR, "gpu_health.webguard"):
        guard.settle(10)
        for _ in range(3):
            assert get(srv, pki.client(), "prometheus", "s3cret") == 200  # still served
            guard.settle(10)
    said = [r.getMessage() for r in caplog.records if "last good version" in r.getMessage()]
    assert len(said) == 1 and "basic_auth_users must be a mapping" in said[0]
    assert "s3cret" not in said[0]
    write(config, pki, {"grafana": "pw2"})  # fixed: the new version, and only it
    guard.settle(10)
    assert get(srv, pki.client(), "grafana", "pw2") == 200
    assert get(srv, pki.client(), "prometheus", "s3cret") == 401


def test_client_certificates(tmp_path: Path, pki: Pki) -> None:
    config = tmp_path / "web.yml"
    write(config, pki, client_auth="RequireAndVerifyClientCert")
    guard = WebGuard(config)
    srv, _ = serve("127.0.0.1", 0, make_app(CollectorRegistry(), lambda: (True, "ok")),
                   guard=guard)
    try:
        assert get(srv, pki.client(with_cert=True)) == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(srv, pki.client(with_cert=False))
        write(config, pki, client_auth="VerifyClientCertIfGiven")  # relaxed, no restart
        guard.settle(10)
        assert get(srv, pki.client(with_cert=False)) == 200
    finally:
        srv.shutdown()


def test_a_client_ca_removed_from_the_file_is_no_longer_trusted(tmp_path: Path,
                                                                 pki: Pki) -> None:
    """Each version of the file gets a context of its own, so a CA taken out of
    ``client_ca_file`` stops being trusted for the next connection, without a restart."""
    config = tmp_path / "web.yml"
    other = make_pki(tmp_path / "other", "other-ca")
    write(config, pki, client_auth="RequireAndVerifyClientCert")
    guard = WebGuard(config)
    srv, _ = serve("127.0.0.1", 0, make_app(CollectorRegistry(), lambda: (True, "ok")),
                   guard=guard)
    trusting_ours = pki.client(with_cert=True)
    try:
        assert get(srv, trusting_ours) == 200
        doc = yaml.safe_load(config.read_text())
        doc["tls_server_config"]["client_ca_file"] = str(other.ca)  # the old CA removed
        config.write_text(yaml.safe_dump(doc))
        guard.settle(10)
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(srv, trusting_ours)
        from_other = pki.client()
        from_other.load_cert_chain(other.client_cert, other.client_key)
        assert get(srv, from_other) == 200
    finally:
        srv.shutdown()


def test_a_bad_file_stops_the_exporter_listing_every_problem(tool_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config: {cert_file: missing.crt}\nbasic_auth_users: {a: b}\n")
    result = run(["--web.listen-address", "127.0.0.1:0", "--nvidia-smi", NVIDIA_SMI,
                  "--web.config.file", str(config), *NO_KERNEL_LOG], tool_env)
    assert result.returncode == 2
    assert "cert_file and key_file are both required" in result.stderr
    assert "basic_auth_users.a is not a bcrypt hash" in result.stderr
