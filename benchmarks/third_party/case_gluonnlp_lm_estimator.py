"""Case 3: gluon-nlp's word language model Estimator script, offline, with gluon_tb's handler added.

Usage: python case_gluonnlp_lm_estimator.py <gluon-nlp git dir, e.g. /work/.mirror/dmlc+gluon-nlp/repo>
       [rev=refs/pull/1155/head]

gluon-nlp's Estimator port (``gluonnlp.estimator``: LanguageModelEstimator, LearningRateHandler,
RNNGradientUpdateHandler with clip_global_norm, MetricResetHandler, AvgParamHandler, ...) and its script
``scripts/language_model/word_language_model_estimator.py`` never reached a release branch: they are in
pull request #1155 (refs/pull/1155/head of the snapshot; v0.10.x has no estimator script). They are
extracted to /tmp/tp/third_party/src/gluonnlp and loaded as ``gluonnlp.estimator`` and
``gluonnlp.loss.joint_loss`` on top of the installed gluonnlp 0.10.0. WikiText-2 cannot be downloaded,
so ``nlp.data.WikiText2`` returns a small generated corpus. The script itself runs unchanged
(``runpy``) with tiny sizes; its ``est.fit`` gets ``TensorBoardHandler`` and the recorder appended.
"""
from __future__ import annotations

import importlib.util
import os
import random
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _inject  # noqa: E402

SCRIPT = "scripts/language_model/word_language_model_estimator.py"


def _load(name: str, path: str, package_dir: str = "") -> None:
    spec = importlib.util.spec_from_file_location(name, path,
                                                  submodule_search_locations=[package_dir] if package_dir else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, mod)


def corpus(n_tokens: int, seed: int) -> list:
    """A generated 'text': a small vocabulary with some structure (a Markov chain), '<eos>' lines."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    out, prev = [], 0
    for _ in range(n_tokens):
        prev = (prev * 7 + rng.randint(0, 5)) % len(words)
        out.append(words[prev])
        if rng.random() < 0.08:
            out.append("<eos>")
    return out


def main(git_dir: str, rev: str = "refs/pull/1155/head") -> int:
    src = _inject.fresh_dir("src", "gluonnlp")
    _inject.extract_tree(git_dir, rev, "src/gluonnlp/estimator", src)
    _inject.extract(git_dir, rev, ["src/gluonnlp/loss/joint_loss.py", SCRIPT], src)
    import mxnet as mx
    import gluonnlp as nlp
    import gluonnlp.loss  # noqa: F401

    _load("gluonnlp.loss.joint_loss", os.path.join(src, "src/gluonnlp/loss/joint_loss.py"))
    est_dir = os.path.join(src, "src/gluonnlp/estimator")
    _load("gluonnlp.estimator", os.path.join(est_dir, "__init__.py"), est_dir)

    sizes = {"train": 1400, "val": 500, "test": 300}
    nlp.data.WikiText2 = lambda segment="train", **kw: mx.gluon.data.SimpleDataset(corpus(sizes[segment], hash(segment) % 97))
    # the script's BatchVariableLenTextSampler calls BatchSampler.__init__() with no arguments, which
    # MXNet 1.9.1 refuses (it needs sampler and batch_size; the subclass uses neither): give defaults
    from mxnet.gluon.data.sampler import BatchSampler
    orig_init = BatchSampler.__init__
    BatchSampler.__init__ = lambda self, sampler=None, batch_size=None, last_batch="keep": \
        orig_init(self, sampler, batch_size, last_batch)
    out = _inject.fresh_dir("gluonnlp-lm-run")
    mx.random.seed(1)
    random.seed(1)
    argv = ["word_language_model_estimator.py", "--emsize", "16", "--nhid", "16", "--nlayers", "1",
            "--batch_size", "4", "--epochs", "4", "--log-interval", "2", "--lr", "20",
            "--clip", "0.01", "--lr_update_interval", "1", "--lr_update_factor", "0.5", "--save", os.path.join(out, "model.params")]
    inj = _inject.Injector("gluonnlp-word-lm-estimator")
    problems: list = []
    old = sys.argv
    sys.argv = argv
    try:
        with inj.active("word_language_model_estimator"):
            _inject.run_guarded(SCRIPT, lambda: runpy.run_path(os.path.join(src, SCRIPT), run_name="__main__"),
                                problems)
    finally:
        sys.argv = old
    fails = sum(r.print() for r in inj.reports)
    for p in problems:
        print("\nSCRIPT RAISED (with gluon_tb added):", p)
    print(f"\n{len(inj.reports)} fits compared, {fails} FAIL rows, {len(problems)} scripts raised")
    return 1 if fails or problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
