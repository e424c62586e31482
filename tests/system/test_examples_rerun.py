"""The examples as a user runs them twice: the second run replaces the first one's logs
(one set of steps, read back with TensorBoard's reader, not ``epoch_loss`` at steps 0, 1, 0, 1), and
the command they print to open TensorBoard exists (the venv's ``bin`` is not on ``PATH``)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import readback

from repo_paths import ROOT  # noqa: E402


def run_example(name, cwd, *args, check=True):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args], cwd=str(cwd),
                          env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def event_files(logdir):
    return sorted(os.path.relpath(os.path.join(r, f), logdir) for r, _, fs in os.walk(logdir)
                  for f in fs if f.startswith("events.out.tfevents."))


def test_estimator_example_twice_has_one_set_of_steps(tmp_path):
    first = run_example("estimator_digits.py", tmp_path, "--logdir", "logs/run", "--epochs", "2")
    assert "replacing" not in first.stdout
    second = run_example("estimator_digits.py", tmp_path, "--logdir", "logs/run", "--epochs", "2")
    assert "replacing the previous run's logs in logs/run" in second.stdout
    logdir = str(tmp_path / "logs" / "run")
    for run in ("train", "validation"):
        assert [s for s, _ in readback.scalars(logdir, run, "epoch_loss")] == [0, 1]
    assert [s for s, _ in readback.scalars(logdir, "train_batch", "batch_loss")] == list(range(46))  # 23 a epoch
    # one event file a run: the first run's are gone, not hidden
    assert [os.path.dirname(f) for f in event_files(logdir)] == ["train", "train_batch", "validation"]


def test_module_example_twice_has_one_set_of_steps(tmp_path):
    for _ in range(2):
        run_example("module_digits.py", tmp_path, "--logdir", "logs/module", "--epochs", "1")
    logdir = str(tmp_path / "logs" / "module")
    assert [s for s, _ in readback.scalars(logdir, "validation", "epoch_accuracy")] == [0]
    assert [s for s, _ in readback.scalars(logdir, "train_batch", "batch_accuracy")] == list(range(23))
    assert [os.path.dirname(f) for f in event_files(logdir)] == ["train", "train_batch", "validation"]


def test_printed_tensorboard_command_works(tmp_path):
    out = run_example("module_digits.py", tmp_path, "--logdir", "logs/m", "--epochs", "1").stdout
    m = re.search(r"^View them with:\n    (\S+) --logdir logs/m$", out, re.M)
    assert m, out
    exe = m.group(1)
    assert exe != "tensorboard"  # the bare name is not on PATH after the set-up commands
    proc = subprocess.run([exe, "--version_tb"], cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\S*\n", proc.stdout), proc.stdout + proc.stderr


def test_a_logdir_with_other_files_is_never_deleted(tmp_path):
    logdir = tmp_path / "mine"
    logdir.mkdir()
    (logdir / "events.out.tfevents.1.host.1.0").write_bytes(b"")
    (logdir / "notes.txt").write_text("keep me")
    proc = run_example("estimator_digits.py", tmp_path, "--logdir", "mine", "--epochs", "1", check=False)
    assert proc.returncode == 1
    assert f"mine holds {os.path.join('mine', 'notes.txt')}, which is not a TensorBoard log file" in proc.stderr
    assert (logdir / "notes.txt").read_text() == "keep me"
    assert sorted(os.listdir(logdir)) == ["events.out.tfevents.1.host.1.0", "notes.txt"]
