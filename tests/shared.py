"""Where the third-party captures live (../shared next to the checkout, or $GPU_HEALTH_SHARED).

Tests may read them but never copy them into the project. Tests that need them call
``require_shared()``, which skips with a clear reason when the folder is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_HEALTH_SHARED", REPO.parent / "shared")).resolve()
FIXTURES = REPO / "tests" / "fixtures"
# The source folders of the one import package: the programs' folders sit at the top of the
# checkout (gpu_health/evaluator and gpu_health/exporter are links to them).
SOURCE_FOLDERS = {"gpu_health": "gpu_health", "evaluator": "gpu_health.evaluator",
                  "exporter": "gpu_health.exporter"}


def module_name(path: Path) -> str:
    """The import name of a source file of the checkout (``evaluator/main.py`` is
    ``gpu_health.evaluator.main``; ``bench/api.py`` is ``bench.api``)."""
    top, *rest = path.relative_to(REPO).with_suffix("").parts
    return ".".join([SOURCE_FOLDERS.get(top, top), *rest]).removesuffix(".__init__")


def shared_available() -> bool:
    return (SHARED / "fixtures").is_dir()


def require_shared(sub: str = "fixtures") -> Path:
    """Path of ``SHARED/sub``; skips the calling test when it does not exist."""
    path = SHARED / sub
    if not path.exists():
        pytest.skip(
            f"third-party captures not present at {path} (set GPU_HEALTH_SHARED to the shared "
            "folder; CI always has it)"
        )
    return path


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """YAML whose aliases expand to ``width ** levels`` strings from a few hundred bytes; the
    last anchor is ``*a{levels}``."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def swap_for_hostile(path: Path, kind: str) -> None:
    """Put something hostile where a file the programs re-read was: a FIFO (an open would
    wait forever), a link to /dev/zero (endless), a sparse 1 GB file, or an alias bomb."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "1 GB":
        with path.open("wb") as handle:
            handle.truncate(1024 ** 3)  # none of it on disk
    else:
        assert kind == "alias bomb", kind
        path.write_text(alias_bomb() + "tls_server_config: {cert_file: *a9}\n")
