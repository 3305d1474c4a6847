"""Files we write (reports, calibrated rule files) never follow a link we did not create,
never leave a half-written file, and fail with one clear line (gpu_health/files.py)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_health.errors import OutputError
from gpu_health.evaluator.calibrate.rulefile import calibrated_version, write_rule
from gpu_health.evaluator.config.rules import DEFAULT_RULE_FILE, load_ruleset
from gpu_health.files import write_file


def _chosen() -> object:
    return load_ruleset(DEFAULT_RULE_FILE, env={"GPU_HEALTH_RULE_MIN_INCREASE": "8"})


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """``calibrate --write-rule DIR`` wrote ``<name>.yaml.tmp`` with ``write_text``, which
    follows a symlink planted there: a file outside DIR was overwritten."""
    chosen = _chosen()
    folder, outside = tmp_path / "rules", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("precious\n")
    name = f"{calibrated_version(chosen)}.yaml"  # type: ignore[arg-type]
    (folder / f"{name}.tmp").symlink_to(outside)
    path = write_rule(folder, chosen, ["header"])  # type: ignore[arg-type]
    assert outside.read_text() == "precious\n"
    assert path == folder / name and not path.is_symlink()
    assert load_ruleset(path, env={}).params_hash == chosen.params_hash  # type: ignore[attr-defined]


def test_a_link_planted_at_the_final_name_is_refused(tmp_path: Path) -> None:
    chosen = _chosen()
    folder, outside = tmp_path / "rules", tmp_path / "elsewhere.yaml"
    folder.mkdir()
    name = f"{calibrated_version(chosen)}.yaml"  # type: ignore[arg-type]
    (folder / name).symlink_to(outside)  # dangling: exists() says no
    with pytest.raises(OutputError, match="not overwritten"):
        write_rule(folder, chosen, ["header"])  # type: ignore[arg-type]
    assert not outside.exists()
    assert sorted(p.name for p in folder.iterdir()) == [name]  # no temporary file left


def test_a_replaced_report_replaces_a_link_not_its_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}\n")
    report = tmp_path / "report.json"
    report.symlink_to(outside)
    write_file(report, '{"ok": true}\n', replace=True)
    assert outside.read_text() == "{}\n" and not report.is_symlink()
    assert report.read_text() == '{"ok": true}\n'


def test_a_folder_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "dir"
    blocker.write_text("a file\n")
    with pytest.raises(OutputError, match=r"cannot write .*dir/x.json: .*dir is not a folder"):
        write_file(blocker / "x.json", "{}", replace=True)


def _fill(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal


def test_a_full_disk_leaves_no_half_written_file(tmp_path: Path) -> None:
    """A full disk left ``report.json`` cut at 8 KB plus a traceback. The process here may
    write at most 8 KiB per file (RLIMIT_FSIZE), like a disk that fills up mid-write."""
    code = ("import sys; from pathlib import Path; from gpu_health.files import write_file\n"
            "from gpu_health.errors import OutputError\n"
            "try:\n    write_file(Path(sys.argv[1]), 'x' * 100_000, replace=True)\n"
            "except OutputError as e:\n    print(e); sys.exit(1)\n")
    target = tmp_path / "report.json"
    target.write_text("the previous report\n")
    result = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                            text=True, timeout=60, preexec_fn=lambda: _fill(8192), check=False)
    assert result.returncode == 1 and result.stderr == "", result.stderr
    assert result.stdout.startswith(f"cannot write {target}: File too large")
    assert target.read_text() == "the previous report\n"  # untouched, whole
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left
