"""The one module that runs subprocesses: argv without a shell, LC_ALL=C, timeout, output cap."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from gpu_health.errors import CollectError, ToolNotFound
from gpu_health.runner import ToolResult, ToolRunner

from .support import NVIDIA_SMI


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def runner(env: dict[str, str], timeout_s: float = 10.0, cap: int = 1024 * 1024) -> ToolRunner:
    return ToolRunner(timeout_s=timeout_s, max_output_bytes=cap, env=env)


def test_argv_is_passed_without_a_shell_and_locale_is_forced_to_c(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    tool = script(tmp_path, "echo-args", 'echo "LC_ALL=$LC_ALL LANG=$LANG"; printf "%s\\n" "$@"\n')
    env = {**tool_env, "LC_ALL": "de_DE.UTF-8", "LANG": "de_DE.UTF-8"}
    result = runner(env).run(tool, ["a b", "; touch pwned", "$HOME", "*"])
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "LC_ALL=C LANG=de_DE.UTF-8", "a b", "; touch pwned", "$HOME", "*"]
    assert not (tmp_path / "pwned").exists()


def test_the_debug_log_names_the_exact_command_line_and_its_outcome(
    tmp_path: Path, tool_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    tool = script(tmp_path, "two words", "echo ok\nexit 3\n")
    with caplog.at_level(logging.DEBUG, logger="gpu_health.runner"):
        runner(tool_env).run(tool, ["--query-gpu=index,name", "a b"])
    (record,) = caplog.records
    # shell-quoted, so the line can be pasted to a shell to run the tool by hand
    assert record.getMessage().startswith(
        f"ran '{tool}' --query-gpu=index,name 'a b': exit status 3 in ")
    assert record.getMessage().endswith(" s, 3 bytes of output")


def test_stdin_is_closed(tmp_path: Path, tool_env: dict[str, str]) -> None:
    tool = script(tmp_path, "reads-stdin", "cat\necho done\n")
    assert runner(tool_env, timeout_s=5).run(tool, []).stdout == "done\n"


def test_non_zero_exit_is_returned_and_require_success_names_it(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    message = 'echo "Field \\"x\\" is not a valid field to query."'
    tool = script(tmp_path, "fails", message + "\nexit 2\n")
    result = runner(tool_env).run(tool, [])
    assert result.returncode == 2 and "not a valid field" in result.stdout
    with pytest.raises(CollectError, match="status 2") as info:
        result.require_success()
    assert info.value.reason == "exit_code"


def test_stderr_keeps_only_its_tail(tmp_path: Path, tool_env: dict[str, str]) -> None:
    tool = script(tmp_path, "noisy", "yes err | head -c 100000 >&2\necho tail-marker >&2\n")
    result = runner(tool_env).run(tool, [])
    assert len(result.stderr_tail) <= 4096 and result.stderr_tail.endswith("tail-marker\n")


def test_missing_or_not_executable_binary_is_tool_not_found(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho hi\n")
    for command in (str(tmp_path / "absent"), str(plain), "no-such-tool-on-path", ""):
        with pytest.raises(ToolNotFound) as info:
            runner(tool_env).run(command, [])
        assert info.value.reason == "not_found"


def test_name_is_looked_up_on_the_tool_path_not_the_exporters(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    script(tmp_path, "my-smi", "echo found\n")
    env = {**tool_env, "PATH": f"{tmp_path}:{tool_env['PATH']}"}
    assert runner(env).which("my-smi") == str(tmp_path / "my-smi")
    assert runner(env).run("my-smi", []).stdout == "found\n"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_timeout_kills_the_whole_process_group(tmp_path: Path, tool_env: dict[str, str]) -> None:
    pidfile = tmp_path / "pids"
    env = {**tool_env, "FAKE_NVIDIA_HELP_MODE": "hang", "FAKE_PIDFILE": str(pidfile)}
    with pytest.raises(CollectError, match="did not finish") as info:
        runner(env, timeout_s=1.0).run(NVIDIA_SMI, ["--help-query-gpu"])
    assert info.value.reason == "timeout"
    # The grandchild holding stdout open must be gone too: only a process-group kill does that.
    pids = [int(p) for p in pidfile.read_text().split()]
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the kernel to reap, not for a time to pass
    assert all(_gone(pid) for pid in pids)


def test_a_tool_printing_50_mb_is_cut_off_at_the_cap(tool_env: dict[str, str]) -> None:
    env = {**tool_env, "FAKE_NVIDIA_HELP_MODE": "huge"}
    with pytest.raises(CollectError, match="more than 65536 bytes") as info:
        runner(env, cap=65536).run(NVIDIA_SMI, ["--help-query-gpu"])
    assert info.value.reason == "oversize"


def test_output_exactly_at_the_cap_is_accepted(tmp_path: Path, tool_env: dict[str, str]) -> None:
    tool = script(tmp_path, "exact", "head -c 1000 /dev/zero | tr '\\0' x\n")
    assert len(runner(tool_env, cap=1000).run(tool, []).stdout) == 1000


def test_binary_garbage_is_decoded_not_fatal(tool_env: dict[str, str]) -> None:
    env = {**tool_env, "FAKE_NVIDIA_HELP_MODE": "garbage"}
    result = runner(env).run(NVIDIA_SMI, ["--help-query-gpu"])
    assert result.returncode == 0 and "\ufffd" in result.stdout


def test_run_many_keeps_order_and_returns_failures_instead_of_raising(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    tool = script(tmp_path, "answer", 'if [ "$1" = bad ]; then exit 3; fi\n'
                  'if [ "$1" = slow ]; then sleep 30; fi\necho "$1"\n')
    results = runner(tool_env, timeout_s=1.0).run_many(
        tool, [["a"], ["bad"], ["slow"], ["b"]], max_parallel=2, deadline_s=10)
    first, bad, slow, last = results
    assert isinstance(first, ToolResult) and first.stdout == "a\n"
    assert isinstance(bad, ToolResult) and bad.returncode == 3
    assert isinstance(slow, CollectError) and slow.reason == "timeout"  # the runner's own limit
    assert isinstance(last, ToolResult) and last.stdout == "b\n"


def test_run_many_does_not_start_runs_after_the_shared_deadline(
    tmp_path: Path, tool_env: dict[str, str]
) -> None:
    started = tmp_path / "started"
    tool = script(tmp_path, "hangs", f'echo "$1" >> "{started}"\nsleep 30\n')
    results = runner(tool_env, timeout_s=10).run_many(
        tool, [[str(i)] for i in range(6)], max_parallel=3, deadline_s=1.0)
    assert all(isinstance(r, CollectError) and r.reason == "timeout" for r in results)
    assert len(started.read_text().split()) == 3
    assert sum("not started" in str(r) for r in results) == 3


def test_run_many_reports_a_missing_tool_per_run(tool_env: dict[str, str]) -> None:
    results = runner(tool_env).run_many("no-such-tool", [["x"], ["y"]], max_parallel=4,
                                        deadline_s=5)
    assert [r.reason for r in results if isinstance(r, CollectError)] == ["not_found"] * 2


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_background_child_is_ended_after_every_run_not_only_on_timeout(
    tmp_path: Path, tool_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A wrapper that starts `cmd &` and exits 0: its child must not outlive the run (issue
    27: one orphan per tick, 22 after 20 s, while collection looked healthy)."""
    pids = tmp_path / "pids"
    tool = script(tmp_path, "forks", f"sleep 30 >/dev/null 2>&1 &\necho $! >> {pids}\necho ok\n")
    with caplog.at_level(logging.WARNING, logger="gpu_health.runner"):
        for _ in range(3):
            result = runner(tool_env).run(tool, [])
            assert (result.returncode, result.stdout) == (0, "ok\n")
    children = [int(line) for line in pids.read_text().split()]
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in children)
    assert [r.message for r in caplog.records].count(
        f"{tool} left processes running after it exited; its process group is ended after "
        "every run (said once per tool)") == 1


def test_a_tool_without_children_is_not_warned_about(
    tmp_path: Path, tool_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    tool = script(tmp_path, "plain", "echo ok\n")
    with caplog.at_level(logging.WARNING, logger="gpu_health.runner"):
        assert runner(tool_env).run(tool, []).stdout == "ok\n"
    assert caplog.records == []
