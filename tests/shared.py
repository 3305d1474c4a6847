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
