"""``profile_batch=``'s file in the real Profile dashboard (XProf 2.24) and its trace viewer, in Chromium.

XProf needs numpy >= 1.24 and MXNet 1.9.1 < 1.24, so it lives in a venv of its own, .venv-xprof, which
``scripts/install_xprof.sh`` makes and ``scripts/test.sh`` names in ``GLUON_TB_XPROF_PYTHON`` (its
``tensorboard`` is started with that python). Without it the test is skipped, or fails under
``GLUON_TB_REQUIRE_XPROF=1`` (CI; the ``xprof_python`` fixture in conftest.py).
``GLUON_TB_SCREENSHOTS``: where the screenshot goes.
"""
import contextlib
import glob
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

pytestmark = pytest.mark.browser


def profiled_in_a_new_process(logdir):
    """test_profile's fit with ``profile_batch=(2, 3)``, as a process's first profile: MXNet names a
    process's lines ("cpu/0", "operator") only in its first dump, so after another test's profile in
    this process the viewer would show "pid 0 / tid ..." lines instead."""
    script = ("import sys; sys.path.insert(0, sys.argv[1])\nimport test_profile as t\n"
              "t.profiled(sys.argv[2], (2, 3))\n")
    env = dict(os.environ)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    subprocess.run([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__)), str(logdir)],
                   env=env, check=True, timeout=120, capture_output=True)
    return glob.glob(os.path.join(str(logdir), "train_batch", "plugins", "profile", "*", "*.xplane.pb"))


@contextlib.contextmanager
def xprof_tensorboard(python, logdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([python, "-m", "tensorboard.main", "--logdir", str(logdir), "--host",
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


def test_trace_viewer_draws_mxnet_operators(tmp_path, xprof_python):
    from playwright.sync_api import sync_playwright

    from test_browser import CHROMIUM, CHROMIUM_ARGS

    files = profiled_in_a_new_process(tmp_path)
    assert len(files) == 1
    session = os.path.basename(os.path.dirname(files[0]))
    shots = os.environ.get("GLUON_TB_SCREENSHOTS") or str(tmp_path)
    with xprof_tensorboard(xprof_python, tmp_path) as (base, runs), sync_playwright() as p:
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
                    page.wait_for_timeout(500)
                raise AssertionError(f"no frame shows {text!r}")

            tools = frame_with("Overview Page")
            tools.locator("text=Overview Page").first.click()
            tools.locator("mat-option", has_text="Trace Viewer").first.click()
            # page.frames asks the browser nothing: only a Playwright call (wait_for_timeout, not
            # time.sleep) takes in the frames it has attached since, else they come ~30 s late
            for _ in range(60):
                viewer = [f for f in page.frames if "trace_viewer_index" in f.url]
                if viewer and viewer[0].locator("text=cpu/0 / tid").count():
                    break
                page.wait_for_timeout(500)
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
