"""Case 1: MXNet 1.9.1's own Estimator tests, each ``fit`` with gluon_tb's handler and the recorder added.

Usage: python case_mxnet_estimator_tests.py <mxnet git dir, e.g. /work/.mirror/apache+mxnet/repo> [rev=1.9.1]

The test files are extracted from the snapshot to /tmp/tp/third_party/src/mxnet and imported from
there (``nose`` and their ``common`` helper are stubbed: only ``TemporaryDirectory`` is used, under
/tmp/tp). Every ``Estimator.fit`` the tests make gets ``TensorBoardHandler(<fresh logdir>)`` and the
recorder appended to its ``event_handlers``; after each fit, the logdir is compared with the record.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _inject  # noqa: E402

TESTS = {
    "test_gluon_event_handler": ["test_checkpoint_handler", "test_resume_checkpoint", "test_early_stopping",
                                 "test_logging", "test_custom_handler", "test_logging_interval",
                                 "test_validation_handler_batch_axis", "test_validation_handler"],
    "test_gluon_estimator": ["test_fit", "test_validation", "test_metric", "test_loss", "test_default_handlers",
                             "test_val_handlers"],
    "test_gluon_batch_processor": ["test_batch_processor_fit", "test_batch_processor_validation"],
}


def main(git_dir: str, rev: str = "1.9.1") -> int:
    src = _inject.fresh_dir("src", "mxnet")
    files = [f"tests/python/unittest/{m}.py" for m in TESTS]
    _inject.extract(git_dir, rev, files, src)
    _inject.stub_nose()
    common = types.ModuleType("common")

    @contextlib.contextmanager
    def TemporaryDirectory():  # noqa: N802 - the name the tests import
        base = _inject.fresh_dir("tmpdirs") if not os.path.isdir(os.path.join(_inject.SCRATCH, "tmpdirs")) else \
            os.path.join(_inject.SCRATCH, "tmpdirs")
        with tempfile.TemporaryDirectory(dir=base) as d:
            yield d

    common.TemporaryDirectory = TemporaryDirectory
    sys.modules["common"] = common
    sys.path.insert(0, os.path.join(src, "tests/python/unittest"))
    import mxnet as mx
    mx.random.seed(0)
    inj = _inject.Injector("mxnet-1.9.1-tests")
    problems = []
    for mod_name, fns in TESTS.items():
        mod = importlib.import_module(mod_name)
        for fn in fns:
            with inj.active(f"{mod_name}.{fn}"):
                _inject.run_guarded(f"{mod_name}.{fn}", getattr(mod, fn), problems)
    fails = 0
    for r in inj.reports:
        fails += r.print()
    for p in problems:
        print("\nTEST RAISED (with gluon_tb added):", p)
    print(f"\n{len(inj.reports)} fits compared, {fails} FAIL rows, {len(problems)} tests raised")
    return 1 if fails or problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
