"""The package as a type checker sees it: ``python -m mypy`` from the repository root (its settings,
files included, are ``[tool.mypy]`` in pyproject.toml) finds no error."""
from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_mypy_finds_no_error() -> None:
    # no cache: the run takes a few seconds, and writes nothing into the tree. mypy is in the
    # test extras; where it is missing, this fails with "No module named mypy"
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", "/dev/null"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mypy exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
