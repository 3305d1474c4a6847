"""Runs outside tools: the vendor tools for the exporter, Slurm's commands for the evaluator.
The only module of either program that runs a tool (the demo's child programs aside,
``evaluator/demo/``).

Every run: an argv list (never a shell), ``LC_ALL=C`` so number and message formats do not
follow the node's locale, stdin closed, a wall-clock timeout after which the tool's whole process
group is killed (a wrapper script's children would otherwise keep the pipes open), and a cap on
stdout that is enforced while reading, so a runaway tool printing 50 MB never sits in memory.
Failures come out as :class:`~gpu_health.errors.CollectError` with a low-cardinality ``reason``.
"""

from __future__ import annotations

import logging
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpu_health.errors import CollectError, ToolNotFound

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_STDERR_TAIL = 4 * 1024


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A finished run: exit status, decoded stdout, and the last few KiB of stderr."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr_tail: str

    def require_success(self) -> ToolResult:
        """``self`` when the tool exited 0, else a CollectError(reason="exit_code")."""
        if self.returncode != 0:
            detail = (self.stdout.strip() or self.stderr_tail.strip())[:300]
            raise CollectError(
                f"{self.argv[0]} exited with status {self.returncode}: {detail!r}",
                reason="exit_code",
            )
        return self


class _Abort(Exception):
    """Internal: stop reading and kill the tool (``reason`` is the error label)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolRunner:
    """Runs tools with one timeout, one output cap and one base environment."""

    def __init__(
        self, *, timeout_s: float, max_output_bytes: int, env: Mapping[str, str]
    ) -> None:
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes
        # LC_ALL=C wins over anything inherited: decimal commas or translated messages would
        # turn every number into "unknown".
        self._env = {**env, "LC_ALL": "C"}

    def which(self, command: str) -> str | None:
        """The executable ``command`` names (a path, or a name looked up on the tool PATH)."""
        if not command:
            return None
        if os.sep in command:
            usable = Path(command).is_file() and os.access(command, os.X_OK)
            return command if usable else None
        return shutil.which(command, path=self._env.get("PATH", os.defpath))

    def run(
        self, command: str, args: Sequence[str], *, timeout_s: float | None = None
    ) -> ToolResult:
        """Run ``command args...``; raises CollectError on timeout, oversize or exec failure.

        A non-zero exit status is returned, not raised: some callers read the output of a
        failed run (nvidia-smi names the rejected field on stdout when it exits 2).
        ``timeout_s`` shortens the runner's timeout for this run (a tick deadline's rest).
        """
        path = self.which(command)
        if path is None:
            raise ToolNotFound(f"{command!r} is not installed or not executable")
        argv = (path, *args)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,  # own process group, so a timeout kills all of it
                close_fds=True,
            )
        except FileNotFoundError as exc:  # removed between which() and exec
            raise ToolNotFound(f"{command!r} vanished before it could run: {exc}") from exc
        except OSError as exc:
            raise CollectError(f"cannot start {path!r}: {exc}", reason="exec") from exc
        limit = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        started = time.monotonic()
        result = self._finish(proc, argv, limit)
        # The exact command line and its cost: how a field list or a slow driver is diagnosed.
        log.debug("ran %s: exit status %d in %.3f s, %d bytes of output", shlex.join(argv),
                  result.returncode, time.monotonic() - started, len(result.stdout))
        return result

    def run_many(
        self,
        command: str,
        arg_lists: Sequence[Sequence[str]],
        *,
        max_parallel: int,
        deadline_s: float,
    ) -> list[ToolResult | CollectError]:
        """Run ``command`` once per argument list, at most ``max_parallel`` at a time.

        All runs share ONE deadline, ``deadline_s`` from now: a run still going then is killed,
        and a run whose turn comes after it is not started (``timeout`` for both). Results come
        back in the order of ``arg_lists``; a failed run is its CollectError, not raised, so
        one card's failure never costs the other cards their answers.
        """
        deadline = time.monotonic() + deadline_s

        def one(args: Sequence[str]) -> ToolResult | CollectError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return CollectError(
                    f"{command} {' '.join(args)}: not started, the tick's {deadline_s:g}s "
                    "deadline had passed", reason="timeout")
            try:
                return self.run(command, args, timeout_s=remaining)
            except CollectError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max(1, max_parallel),
                                thread_name_prefix="tool") as pool:
            return list(pool.map(one, arg_lists))

    def _finish(
        self, proc: subprocess.Popen[bytes], argv: tuple[str, ...], timeout_s: float
    ) -> ToolResult:
        deadline = time.monotonic() + timeout_s
        try:
            out, err = self._drain(proc, deadline)
            _wait_unreaped(proc, deadline)
            # A tool that left a background child behind (a wrapper's `cmd &`) would leave one
            # orphan per run: the group ends with every run, while the exited leader's pid
            # (the group id) is still held, so the id cannot name another group.
            if _kill_group_members(proc):
                _warn_once(argv[0])
            returncode = proc.wait()
        except (_Abort, subprocess.TimeoutExpired) as exc:
            # Kill the group before reaping the leader, so its pgid cannot have been reused.
            _kill_group(proc)
            proc.wait()
            reason = exc.reason if isinstance(exc, _Abort) else "timeout"
            message = _abort_message(argv[0], reason, timeout_s, self.max_output_bytes)
            raise CollectError(message, reason=reason) from None
        finally:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        return ToolResult(
            argv=argv,
            returncode=returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr_tail=err.decode("utf-8", errors="replace"),
        )

    def _drain(
        self, proc: subprocess.Popen[bytes], deadline: float
    ) -> tuple[bytes, bytes]:
        """Read stdout (capped) and stderr (tail only) until both close or a limit is hit."""
        assert proc.stdout is not None and proc.stderr is not None
        out, err = bytearray(), bytearray()
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)
            sel.register(proc.stderr, selectors.EVENT_READ, err)
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Abort("timeout")
                for key, _ in sel.select(remaining):
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif key.data is out:
                        out += chunk
                        if len(out) > self.max_output_bytes:
                            raise _Abort("oversize")
                    else:
                        err += chunk
                        del err[:-_STDERR_TAIL]
        return bytes(out), bytes(err)


_LEFT_BEHIND: set[str] = set()


def _warn_once(path: str) -> None:
    if path not in _LEFT_BEHIND:
        _LEFT_BEHIND.add(path)
        log.warning("%s left processes running after it exited; its process group is ended "
                    "after every run (said once per tool)", path)


def _wait_unreaped(proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Wait until the leader exits, without reaping it (WNOWAIT): its pid stays taken."""
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, 0)
        time.sleep(0.002)


def _kill_group_members(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL whatever is left in the (exited) leader's group; True when something was."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    # The zombie leader alone keeps the group alive: killpg "succeeds" on it too. Say only
    # when another member was there.
    return _group_has_others(proc.pid)


def _group_has_others(pgid: int) -> bool:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == pgid:
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid):
            return True
    return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _abort_message(path: str, reason: str, timeout_s: float, max_bytes: int) -> str:
    if reason == "timeout":
        return f"{path} did not finish within {timeout_s:g}s; killed its process group"
    return f"{path} printed more than {max_bytes} bytes; killed its process group"
