"""Shared pieces of the runners: extracting a snapshot's files to /tmp/tp, injecting gluon_tb's
handler and the recorder into every ``Estimator.fit`` of third-party code, and the report."""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import traceback
import types
from typing import Any, Callable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import recorder  # noqa: E402

SCRATCH = os.environ.get("TP_SCRATCH", "/tmp/tp/third_party")


def fresh_dir(*parts: str) -> str:
    path = os.path.join(SCRATCH, *parts)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def extract(git_dir: str, rev: str, paths: List[str], dest: str) -> str:
    """``git show rev:path`` of each path (files) into dest, keeping the relative paths. Read only."""
    for p in paths:
        out = os.path.join(dest, p)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        data = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{rev}:{p}"], check=True,
                              capture_output=True).stdout
        with open(out, "wb") as f:
            f.write(data)
    return dest


def extract_tree(git_dir: str, rev: str, prefix: str, dest: str) -> str:
    names = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", rev, prefix],
                           check=True, capture_output=True, text=True).stdout.split()
    return extract(git_dir, rev, names, dest)


def stub_nose() -> None:
    """MXNet 1.9.1's tests import ``nose.tools.assert_raises`` (nose is not installed)."""
    if "nose.tools" in sys.modules:
        return
    import unittest

    nose = types.ModuleType("nose")
    tools = types.ModuleType("nose.tools")
    tc = unittest.TestCase()

    def assert_raises(exc, *args, **kwargs):
        return tc.assertRaises(exc, *args, **kwargs)

    tools.assert_raises = assert_raises
    tools.make_decorator = lambda f: (lambda g: g)
    nose.tools = tools
    sys.modules["nose"], sys.modules["nose.tools"] = nose, tools


class Injector:
    """While active, every ``Estimator.fit`` gets ``TensorBoardHandler(<fresh dir>)`` and the recorder
    appended to its ``event_handlers`` (the one line a user would add), and is compared afterwards."""

    def __init__(self, case: str, tb_kwargs: Optional[dict] = None, compare_kwargs: Optional[dict] = None) -> None:
        self.case = case
        self.tb_kwargs = tb_kwargs or {}
        self.compare_kwargs = compare_kwargs or {}
        self.reports: List[recorder.Report] = []
        self.n = 0
        self.label = ""

    @contextlib.contextmanager
    def active(self, label: str):
        from mxnet.gluon.contrib.estimator import Estimator
        from gluon_tb.handlers import TensorBoardHandler

        self.label = label
        orig = Estimator.fit
        inj = self

        @functools.wraps(orig)
        def fit(est, *args, **kwargs):
            inj.n += 1
            name = f"{inj.label}.fit{inj.n}"
            logdir = fresh_dir(inj.case, name)
            rec = recorder.EstimatorRecorder()
            handlers = kwargs.get("event_handlers")
            handlers = list(handlers) if isinstance(handlers, (list, tuple)) else ([] if handlers is None else [handlers])
            kwargs["event_handlers"] = handlers + [TensorBoardHandler(logdir, **inj.tb_kwargs)] + rec.handlers()
            try:
                return orig(est, *args, **kwargs)
            finally:
                if rec.rec.epoch_batches:  # it trained: compare (also after an expected exception)
                    has_val = kwargs.get("val_data") is not None or (len(args) > 1 and args[1] is not None)
                    try:
                        inj.reports.append(recorder.compare(f"{inj.case} / {name}", logdir, rec.rec,
                                                            expect_val=has_val, **inj.compare_kwargs))
                    except Exception:  # noqa: BLE001
                        r = recorder.Report(f"{inj.case} / {name}")
                        r.add("FAIL", "*", "comparison raised: " + traceback.format_exc(limit=3))
                        inj.reports.append(r)

        Estimator.fit = fit
        try:
            yield self
        finally:
            Estimator.fit = orig


def run_guarded(label: str, fn: Callable[[], Any], problems: List[str]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001
        problems.append(f"{label} raised:\n{traceback.format_exc(limit=6)}")
