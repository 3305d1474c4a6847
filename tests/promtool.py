"""The real ``promtool`` (Debian package ``prometheus``; ``.ci/run`` installs it), found on
PATH like every other server the tests run; a test that needs it skips with the reason when it
is missing (an environment guard, as for PostgreSQL)."""

from __future__ import annotations

import shutil

import pytest


def promtool() -> str:
    """The path of ``promtool`` on PATH; skips the calling test when there is none."""
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not on PATH (Debian package prometheus; .ci/run installs it)")
    return found
