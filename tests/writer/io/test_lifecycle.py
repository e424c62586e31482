"""Process lifecycle: what Python guarantees at shutdown that the writer relies on, and SIGTERM.

A remote log directory is flushed from a ``threading._register_atexit`` hook (see
``_io/lifecycle.py``'s ``_hook_remote``): private, but the only hook that runs before
``concurrent.futures`` stops taking work, which fsspec's async back-ends (s3fs, gcsfs)
need to resolve a host name. ``atexit`` is too late. These tests pin that down, so a
Python that changes it fails here rather than silently losing a run's last part.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import readback

from repo_paths import ROOT  # noqa: E402


def run(code, *args, env=None, timeout=90):
    e = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=e, text=True,
                          capture_output=True, timeout=timeout)


def test_python_runs_threading_atexit_hooks_before_thread_pools_stop_and_atexit_after():
    """What ``_hook_remote`` relies on, stated as Python's behaviour."""
    p = run("""
        import atexit, concurrent.futures.thread, threading  # futures registers its hook first
        pool = concurrent.futures.ThreadPoolExecutor(1)
        pool.submit(int).result()

        def submit(who):
            try:
                pool.submit(int).result()
                print(who, "ok", flush=True)
            except RuntimeError as e:
                print(who, "refused", flush=True)

        atexit.register(submit, "atexit")
        threading._register_atexit(submit, "hook")  # private: the test fails if it goes away
    """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["hook ok", "atexit refused"]


def test_remote_writer_left_open_is_flushed_while_thread_pools_still_work(tmp_path):
    """End to end: an fsspec file system whose writes go through a thread pool (as s3fs's
    host-name lookups do), a writer never closed, the interpreter simply ending."""
    p = run("""
        import concurrent.futures, sys
        from fsspec.implementations.local import LocalFileSystem

        pool = concurrent.futures.ThreadPoolExecutor(1)
        real = LocalFileSystem.pipe_file
        LocalFileSystem.pipe_file = lambda fs, *a, **kw: pool.submit(real, fs, *a, **kw).result()

        from gluon_tb import SummaryWriter
        w = SummaryWriter("local://" + sys.argv[1], flush_secs=3600)
        for i in range(100):
            w.add_scalar("s", float(i), i)
    """, str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "could not" not in p.stderr, p.stderr
    assert readback.scalars(str(tmp_path), ".", "s") == [(i, float(i)) for i in range(100)]


SIGTERM_SELF = """
    import os, signal, sys
    from gluon_tb import SummaryWriter
    w = SummaryWriter(sys.argv[1], flush_secs=3600)
    handler = signal.getsignal(signal.SIGTERM)
    print("default" if handler is signal.SIG_DFL else f"{handler.__module__}.{handler.__name__}", flush=True)
    for i in range(500):
        w.add_scalar("s", float(i), i)
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
"""


def test_sigterm_handler_is_installed_by_default_and_writes_what_is_queued(tmp_path):
    p = run(SIGTERM_SELF, str(tmp_path))
    assert p.returncode == -signal.SIGTERM  # the process still ends the way SIGTERM ends it
    assert p.stdout.split() == ["gluon_tb.writer._io.lifecycle._on_sigterm"]
    assert readback.scalars(str(tmp_path), ".", "s") == [(i, float(i)) for i in range(500)]


@pytest.mark.parametrize("value", ["1", "yes"])
def test_sigterm_handler_opt_out(tmp_path, value):
    p = run(SIGTERM_SELF, str(tmp_path), env={"GLUON_TB_NO_SIGNAL_HANDLER": value})
    assert p.returncode == -signal.SIGTERM
    assert p.stdout.split() == ["default"]  # Python's own, untouched


def test_sigterm_handler_is_not_installed_from_a_thread(tmp_path):
    """signal.signal works only on the main thread: a writer made elsewhere installs nothing."""
    p = run("""
        import signal, sys, threading
        from gluon_tb import SummaryWriter
        t = threading.Thread(target=lambda: SummaryWriter(sys.argv[1]).add_scalar("s", 1.0))
        t.start(); t.join()
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    """, str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True"]
    assert readback.scalars(str(tmp_path), ".", "s") == [(0, 1.0)]


FORK_AND_TERM = """
    import ctypes, os, signal, sys, time
    from gluon_tb import SummaryWriter
    w = SummaryWriter(sys.argv[1])
    w.add_scalar("parent", 1.0, 0)
    w.flush()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a DataLoader worker stuck in C: a pthread mutex locked twice never returns to Python
        print("child", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
        mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
        libc = ctypes.CDLL(None)
        libc.pthread_mutex_lock(mutex)
        os.write(ready_w, b"x")
        libc.pthread_mutex_lock(mutex)
        os._exit(3)
    os.read(ready_r, 1)
    time.sleep(0.1)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() - t0 > 20:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            print("hung")
            break
        time.sleep(0.005)
    else:
        print("died", time.monotonic() - t0 < 5)
    print("parent", signal.getsignal(signal.SIGTERM).__name__)
    w.add_scalar("parent", 2.0, 1)
    w.close()
"""


def test_a_forked_child_blocked_in_c_dies_of_sigterm_at_once(tmp_path):
    """A fork of a process with a writer (a DataLoader worker) gets SIGTERM's default action back.

    Our handler is Python, so it runs only when the main thread returns to Python code; a child
    stuck in C would never die, and the parent's ``Pool.terminate()`` would wait for it forever.
    """
    p = run(FORK_AND_TERM, str(tmp_path), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["child", "True", "died", "True", "parent", "_on_sigterm"]
    assert readback.scalars(str(tmp_path), ".", "parent") == [(0, 1.0), (1, 2.0)]  # the parent's log is whole


def test_a_writer_made_in_a_forked_child_installs_the_handler_again(tmp_path):
    p = run("""
        import os, signal, sys
        from gluon_tb import SummaryWriter
        SummaryWriter(os.path.join(sys.argv[1], "parent")).add_scalar("p", 1.0)
        pid = os.fork()
        if pid == 0:
            before = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            w = SummaryWriter(os.path.join(sys.argv[1], "child"), flush_secs=3600)
            print(before, signal.getsignal(signal.SIGTERM).__name__, flush=True)
            for i in range(300):
                w.add_scalar("c", float(i), i)
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()
        _, status = os.waitpid(pid, 0)
        print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
    """, str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "_on_sigterm", "True"]
    assert readback.scalars(str(tmp_path), "child", "c") == [(i, float(i)) for i in range(300)]


@pytest.mark.parametrize("which", ["parent's", "own"])
def test_a_multiprocessing_child_writes_what_it_logged_when_it_returns(tmp_path, which):
    """multiprocessing ends a child with os._exit after its target returns: no atexit. What the
    child logged in its last flush_secs was lost (20 of 20 points here); its finalizers now write it."""
    p = run("""
        import multiprocessing as mp, os, sys
        from gluon_tb import SummaryWriter
        parent = SummaryWriter(os.path.join(sys.argv[1], "parent"), flush_secs=3600)
        parent.add_scalar("p", 1.0)
        KEEP = []

        def child(which):
            w = parent if which == "parent's" else SummaryWriter(os.path.join(sys.argv[1], "own"), flush_secs=3600)
            KEEP.append(w)
            for i in range(20):
                w.add_scalar("c", float(i), i)

        proc = mp.get_context("fork").Process(target=child, args=(sys.argv[2],))
        proc.start()
        proc.join()
        print(proc.exitcode)
        parent.close()
    """, str(tmp_path), which)
    assert p.returncode == 0 and p.stdout.split() == ["0"], p.stderr
    assert "two writers" not in p.stderr  # a child writing with its parent's writer is no second training
    run_dir = "parent" if which == "parent's" else "own"
    assert readback.scalars(str(tmp_path), run_dir, "c") == [(i, float(i)) for i in range(20)]
    assert readback.scalars(str(tmp_path), "parent", "p") == [(0, 1.0)]


@pytest.mark.parametrize("how", ["multiprocessing", "os.fork"])
def test_a_child_forked_after_its_parent_closed_a_writer_ends_at_once(tmp_path, how):
    """A writer closed (or being closed, by the SIGTERM handler) when the process forks: the child's
    copy waited 30 s at the child's exit for a writer thread it does not have (a DataLoader worker
    forked by a Pool during the parent's SIGTERM, left blocked after its parent died)."""
    p = run("""
        import multiprocessing as mp, os, sys, time
        from gluon_tb import SummaryWriter
        w = SummaryWriter(os.path.join(sys.argv[1], "parent"))
        w.add_scalar("p", 1.0)
        w.close()
        t0 = time.monotonic()
        if sys.argv[2] == "os.fork":
            pid = os.fork()
            if pid == 0:
                sys.exit(0)  # atexit runs
            os.waitpid(pid, 0)
        else:
            proc = mp.get_context("fork").Process(target=int)
            proc.start()
            proc.join()
        print(time.monotonic() - t0 < 10)
    """, str(tmp_path), how, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == ["True"], (p.stdout, p.stderr)
    assert "not finished writing" not in p.stderr
    assert readback.scalars(str(tmp_path), "parent", "p") == [(0, 1.0)]


def test_sigterm_to_the_process_group_leaves_no_pool_worker_behind(tmp_path):
    """systemd stop, Slurm's scancel, ``kill -TERM -PGID``: the Pool's workers die with the process,
    but while our handler wrote the queued events the Pool replaced them, and the replacements
    outlived the process (blocked for ever on the dead workers' queue lock, holding its pipes). The
    handler now ends the process's daemonic multiprocessing children before the process ends."""
    code = textwrap.dedent("""
        import multiprocessing as mp, os, sys, time
        from gluon_tb import SummaryWriter
        w = SummaryWriter(sys.argv[1], flush_secs=3600)
        pool = mp.get_context("fork").Pool(2)
        pool.map(abs, range(4))
        for i in range(150000):  # a backlog: the handler writes for a while
            w.add_scalar("x", float(i), i)
        print("READY", flush=True)
        time.sleep(60)
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(timeout=60) == -signal.SIGTERM
        left = []
        for _ in range(20):  # a replacement blocked on the queue lock never ends; give the others time
            left = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout.split()
            if not left:
                break
            time.sleep(0.1)
        assert left == []
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_parent_opening_its_file_after_its_childs_is_not_warned(tmp_path):
    """The parent's writer opens its event file after a forked child (a multiprocessing worker
    writing with that writer) opened its own there: the parent warned of 'two writers' (CI met it
    by timing, in the test above); a child's file is not another training's either."""
    p = run("""
        import multiprocessing as mp, os, sys
        from gluon_tb import SummaryWriter
        w = SummaryWriter(os.path.join(sys.argv[1], "run"), flush_secs=3600)
        ctx = mp.get_context("fork")
        written, done = ctx.Event(), ctx.Event()

        def child():
            w.add_scalar("child", 1.0, 0)
            w.flush()  # its file is open and written
            written.set()
            done.wait(60)

        proc = ctx.Process(target=child)
        proc.start()
        assert written.wait(60)
        w.add_scalar("parent", 2.0, 0)
        w.flush()  # the parent's first file, beside the live child's
        done.set()
        proc.join()
        w.close()
        print(proc.exitcode)
    """, str(tmp_path))
    assert p.returncode == 0 and p.stdout.split() == ["0"], p.stderr
    assert "two writers" not in p.stderr
    assert readback.scalars(str(tmp_path), "run", "parent") == [(0, 2.0)]
    assert readback.scalars(str(tmp_path), "run", "child") == [(0, 1.0)]
