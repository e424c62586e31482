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
        assert runs == [f"train_batch/{session}"]
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
            assert "/host:CPU" in text and "operator / tid" in text
            assert "Training steps" in text  # the profiled batches' step events, on a line of their own
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


FITS = {  # each in a process of its own; prints its XSpace file's path
    # 12 batches of a loader that sleeps 1 ms a sample (16 ms a batch), steps 2..9
    "estimator": "import test_profile as t\nprint(t.profiled_slow(sys.argv[2], (2, 9), 0.001, n=192, epochs=1))\n",
    # 4 batches an epoch, steps 1..5 over an epoch's end
    "module": ("import test_module_profile as t\nfrom gluon_tb.handlers import TensorBoardCallback\n"
               "t.fit(TensorBoardCallback(sys.argv[2], profile_batch=(1, 5)))\nprint(t.profile_files(sys.argv[2])[0])\n"),
}


def summary_ms(text, title):
    """``(value, sigma)`` in ms of one item of the Overview page's Performance Summary."""
    import re

    m = re.search(re.escape(title) + r"\s*\(σ = ([\d.]+) ms\)\s*([\d.]+) ms", text)
    assert m, f"no {title!r} in the Overview page: {text[:2000]!r}"
    return float(m.group(2)), float(m.group(1))


@pytest.mark.parametrize("adapter", ["estimator", "module"])
def test_overview_page_shows_the_step_times(tmp_path, xprof_python, adapter):
    """The Overview page in Chromium: its Performance Summary shows the profiled steps' average
    input time and host compute time (before step markers: 0.0 ms each), as XProf's own converter
    computes them, adding up to the steps' mean time in our file; the Input Pipeline Analysis page
    shows their average step time. (XProf shows "Average Step Time" and the step-time graph of
    the Overview page for XLA training programs only, and draws its graphs with Google Charts,
    loaded from the web.) Screenshots of both pages for the Estimator fit."""
    from playwright.sync_api import sync_playwright

    from test_browser import CHROMIUM, CHROMIUM_ARGS
    from test_profile import decode_steps, steps_of, xprof_steps

    env = dict(os.environ)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    script = "import sys; sys.path.insert(0, sys.argv[1])\n" + FITS[adapter]
    out = subprocess.run([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__)), str(tmp_path)],
                         env=env, check=True, timeout=180, capture_output=True, text=True).stdout
    path = out.strip().splitlines()[-1]
    rows, ov = xprof_steps(xprof_python, path)
    mine = steps_of(decode_steps(open(path, "rb").read()))
    shown = [int(r["stepnum"].split()[1]) for r in rows]  # of more than 5, XProf leaves out the first and last
    assert shown == (list(range(3, 9)) if adapter == "estimator" else [1, 2, 3, 4, 5])
    mean_ms = sum(mine[k][1] for k in shown) / len(shown) / 1e9
    shots = os.environ.get("GLUON_TB_SCREENSHOTS") or str(tmp_path)
    with xprof_tensorboard(xprof_python, tmp_path) as (base, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(base + "/#profile", timeout=30_000)
            for _ in range(120):
                summary = [f for f in page.frames if "overview_page" in f.url and f.locator("text=Host Compute Time").count()]
                if summary:
                    break
                page.wait_for_timeout(500)
            else:
                raise AssertionError("the Overview page drew no Performance Summary")
            text = summary[0].evaluate("document.body.innerText")
            input_ms, _ = summary_ms(text, "Input Time")
            compute_ms, _ = summary_ms(text, "Host Compute Time")
            assert (input_ms, compute_ms) == (float(ov["infeed_time_ms_avg"]), float(ov["host_compute_time_ms_avg"]))
            assert compute_ms > 0 and input_ms + compute_ms == pytest.approx(mean_ms, abs=0.11)
            if adapter == "estimator":
                assert input_ms > 0.9 * 16 * 6 / 8  # 6 of the 8 steps wait for a 16 ms batch; shown: 5 of 6
                page.screenshot(path=os.path.join(shots, "profile_overview.png"))
            else:
                assert input_ms == 0  # Module.fit has no batch_begin: its steps have no input part
            summary[0].locator("text=Overview Page").first.click()
            summary[0].locator("mat-option", has_text="Input Pipeline Analysis").first.click()
            for _ in range(120):
                ipa = [f for f in page.frames if "input_pipeline" in f.url and f.locator("text=Average:").count()]
                if ipa:
                    break
                page.wait_for_timeout(500)
            else:
                raise AssertionError("the Input Pipeline Analysis page drew no step-time statistics")
            text = ipa[0].evaluate("document.body.innerText")
            assert f"Average: {ov['steptime_ms_average']} ms" in text and float(ov["steptime_ms_average"]) > 0
            assert float(ov["steptime_ms_average"]) == pytest.approx(mean_ms, abs=0.051)
            if adapter == "estimator":
                assert "input-bound" in text
                page.screenshot(path=os.path.join(shots, "profile_input_pipeline.png"))
        finally:
            browser.close()
