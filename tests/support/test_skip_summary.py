"""``scripts/test.sh``'s last lines name what did not run and why (tests/support/skip_summary.py): a small
suite with skips is run by pytest in a process of its own, and an install script that cannot
install notes it for that block."""
from __future__ import annotations

import os
import subprocess
import sys

from repo_paths import ROOT, SUPPORT as HERE, TESTS

SUITE = {
    "test_some.py": (
        "import pytest\n"
        "def test_runs():\n    pass\n"
        "def test_one():\n    pytest.skip('no widget here')\n"
        "def test_two():\n    pytest.skip('no widget here')\n"),
    "test_browserish.py": (
        "import pytest\n"
        "pytest.skip('Chromium not found at /usr/bin/chromium', allow_module_level=True)\n"
        "def test_never():\n    pass\n"),
}


def run_suite(tmp_path, files, notes=None):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=HERE)
    env.pop("GLUON_TB_SETUP_NOTES", None)
    if notes is not None:
        path = tmp_path / "notes.txt"
        path.write_text("".join(n + "\n" for n in notes))
        env["GLUON_TB_SETUP_NOTES"] = str(path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "skip_summary", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)
    return proc


def test_the_last_lines_name_each_skip_and_failed_set_up_step(tmp_path):
    note = "install_browser.sh: could not install chromium (apt's last lines are above); browser tests will not run"
    proc = run_suite(tmp_path, SUITE, [note])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.rstrip("\n").splitlines()
    assert lines[-5].strip("= ") == "NOT RUN: 3 skipped, 1 set-up step(s) failed", proc.stdout
    assert lines[-4:] == [
        f"set-up failed: {note}",
        "test_browserish.py (the whole file): 1 skipped: Chromium not found at /usr/bin/chromium",
        "test_some.py: 2 skipped: no widget here",
        "The tests named above did not run: a pass does not cover them.",
    ], proc.stdout
    assert "1 passed, 3 skipped" in proc.stdout


def test_nothing_is_added_when_everything_ran(tmp_path):
    proc = run_suite(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"}, notes=[])
    assert proc.returncode == 0 and "NOT RUN" not in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("1 passed")


def test_an_install_script_that_cannot_install_leaves_a_note(tmp_path):
    """install_horovod.sh without cmake and g++ on PATH: exit 0 (the run goes on), one line in the notes."""
    notes = tmp_path / "notes.txt"
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin), "GLUON_TB_SETUP_NOTES": str(notes), "HOME": str(tmp_path)}
    proc = subprocess.run(["/bin/bash", os.path.join(ROOT, "scripts", "install_horovod.sh"), "/bin/false"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = "install_horovod.sh: Horovod builds from source and needs cmake and g++; Horovod tests will not run"
    assert notes.read_text() == line + "\n"
    assert proc.stderr == line + "\n"


def test_test_sh_hands_the_notes_file_to_the_steps_and_to_pytest():
    """The wiring: test.sh exports GLUON_TB_SETUP_NOTES (emptied each run) before the optional steps,
    and the tests' conftest loads the hook that prints it."""
    script = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    export = script.index('export GLUON_TB_SETUP_NOTES="$PWD/.venv/setup-notes.txt"')
    assert script.index(': > "$GLUON_TB_SETUP_NOTES"') > export
    assert export < script.index("install_browser.sh") < script.index("-m pytest")
    assert "from skip_summary import pytest_unconfigure" in open(os.path.join(TESTS, "conftest.py")).read()
