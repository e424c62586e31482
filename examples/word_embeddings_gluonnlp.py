"""Train a tiny word-level language model on Python's own docstrings; see its word vectors.

    python examples/word_embeddings_gluonnlp.py --logdir logs/word_embeddings --epochs 5
    tensorboard --logdir logs/word_embeddings

The text is collected at run time from the documentation strings of standard-library modules
(``inspect.getdoc``), so nothing is downloaded. ``gluonnlp.Vocab`` indexes the words; an
Embedding -> LSTM -> Dense model predicts the next word. Logged: ``epoch_perplexity`` in runs
``train`` and ``validation`` and, in the projector, the embedding matrix of the ``--words``
most frequent words labelled with the words themselves. Needs ``pip install gluonnlp==0.10.0``.
"""
import argparse
import importlib
import inspect
import math
import os
import re
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import gluonnlp as nlp
except ImportError as e:  # pragma: no cover - an optional example
    raise ImportError("this example needs gluonnlp: pip install 'gluon-tb[nlp]' "
                      "(or pip install gluonnlp==0.10.0)") from e

from gluon_tb import SummaryWriter  # noqa: E402

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


def perplexity(net, loader, loss_fn) -> float:
    total, count = 0.0, 0
    for x, y in loader:
        total += loss_fn(net(x), y).sum().asscalar()
        count += y.shape[0]  # the loss is the mean over each sequence
    return math.exp(total / count)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/word_embeddings")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--words", type=int, default=1000, help="most frequent words to show in the projector")
    ap.add_argument("--max-tokens", type=int, default=200_000)
    args = ap.parse_args(argv)
    mx.random.seed(0)

    tokens = WORD.findall(docstrings().lower())[: args.max_tokens]
    vocab = nlp.Vocab(nlp.data.count_tokens(tokens), max_size=5000, min_freq=2)
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
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # the most frequent words: Vocab orders its tokens by count, after the special tokens
    special = {vocab.unknown_token, vocab.padding_token, vocab.bos_token, vocab.eos_token}
    top = [t for t in vocab.idx_to_token if t not in special][: args.words]
    top_ids = mx.nd.array(vocab[top])

    with SummaryWriter(os.path.join(args.logdir, "train")) as tw, \
            SummaryWriter(os.path.join(args.logdir, "validation")) as vw:
        for epoch in range(args.epochs):
            t0, total, count = time.time(), None, 0
            for x, y in train_data:
                with autograd.record():
                    loss = loss_fn(net(x), y)
                loss.backward()
                trainer.step(y.shape[0])
                total = loss.sum() if total is None else total + loss.sum()  # no per-batch sync
                count += y.shape[0]  # the loss is the mean over each sequence
            train_ppl = math.exp(total.asscalar() / count)
            val_ppl = perplexity(net, val_data, loss_fn)
            tw.add_scalar("epoch_perplexity", train_ppl, epoch)
            vw.add_scalar("epoch_perplexity", val_ppl, epoch)
            print(f"epoch {epoch}: train perplexity {train_ppl:.1f}, validation {val_ppl:.1f} "
                  f"({time.time() - t0:.1f}s)")
            tw.add_embedding("word_embedding", net.embedding.weight.data().take(top_ids), labels=top,
                             global_step=epoch)

    logdir = os.path.abspath(args.logdir)
    print(f"TensorBoard logs written to {logdir} (runs: train, validation; projector: word_embedding)")
    print(f"View them with:\n    tensorboard --logdir {logdir}")


if __name__ == "__main__":
    main()
