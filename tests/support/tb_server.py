"""A real ``tensorboard`` on 127.0.0.1 for tests: started, asked, always stopped."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any, Iterator, Optional, Sequence


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TensorBoard:
    def __init__(self, port: int, stderr_path: Optional[str] = None) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self._stderr_path = stderr_path

    def get(self, path: str, **params: Any) -> Any:
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            ctype = r.headers.get("Content-Type", "")
        return json.loads(body) if "json" in ctype else body

    def stderr(self) -> str:
        """What TensorBoard (and its data server) wrote to stderr so far."""
        with open(self._stderr_path, errors="replace") as f:  # type: ignore[arg-type]
            return f.read()


@contextlib.contextmanager
def tensorboard(logdir: str, timeout: float = 90.0, load_fast: str = "false",
                extra: Sequence[str] = ()) -> Iterator[TensorBoard]:
    """``load_fast="true"`` serves through the Rust data server (TensorBoard's default
    where it is installed); ``extra`` are more command-line flags.

    The port is chosen free, then handed to TensorBoard; another process may take it in
    between, so a start that fails to bind is tried again on a new port (3 times)."""
    for attempt in range(3):
        try:
            with _tensorboard_on(_free_port(), logdir, timeout, load_fast, extra) as tb:
                yield tb
            return
        except _PortTaken:
            if attempt == 2:
                raise


class _PortTaken(RuntimeError):
    """TensorBoard exited because its port was taken before it could bind it."""


@contextlib.contextmanager
def _tensorboard_on(port: int, logdir: str, timeout: float, load_fast: str,
                    extra: Sequence[str]) -> Iterator[TensorBoard]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    err = tempfile.NamedTemporaryFile(prefix="tensorboard_stderr_", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
         "--port", str(port), "--load_fast", load_fast, "--reload_interval", "1", *extra],
        stdout=subprocess.DEVNULL, stderr=err, env=env)  # a file: a pipe nobody reads fills up
    tb = TensorBoard(port, err.name)
    try:
        deadline = time.time() + timeout
        last: Optional[BaseException] = None
        while time.time() < deadline:
            if proc.poll() is not None:
                out = tb.stderr()
                if "could not bind to port" in out:
                    raise _PortTaken(out[-500:])
                raise RuntimeError("tensorboard exited: " + out[-2000:])
            try:
                if tb.get("/data/runs"):  # loaded: a run is there
                    break
            except OSError as e:
                last = e
            time.sleep(0.5)
        else:
            raise TimeoutError(f"tensorboard did not answer in {timeout}s: {last}")
        yield tb
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        err.close()
        os.unlink(err.name)


def served_scalars(logdir: str, keys: Sequence[tuple], want_steps: Sequence[Sequence[int]],
                   load_fast: str = "true", timeout: float = 60.0) -> dict:
    """``{(run, tag): [(step, value)]}`` as a live TensorBoard serves them, once their steps are
    ``want_steps`` (polled: the loader reloads every second) or ``timeout`` passed."""
    with tensorboard(logdir, load_fast=load_fast) as tb:
        deadline = time.time() + timeout
        while True:
            tags = tb.get("/data/plugin/scalars/tags")
            got = {k: [(p[1], p[2]) for p in tb.get("/data/plugin/scalars/scalars", run=k[0], tag=k[1])]
                   for k in keys if k[1] in tags.get(k[0], {})}
            if [[s for s, _ in got.get(k, [])] for k in keys] == [list(s) for s in want_steps] \
                    or time.time() > deadline:
                return got
            time.sleep(1)
