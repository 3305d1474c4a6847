"""Follows the kernel log for NVIDIA Xid and NVSwitch SXid lines, in its own thread; counts go
to an XidStore.

Sources, in order, every poll (``--xid-interval``): ``/dev/kmsg`` (``--kmsg-path``) when it can
be opened, else ``dmesg``, else ``journalctl -k`` (``--dmesg``, ``--journalctl``; ``""``
switches a source off). Only the sources tried in a poll are reported in
``gpu_health_exporter_xid_log_readable{source}``.

Never counting a line twice, across polls and across restarts:
- ``/dev/kmsg`` is opened non-blocking and positioned at its END (``SEEK_END``), so a restarted
  exporter reads only records written after it started; each ``read`` returns one record, and
  ``EPIPE`` (records overwritten before we read them) is counted as ``overrun``. A regular file
  or FIFO given as ``--kmsg-path`` (tests) is read the same way, line by line.
- ``dmesg`` and ``journalctl -k -o short-monotonic`` print whole histories; only lines whose
  ``[seconds since boot]`` stamp is newer than a cursor are counted. The first read only sets
  the cursor (what is logged then predates this process); later reads count what is newer and
  move it, with a tally of lines sharing the newest stamp. kmsg records move it too, so a
  switch from kmsg to dmesg recounts nothing. Lines without a stamp are skipped.
Lines written while the exporter was down are not counted (the counter restarts at 0, which
Prometheus reads as a counter reset); counting them would need a persisted cursor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence

from gpu_health.errors import CollectError, GpuHealthError
from gpu_health.runner import ToolRunner

from .parsers import xid
from .tool_output import CardReading
from .xid_store import XidStore

log = logging.getLogger(__name__)

JOURNALCTL_ARGS = ("-k", "-b", "-o", "short-monotonic", "--no-pager", "-q", "-n", "20000")
_READ_CHUNK = 64 * 1024
_MAX_READS_PER_POLL = 100_000  # kmsg returns one record (~100 bytes) per read
# Bounds for a followed file that grows without limit (512 MB appended, one 300 MB
# line without a newline, RSS 1.95 GB): at most this much is read per poll (the rest waits for
# the next one), and a line longer than the cap is dropped and counted (``line_too_long``).
# A kmsg record is at most ~1 KiB (printk's limit); an Xid line is ~200 bytes. The defaults of
# --xid-max-bytes-per-poll and --xid-max-line-bytes.
MAX_BYTES_PER_POLL = 8 * 1024 * 1024
MAX_LINE = 64 * 1024
MIN_LINE = 1024  # a smaller cap would drop whole valid kmsg records

CardsProvider = Callable[[], Sequence[CardReading] | None]


class _Cursor:
    """The newest kernel timestamp seen, and how many lines seen carry exactly it.

    Unset until the first read: whatever a source prints then is history (logged before this
    exporter looked), so it becomes the baseline instead of being counted. No clock is read:
    printk stamps and the process's CLOCK_MONOTONIC drift apart by minutes over months of
    uptime, which would recount or lose lines around a restart.
    """

    def __init__(self) -> None:
        self.last: float | None = None
        self.seen_at_last = 0

    def note(self, stamp: float) -> None:
        if self.last is None or stamp > self.last:
            self.last, self.seen_at_last = stamp, 1
        elif stamp == self.last:
            self.seen_at_last += 1

    def take_new(self, lines: Sequence[str]) -> list[str]:
        """The lines newer than the cursor (in order), advancing it past them."""
        stamped = [(stamp, line) for line in lines
                   if (stamp := xid.uptime_of(line)) is not None]
        if self.last is None:  # the first read: a baseline, nothing counted
            for stamp, _ in stamped:
                self.note(stamp)
            if self.last is None:
                self.last = 0.0  # an empty log: everything from now on is new
            return []
        last, seen, equal = self.last, self.seen_at_last, 0
        out = []
        for stamp, line in stamped:
            if stamp < last:
                continue
            if stamp == last:
                equal += 1
                if equal <= seen:
                    continue
            out.append(line)
            self.note(stamp)
        return out


class XidFollower:
    """Reads new kernel-log lines every ``interval_s`` and records their Xid events."""

    def __init__(
        self,
        store: XidStore,
        runner: ToolRunner,
        cards: CardsProvider,
        *,
        kmsg_path: str,
        dmesg: str,
        journalctl: str,
        interval_s: float,
        max_bytes_per_poll: int = MAX_BYTES_PER_POLL,
        max_line_bytes: int = MAX_LINE,
    ) -> None:
        self.store = store
        self.max_bytes_per_poll = max_bytes_per_poll
        self.max_line_bytes = max_line_bytes
        self.runner = runner
        self.cards = cards
        self.kmsg_path = kmsg_path
        self.commands = [(name, binary, args) for name, binary, args in (
            ("dmesg", dmesg, ()), ("journalctl", journalctl, JOURNALCTL_ARGS)) if binary]
        self.interval_s = interval_s
        self._cursor = _Cursor()
        self._fd: int | None = None
        self._partial = b""
        self._discarding = False  # inside an over-long line: skip to its end
        self._last_statuses: dict[str, bool] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        """Read what is new and count it; the poll's one catch-all counts any error."""
        try:
            self.store.update_cards(self.cards())
            statuses: dict[str, bool] = {}
            failures: dict[str, str] = {}
            lines = self._read_kmsg(statuses, failures)
            for name, binary, args in self.commands if lines is None else ():
                lines = self._read_command(name, binary, args, statuses, failures)
                if lines is not None:
                    break
            self.store.set_readable(statuses)
            self._note_changes(statuses, failures)
            events = (xid.parse_event(line) for line in lines or ())
            self.store.record(event for event in events if event is not None)
        except Exception as exc:  # the one catch-all of a poll
            reason = exc.reason if isinstance(exc, GpuHealthError) else "internal"
            log.exception("kernel-log poll failed (%s)", reason)
            self.store.error(reason)

    def _read_kmsg(
        self, statuses: dict[str, bool], failures: dict[str, str]
    ) -> list[str] | None:
        if not self.kmsg_path:
            return None
        try:
            if self._fd is None:
                self._fd = _open_at_end(self.kmsg_path)
            data = self._drain(self._fd)
        except OSError as exc:
            self._close()
            statuses["kmsg"], failures["kmsg"] = False, "read"
            log.debug("cannot read %s: %s", self.kmsg_path, exc)
            return None
        statuses["kmsg"] = True
        lines = self._complete_lines(data)
        for line in lines:
            stamp = xid.uptime_of(line)
            if stamp is not None:
                self._cursor.note(stamp)
        return lines

    def _complete_lines(self, data: bytes) -> list[str]:
        """The complete lines of what was read, over-long ones dropped and counted; the
        trailing partial line is kept for the next poll unless it is already too long."""
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                return []
            data, self._discarding = data[end + 1:], False
        complete, self._partial = _split_complete(self._partial + data)
        if len(self._partial) > self.max_line_bytes:
            self._partial, self._discarding = b"", True
            self.store.error("line_too_long")
        lines = []
        for raw in complete.splitlines():
            if len(raw) > self.max_line_bytes:
                self.store.error("line_too_long")
                continue
            lines.append(raw.decode("utf-8", errors="replace"))
        return lines

    def _drain(self, fd: int) -> bytes:
        """What is readable now, at most ``max_bytes_per_poll`` (the rest waits for the next
        poll, so one poll never holds more than that in memory)."""
        out = bytearray()
        for _ in range(_MAX_READS_PER_POLL):
            if len(out) >= self.max_bytes_per_poll:
                break
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                break  # nothing more right now
            except BrokenPipeError:
                self.store.error("overrun")  # kmsg: records overwritten before we read them
                continue
            if not chunk:
                break  # end of a regular file, or a FIFO without a writer
            out += chunk
        return bytes(out)

    def _read_command(
        self, name: str, binary: str, args: Sequence[str], statuses: dict[str, bool],
        failures: dict[str, str],
    ) -> list[str] | None:
        try:
            result = self.runner.run(binary, args).require_success()
        except CollectError as exc:
            statuses[name], failures[name] = False, exc.reason
            log.debug("cannot read the kernel log with %s: %s", binary, exc)
            return None
        statuses[name] = True
        return self._cursor.take_new(result.stdout.splitlines())

    def _note_changes(self, statuses: dict[str, bool], failures: dict[str, str]) -> None:
        """Count a source's failure once when it stops being readable, and log the change.

        The readable gauge carries the ongoing state; counting every poll of a source that is
        never readable here (kmsg in an unprivileged container) would only be noise.
        """
        for source, reason in failures.items():
            if self._last_statuses.get(source) is not False:
                self.store.error(reason)
        if statuses != self._last_statuses:
            readable = [s for s, ok in statuses.items() if ok]
            if readable:
                log.info("following the kernel log for Xid lines with %s", readable[0])
            else:
                log.warning("kernel log not readable (tried %s); Xid counts are not exported",
                            ", ".join(statuses) or "nothing: every source is switched off")
            self._last_statuses = dict(statuses)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._partial = b""
            self._discarding = False

    def start(self) -> None:
        """Poll now and every ``interval_s`` in a daemon thread, until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="xid-follower", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.poll_once()
            if self._stop.wait(self.interval_s):
                return

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return  # still inside a poll; the process is ending anyway
        self._close()


def _open_at_end(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with contextlib.suppress(OSError):  # a FIFO has no history to skip (ESPIPE)
        os.lseek(fd, 0, os.SEEK_END)  # never read what was logged before we started
    return fd


def _split_complete(data: bytes) -> tuple[bytes, bytes]:
    """(complete lines, trailing partial line) of what was read so far."""
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]
