"""The one way the programs write a file a user asked for (a report, a calibrated rule file).

Written beside its final name under an unpredictable temporary name created exclusively (a
symlink planted there is never followed), flushed to disk, then moved into place in one step:
a rename when an existing file may be replaced (it replaces a link itself, never its
target), a hard link when it may not (which also refuses a link planted at the final name). A
full disk, a read-only folder or a folder that is a file is one :class:`OutputError` line, and
no half-written file stays.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from gpu_health.errors import OutputError

MODE = 0o644  # reports and rule files are read by other users (Prometheus, an operator)


def write_file(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to ``path`` atomically. ``replace=False``: FileExistsError when ``path``
    exists (the caller decides whether that is the same content)."""
    folder = path.parent
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise OutputError(f"cannot write {path}: {blocker} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(MODE)
        if replace:
            tmp.replace(path)
        else:
            path.hardlink_to(tmp)  # never over an existing name, link or not
    except FileExistsError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
