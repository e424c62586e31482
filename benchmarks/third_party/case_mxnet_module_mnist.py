"""Case 2: MXNet 1.9.1's example/image-classification/train_mnist.py (Module.fit through common/fit.py),
offline, with gluon_tb's ``TensorBoardCallback`` added.

Usage: python case_mxnet_module_mnist.py <mxnet git dir> [rev=1.9.1]

The example directory is extracted to /tmp/tp/third_party/src/mxnet-example and the script runs
unchanged (``runpy``, as ``__main__``) in a fresh working directory where small generated MNIST-format
files (``data/*-ubyte.gz``, 640 training and 192 test images of 10 synthetic classes) already exist, so
its ``download_file`` does not download. Its arguments: the MLP, 3 epochs of 10 batches, batch size 64,
SGD with momentum, a ``MultiFactorScheduler`` (``--lr-step-epochs 1,2 --lr-factor 0.5``), metrics accuracy,
top-3 accuracy and cross-entropy, MXNet's ``Speedometer`` (auto_reset) every 3 batches, checkpoints.
``common/fit.py`` does not pass callbacks through, so the one line is a wrapper of ``Module.fit``
that adds ``**cb.fit_callbacks(...)`` (with the script's own callbacks and the recorder's after ours).
"""
from __future__ import annotations

import functools
import gzip
import os
import runpy
import struct
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _inject  # noqa: E402
import recorder  # noqa: E402


def write_mnist(path_dir: str, n: int, seed: int, prefix: str) -> None:
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=n).astype(np.int8)
    protos = np.random.RandomState(123).rand(10, 28, 28)
    imgs = np.clip(protos[labels] * 200 + rng.rand(n, 28, 28) * 80, 0, 255).astype(np.uint8)
    with gzip.open(os.path.join(path_dir, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labels.tobytes())
    with gzip.open(os.path.join(path_dir, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + imgs.tobytes())


def _as_list(v):
    return [] if v is None else (list(v) if isinstance(v, (list, tuple)) else [v])


def main(git_dir: str, rev: str = "1.9.1") -> int:
    import mxnet as mx
    from gluon_tb.handlers import TensorBoardCallback

    src = _inject.fresh_dir("src", "mxnet-example")
    _inject.extract_tree(git_dir, rev, "example/image-classification/common", src)
    _inject.extract_tree(git_dir, rev, "example/image-classification/symbols", src)
    _inject.extract(git_dir, rev, ["example/image-classification/train_mnist.py"], src)
    ex = os.path.join(src, "example/image-classification")
    work = _inject.fresh_dir("module-mnist-work")
    os.makedirs(os.path.join(work, "data"))
    write_mnist(os.path.join(work, "data"), 640, 1, "train")
    write_mnist(os.path.join(work, "data"), 192, 2, "t10k")
    logdir = _inject.fresh_dir("module-mnist-logs")
    rec = recorder.ModuleRecorder()
    cb = TensorBoardCallback(logdir)

    orig = mx.module.BaseModule.fit

    @functools.wraps(orig)
    def fit(mod, train_data, eval_data=None, **kw):
        kw.update(cb.fit_callbacks(  # the one line: every slot, the script's callbacks and the recorder's after ours
            batch_end_callback=_as_list(kw.pop("batch_end_callback", None)) + [rec.batch_end],
            epoch_end_callback=_as_list(kw.pop("epoch_end_callback", None)) + [rec.epoch_end],
            eval_end_callback=_as_list(kw.pop("eval_end_callback", None)) + [rec.eval_end]))
        return orig(mod, train_data, eval_data, **kw)

    mx.module.BaseModule.fit = fit
    argv = ["train_mnist.py", "--network", "mlp", "--num-examples", "640", "--batch-size", "64",
            "--num-epochs", "3", "--lr", "0.05", "--lr-step-epochs", "1,2", "--lr-factor", "0.5",
            "--disp-batches", "3", "--top-k", "3", "--loss", "ce",
            "--model-prefix", os.path.join(work, "mlp")]
    old_argv, old_cwd, old_path = sys.argv, os.getcwd(), list(sys.path)
    problems = []
    mx.random.seed(2)
    np.random.seed(2)
    try:
        sys.argv = argv
        os.chdir(work)
        sys.path.insert(0, ex)
        runpy.run_path(os.path.join(ex, "train_mnist.py"), run_name="__main__")
    except Exception:  # noqa: BLE001
        problems.append(traceback.format_exc(limit=6))
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        sys.path[:] = old_path
        mx.module.BaseModule.fit = orig
        cb.close()
    rep = recorder.compare("mxnet-1.9.1 example/image-classification/train_mnist.py (Module.fit)", logdir, rec.rec)
    fails = rep.print()
    for p in problems:
        print("\nSCRIPT RAISED (with gluon_tb added):", p)
    print(f"\n1 fit compared, {fails} FAIL rows, {len(problems)} scripts raised")
    return 1 if fails or problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
