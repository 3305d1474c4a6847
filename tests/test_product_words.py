"""The product speaks for itself: no code, comment, log line, doc or config names a tracker
issue by number or sends a reader to the tracker, which a user cannot look up.

Captured third-party output (``tests/fixtures``) is quoted as captured and is not checked.
"""

from __future__ import annotations

import re
import subprocess

from tests.shared import REPO

TRACKER = re.compile(r"\b(?:tracker )?issues? ?#?\d+|\bthe issues\b", re.IGNORECASE)
QUOTED = ("tests/fixtures/",)


def _tracked_text_files() -> list[str]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True, timeout=60).stdout.decode().split("\0")
    return [n for n in names if n and not n.startswith(QUOTED)
            and (REPO / n).is_file() and not (REPO / n).is_symlink()]


def test_no_file_names_a_tracker_issue() -> None:
    found = []
    for name in _tracked_text_files():
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # images
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                  for m in TRACKER.finditer(text)]
    assert found == []
