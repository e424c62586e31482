"""``profile_batch=``'s file in the real Profile dashboard (XProf 2.24) and its trace viewer, in Chromium.

XProf needs numpy >= 1.24 and MXNet 1.9.1 < 1.24, so it lives in a venv of its own; this test runs
when ``GLUON_TB_XPROF_PYTHON`` names that venv's python (its ``tensorboard`` is started with it), e.g.
``python3.11 -m venv /tmp/xprof && /tmp/xprof/bin/pip install tensorboard
"tensorboard-plugin-profile==2.24.*"``. ``GLUON_TB_SCREENSHOTS``: where the screenshot goes.
"""
import contextlib
import gzip
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

from test_profile import XPROF_PYTHON, profiled, profiler_calls  # noqa: F401 - a fixture

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not XPROF_PYTHON, reason="GLUON_TB_XPROF_PYTHON (a venv with xprof) not set")]


@contextlib.contextmanager
def xprof_tensorboard(logdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([XPROF_PYTHON, "-m", "tensorboard.main", "--logdir", str(logdir), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/data/plugin/profile/runs", timeout=10) as r:
                    runs = r.read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    err.seek(0)
                    raise RuntimeError("xprof tensorboard did not start: " + err.read()[-2000:].decode())
                time.sleep(0.5)
        yield base, runs
    finally:
        proc.terminate()
        proc.wait(10)
        err.close()


def test_trace_viewer_draws_mxnet_operators(tmp_path, profiler_calls):
    from playwright.sync_api import sync_playwright

    from test_browser import CHROMIUM, CHROMIUM_ARGS

    _, files = profiled(tmp_path, (2, 3))
    session = os.path.basename(os.path.dirname(files[0]))
    shots = os.environ.get("GLUON_TB_SCREENSHOTS") or str(tmp_path)
    with xprof_tensorboard(tmp_path) as (base, runs), sync_playwright() as p:
        runs = json.loads(gzip.decompress(runs) if runs[:2] == b"\x1f\x8b" else runs)  # gzip, unasked
        assert runs == [f"train/{session}"]
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(base + "/#profile", timeout=30_000)

            def frame_with(text):
                for _ in range(60):
                    for f in page.frames:
                        if f.locator(f"text={text}").count():
                            return f
                    time.sleep(0.5)
                raise AssertionError(f"no frame shows {text!r}")

            tools = frame_with("Overview Page")
            tools.locator("text=Overview Page").first.click()
            tools.locator("mat-option", has_text="Trace Viewer").first.click()
            for _ in range(60):
                viewer = [f for f in page.frames if "trace_viewer_index" in f.url]
                if viewer and viewer[0].locator("text=cpu/0 / tid").count():
                    break
                time.sleep(0.5)
            else:
                raise AssertionError("the trace viewer drew no cpu/0 line")
            viewer = viewer[0]
            text = viewer.evaluate("document.body.innerText")
            assert "/host:CPU" in text and "operator / tid" in text and "MXNET_C_API / tid" in text
            find = viewer.locator("input").first
            find.fill("FullyConnected")
            find.press("Enter")
            # 2 Dense layers x 2 batches, forward and backward, on the cpu/0 and operator lines
            viewer.locator("text=of 16").wait_for(timeout=20_000)
            viewer.locator("text=→").first.click()
            viewer.locator("text=Nothing selected").wait_for(state="detached", timeout=20_000)
            assert "FullyConnected" in viewer.evaluate("document.body.innerText")
            page.screenshot(path=os.path.join(shots, "profile.png"))
        finally:
            browser.close()
