"""Run a local MXNet parameter-server cluster (1 scheduler, 1 server, N workers) on 127.0.0.1.

Usage (e.g. from pytest)::

    results = run_cluster([sys.executable, "worker_demo.py"], num_workers=2, timeout=120)
    for r in results:
        assert r.returncode == 0, r.stderr

Every process runs in its own session/process group; all groups are killed on timeout, on any
exception, and (after a short grace period) if scheduler/server do not exit on their own.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO, Mapping, Optional, Sequence

__all__ = ["ClusterError", "run_cluster", "free_port"]


class ClusterError(RuntimeError):
    """Raised on timeout or worker failure; the message includes each process's stderr tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_group(proc: subprocess.Popen) -> None:
    # pgid == pid (start_new_session=True); also reaches children left behind by the leader
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _read(f: IO[bytes]) -> str:
    f.flush()
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def _tail(text: str, n: int = 2000) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def run_cluster(
    worker_argv: Sequence[str],
    *,
    num_workers: int = 2,
    num_servers: int = 1,
    timeout: float = 120.0,
    grace: float = 10.0,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    python: str = sys.executable,
    check: bool = True,
) -> list[subprocess.CompletedProcess[str]]:
    """Start scheduler + servers + workers, wait for workers, return one result per worker.

    ``worker_argv`` is the full worker command line (e.g. ``[sys.executable, "w.py"]``); workers
    learn their rank from ``kv.rank`` (assigned by the scheduler, not by start order). Results are
    in start order. With ``check=True`` a non-zero worker exit raises :class:`ClusterError`.
    """
    port = free_port()
    base = dict(os.environ)
    base.update(env or {})
    base.update({
        "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NUM_SERVER": str(num_servers), "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NODE_HOST": "127.0.0.1", "DMLC_INTERFACE": "lo",
    })
    roles = ["scheduler"] + ["server"] * num_servers + ["worker"] * num_workers
    procs: list[tuple[str, subprocess.Popen, IO[bytes], IO[bytes]]] = []
    with tempfile.TemporaryDirectory(prefix="pscluster-") as tmp:

        def report(header: str) -> str:
            parts = [f"{header} (port {port})"]
            for i, (role, p, _out, err) in enumerate(procs):
                parts.append(f"--- [{i}] {role} pid={p.pid} rc={p.returncode} stderr tail:\n"
                             f"{_tail(_read(err))}")
            return "\n".join(parts)

        try:
            for i, role in enumerate(roles):
                argv = list(worker_argv) if role == "worker" else [python, "-c", "import mxnet"]
                out = open(os.path.join(tmp, f"{i}-{role}.out"), "w+b")
                err = open(os.path.join(tmp, f"{i}-{role}.err"), "w+b")
                p = subprocess.Popen(argv, env={**base, "DMLC_ROLE": role}, cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                     start_new_session=True)
                procs.append((role, p, out, err))
            deadline = time.monotonic() + timeout
            workers = [t for t in procs if t[0] == "worker"]
            for _role, p, _o, _e in workers:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise ClusterError(report(f"cluster timed out after {timeout:.0f}s")) from None
            # Scheduler/server normally exit on their own once all workers finalized.
            grace_end = time.monotonic() + grace
            for role, p, _o, _e in procs:
                if role != "worker":
                    try:
                        p.wait(timeout=max(0.0, grace_end - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        _kill_group(p)
            results = [subprocess.CompletedProcess(p.args, p.returncode, _read(o), _read(e))
                       for _r, p, o, e in workers]
            if check and any(r.returncode != 0 for r in results):
                raise ClusterError(report("worker(s) failed"))
            return results
        finally:
            for _role, p, out, err in procs:
                _kill_group(p)  # no-op for processes that already exited (group kill for children)
                out.close()
                err.close()
