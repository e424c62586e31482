"""The starter thread (``_common/threads.py``'s ``start_batch_thread``): a writer's worker is started
without the caller waiting for it to run, born under ``SCHED_BATCH``; a thread that cannot be started
is reported, and nothing waits for it forever."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import readback
from repo_paths import ROOT

from gluon_tb import SummaryWriter
from gluon_tb.writer._common import threads

linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")


def test_started_thread_runs_and_launched_is_set():
    ran = threading.Event()
    t = threading.Thread(target=ran.set, daemon=True)
    launched = threading.Event()
    errors: list = []
    threads.start_batch_thread(t, launched, errors.append)
    assert launched.wait(10) and ran.wait(10)
    t.join(10)
    assert not t.is_alive() and errors == []


@linux_only
def test_threads_are_born_under_sched_batch_and_the_caller_keeps_its_policy():
    seen: list = []
    t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)), daemon=True)
    launched = threading.Event()
    threads.start_batch_thread(t, launched, lambda e: None)
    assert launched.wait(10)
    t.join(10)
    assert seen == [os.SCHED_BATCH]  # its very first instruction of Python already under it
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_thread_that_cannot_start_is_reported_and_launched_is_set(monkeypatch):
    class Broken(threading.Thread):
        def start(self):
            raise RuntimeError("can't start new thread")

    launched = threading.Event()
    errors: list = []
    threads.start_batch_thread(Broken(target=int, daemon=True), launched, errors.append)
    assert launched.wait(10)
    assert [str(e) for e in errors] == ["can't start new thread"]
    # the starter goes on for the next one
    ok = threading.Event()
    t = threading.Thread(target=ok.set, daemon=True)
    threads.start_batch_thread(t, threading.Event(), errors.append)
    assert ok.wait(10) and len(errors) == 1


def test_a_writer_whose_worker_cannot_start_says_so_and_close_does_not_hang(tmp_path, monkeypatch):
    real = threading.Thread.start

    def start(self):
        if self.name == "gluon_tb-writer":
            raise RuntimeError("can't start new thread")
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    w = SummaryWriter(tmp_path / "run")
    deadline = time.monotonic() + 10
    while w._p.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not w._p.running
    with pytest.raises(RuntimeError, match="can't start new thread"):
        w.add_scalar("x", 1.0, 0)
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 5
    monkeypatch.setattr(threading.Thread, "start", real)
    w2 = SummaryWriter(tmp_path / "run2")  # the next writer starts as usual
    w2.add_scalar("x", 2.0, 3)
    w2.close()
    assert readback.scalars(str(tmp_path / "run2"), ".", "x") == [(3, 2.0)]


def test_values_logged_before_the_worker_ran_are_all_written(tmp_path):
    """SummaryWriter() returns before its worker runs: what is logged meanwhile, a flush and a
    close all wait for it."""
    for i in range(20):
        w = SummaryWriter(tmp_path / f"r{i}")
        w.add_scalar("x", float(i), i)
        if i % 2:
            w.flush()
        w.close()
    for i in range(20):
        assert readback.scalars(str(tmp_path / f"r{i}"), ".", "x") == [(i, float(i))]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_gets_a_starter_of_its_own(tmp_path):
    code = textwrap.dedent("""
        import os, sys, threading
        from gluon_tb import SummaryWriter
        SummaryWriter(sys.argv[1] + "/parent").close()  # the parent's starter exists
        pid = os.fork()
        if pid == 0:
            w = SummaryWriter(sys.argv[1] + "/child")
            w.add_scalar("x", 5.0, 1)
            w.close()
            names = sorted(t.name for t in threading.enumerate() if t.name == "gluon_tb-starter")
            print("CHILD", names, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("STATUS", status)
    """)
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=dict(os.environ, PYTHONPATH=ROOT),
                       text=True, capture_output=True, timeout=90)
    assert "CHILD ['gluon_tb-starter']" in p.stdout and "STATUS 0" in p.stdout, p.stdout + p.stderr
    assert readback.scalars(str(tmp_path / "child"), ".", "x") == [(1, 5.0)]
