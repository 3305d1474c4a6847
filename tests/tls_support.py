"""Real certificates for TLS tests, made with the ``openssl`` command (.ci/run installs it): a
CA, a server certificate for 127.0.0.1 and a client certificate, each signed by that CA."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client(self, with_cert: bool = False) -> ssl.SSLContext:
        """A client trusting this CA (and presenting the client certificate when asked)."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(folder: Path, name: str = "ca") -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=folder)
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                     ("client", "extendedKeyUsage=clientAuth\n")):
        (folder / f"{who}.ext").write_text(ext)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}", "-keyout",
                 f"{name}-{who}.key", "-out", f"{who}.csr", cwd=folder)
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", f"{name}.crt", "-CAkey",
                 f"{name}.key", "-CAcreateserial", "-days", "2", "-extfile", f"{who}.ext",
                 "-out", f"{name}-{who}.crt", cwd=folder)
    return Pki(folder / f"{name}.crt", folder / f"{name}-server.crt", folder / f"{name}-server.key",
               folder / f"{name}-client.crt", folder / f"{name}-client.key")
