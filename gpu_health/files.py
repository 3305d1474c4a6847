"""How the programs read a file they re-read while running, and write a file a user asked for.

Reading (:func:`read_regular`): opened without waiting and refused unless a regular file, then
read up to a cap. A FIFO, a device such as ``/dev/zero`` or a 1 GB file swapped in place of a
tokens file or web config used to hang the program forever, or stall it and fill its memory.

Writing (:func:`write_file`): a report or a calibrated rule file.

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
import stat
import tempfile
from pathlib import Path

from gpu_health.errors import OutputError

MODE = 0o644  # reports and rule files are read by other users (Prometheus, an operator)


class NotReadable(OSError):
    """Not a regular file, or larger than the cap: a reason worth one log line."""


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, at most ``max_bytes``; OSError (NotReadable for a file that is
    not regular or too large) otherwise. Never blocks on a FIFO or a device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotReadable(f"{path}: not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NotReadable(f"{path}: larger than {max_bytes} bytes")
    return data


def not_a_folder(folder: Path) -> Path | None:
    """The nearest existing one of ``folder`` and its parents, when it is not a folder (a file
    where a folder must be: nothing can be written below it)."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    return existing if existing is not None and not existing.is_dir() else None


def write_file(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to ``path`` atomically. ``replace=False``: FileExistsError when ``path``
    exists (the caller decides whether that is the same content)."""
    folder = path.parent
    blocker = not_a_folder(folder)
    if blocker is not None:
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
