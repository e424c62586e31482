"""A real ``tensorboard`` on 127.0.0.1 for tests: started, asked, always stopped."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from typing import Any, Iterator, Optional


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TensorBoard:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params: Any) -> Any:
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            ctype = r.headers.get("Content-Type", "")
        return json.loads(body) if "json" in ctype else body


@contextlib.contextmanager
def tensorboard(logdir: str, timeout: float = 90.0) -> Iterator[TensorBoard]:
    port = _free_port()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
         "--port", str(port), "--load_fast", "false", "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    tb = TensorBoard(port)
    try:
        deadline = time.time() + timeout
        last: Optional[BaseException] = None
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("tensorboard exited: " + proc.stderr.read().decode()[-2000:])
            try:
                if tb.get("/data/runs"):
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
