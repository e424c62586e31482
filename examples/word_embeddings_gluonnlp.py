"""Train a tiny word-level language model on Python's own docstrings; see its word vectors.

    python examples/word_embeddings_gluonnlp.py --logdir logs/word_embeddings --epochs 5
    .venv/bin/tensorboard --logdir logs/word_embeddings   # the venv beside the Python that ran it

The text is collected at run time from the documentation strings of standard-library modules
(``inspect.getdoc``), so nothing is downloaded. ``gluonnlp.Vocab`` indexes the words; an
Embedding -> LSTM -> Dense model predicts the next word, trained with Gluon's ``Estimator``.
``TensorBoardHandler`` logs ``epoch_loss`` and ``epoch_perplexity`` in runs ``train`` and
``validation`` and, with ``word_vectors=WordVectors(...)``, the Embedding's rows of the ``--words``
most frequent words, labelled with the words themselves, in the projector (tag
``word_vectors``). Needs ``pip install gluonnlp==0.10.0``.
"""
import argparse
import importlib
import inspect
import math
import os
import re
import sys
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _logs import fresh_logdir, print_how_to_open  # noqa: E402

try:
    import gluonnlp as nlp
except ImportError as e:  # pragma: no cover - an optional example
    raise ImportError("this example needs gluonnlp: pip install gluonnlp==0.10.0 "
                      "(from gluon_tb's checkout: pip install '.[nlp]')") from e

from gluon_tb import TensorBoardHandler, WordVectors  # noqa: E402

MODULES = ("os", "re", "json", "inspect", "collections", "functools", "itertools", "pathlib",
           "argparse", "logging", "subprocess", "threading", "datetime", "string", "textwrap",
           "typing", "unittest", "email", "http.client", "urllib.parse", "csv", "zipfile",
           "tarfile", "shutil", "tempfile", "socket", "asyncio", "decimal", "fractions", "random")
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[.,;:()]")


def docstrings() -> str:
    """Every docstring of the modules above and of their public members."""
    texts = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        texts.append(inspect.getdoc(mod) or "")
        for attr in sorted(dir(mod)):
            if not attr.startswith("_"):
                texts.append(inspect.getdoc(getattr(mod, attr, None)) or "")
    return "\n".join(dict.fromkeys(texts))  # each text once


class LanguageModel(gluon.HybridBlock):
    def __init__(self, vocab_size: int, dim: int = 64, hidden: int = 128, **kw) -> None:
        super().__init__(**kw)
        with self.name_scope():
            self.embedding = gluon.nn.Embedding(vocab_size, dim)
            self.rnn = gluon.rnn.LSTM(hidden, layout="NTC")
            self.out = gluon.nn.Dense(vocab_size, flatten=False)

    def hybrid_forward(self, F, x):
        return self.out(self.rnn(self.embedding(x)))


def windows(ids: np.ndarray, seq_len: int) -> np.ndarray:
    n = (len(ids) - 1) // seq_len
    return np.stack([ids[: n * seq_len].reshape(n, seq_len), ids[1: n * seq_len + 1].reshape(n, seq_len)], 1)


class Perplexity(mx.metric.EvalMetric):
    """exp(mean cross-entropy per word) of (N, T, V) outputs and (N, T) labels (MXNet's own
    ``Perplexity`` metric wants one output row per label)."""

    def __init__(self) -> None:
        super().__init__("perplexity")

    def update(self, labels, preds) -> None:
        for y, out in zip(labels, preds):
            nll = -mx.nd.pick(mx.nd.log_softmax(out), y.as_in_context(out.context), axis=-1)
            total = nll.sum().asscalar()
            self.sum_metric += total
            self.global_sum_metric += total
            self.num_inst += y.size
            self.global_num_inst += y.size

    def get(self):
        return self.name, math.exp(self.sum_metric / self.num_inst) if self.num_inst else float("nan")

    def get_global(self):
        n = self.global_num_inst
        return self.name, math.exp(self.global_sum_metric / n) if n else float("nan")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/word_embeddings")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--words", type=int, default=1000, help="most frequent words to show in the projector")
    ap.add_argument("--max-tokens", type=int, default=200_000)
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs
    mx.random.seed(0)

    tokens = WORD.findall(docstrings().lower())[: args.max_tokens]
    counts = nlp.data.count_tokens(tokens)
    vocab = nlp.Vocab(counts, max_size=5000, min_freq=2)
    ids = np.array(vocab[tokens], dtype="float32")
    cut = int(len(ids) * 0.9)
    train, val = windows(ids[:cut], 32), windows(ids[cut:], 32)
    print(f"{len(tokens)} tokens from standard-library docstrings, vocabulary of {len(vocab)}")
    as_set = lambda w: gluon.data.ArrayDataset(w[:, 0], w[:, 1])  # noqa: E731
    train_data = gluon.data.DataLoader(as_set(train), batch_size=32, shuffle=True, last_batch="discard")
    val_data = gluon.data.DataLoader(as_set(val), batch_size=64)

    net = LanguageModel(len(vocab), prefix="lm_")
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 3e-3, "clip_gradient": 1.0})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=[Perplexity()], trainer=trainer)
    # the Embedding's rows of the most frequent words (counts: the counter the vocabulary was built from),
    # labelled with the words, in the projector at the end of training
    words = WordVectors(layer="embedding0", vocab=vocab, counts=counts, top=args.words)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the estimator's notes on default handlers
        est.fit(train_data, val_data=val_data, epochs=args.epochs,
                event_handlers=[TensorBoardHandler(args.logdir, word_vectors=words, histogram_period=None)])

    print_how_to_open(args.logdir, "runs: train, validation; projector: word_vectors")


if __name__ == "__main__":
    main()
