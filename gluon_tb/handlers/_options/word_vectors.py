"""The ``word_vectors=`` option: an ``nn.Embedding``'s weight matrix in the projector, rows labelled
with their tokens.

Which rows, in which order: with a vocabulary that knows its counts (``WordVectors(counts=...)``,
the counter the vocabulary was built from, or a ``counter`` attribute of the vocabulary) the
``top`` most frequent tokens, most frequent first (ties and tokens without a count keep their
index order, uncounted tokens last); otherwise the first ``top`` rows in index order. A
``gluonnlp.Vocab`` gives its ``idx_to_token``; any other sequence of str is taken as the token of
each row. ``word_vectors=True``: the first Embedding, every row, labelled with its index.

What is logged (run ``train``, tag ``WordVectors.tag``, step = epoch index): the chosen rows of
the weight, ``(top, dim)``, and one metadata column of tokens, at the end of training and, with
``every=k``, at the end of epochs ``k - 1``, ``2k - 1``, ... The weight goes to the writer as an
NDArray (``nd.take`` of the rows where they are not all, in order): nothing is read on the
training thread.

``TensorBoardCallback`` (``Module.fit``) logs the same from a symbol's ``Embedding`` operator:
:class:`ModuleWordVectors` below.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, List, Optional, Tuple

from ...writer import SummaryWriter
from ...writer._common.checks import check_name, describe, is_python_number
from .._common.checks import check_option, check_positive_int_or_none
from .._common.run_writers import TRAIN, RunWriters
from .._mxnet.blocks import blocks, match_block
from .._mxnet.symbols import _graph
from .protocol import Epoch, EveryEpochs, Fit, Option


class WordVectors:
    """Options of ``TensorBoardHandler(word_vectors=...)`` and ``TensorBoardCallback(word_vectors=...)``:
    an Embedding's rows with their tokens.

    Example::

        vocab = gluonnlp.Vocab(gluonnlp.data.count_tokens(tokens))
        handler = TensorBoardHandler("logs/lm", word_vectors=WordVectors(
            "embedding0", vocab=vocab, counts=gluonnlp.data.count_tokens(tokens), top=5000))
        est.fit(train_data, epochs=5, event_handlers=[handler])
        # TensorBoard's Projector: tensor "word_vectors", 5000 points labelled with their words

    Args:
        layer: the ``nn.Embedding``: its block name (``"lm_embedding0"``, or without the net's
            prefix, ``"embedding0"``) or its parameter prefix (``"lm_embedding0_"``);
            ``None``: the first Embedding of the net. With ``TensorBoardCallback``: the name of
            an ``Embedding`` operator of the module's symbol (``mx.sym.Embedding(..., name=
            "embedding0")``); ``None``: its first.
        vocab: the token of each row: a ``gluonnlp.Vocab`` (its ``idx_to_token``) or a sequence
            of str, as long as the Embedding has rows; ``None``: the row indices.
        counts: ``{token: count}`` (the ``Counter`` the vocabulary was built from): the rows are
            ordered most frequent first. ``None``: the vocabulary's ``counter`` attribute where it
            has one, else index order.
        top: log this many rows (fewer when there are fewer); ``None``: all.
        every: also log every this many epochs; ``None``: only at the end of training.
        tag: the projector tag (a folder of the run directory).
    """

    def __init__(self, layer: Optional[str] = None, vocab: Any = None, *,
                 counts: Optional[Mapping] = None, top: Optional[int] = None,
                 every: Optional[int] = None, tag: str = "word_vectors") -> None:
        self.layer = check_name(layer, "layer", "None or the name of an nn.Embedding block", allow_none=True)
        self.tokens: Optional[List[str]] = None if vocab is None else _tokens_of(vocab)
        if counts is None and vocab is not None:
            counts = getattr(vocab, "counter", None)
        if counts is not None and not isinstance(counts, Mapping):
            raise TypeError(f"counts must be None or a mapping of token to count (a Counter), "
                            f"got {describe(counts)}")
        if counts is not None and self.tokens is None:
            raise ValueError("counts needs vocab: the tokens the counts are of")
        self.counts = counts
        self.top = check_positive_int_or_none(top, "top")
        self.every = check_positive_int_or_none(every, "every")
        self.tag = check_name(tag, "tag", "a non-empty str")

    def order(self, rows: int) -> List[int]:
        """The row indices to log, in order, for an Embedding of ``rows`` rows."""
        if self.tokens is not None and len(self.tokens) != rows:
            raise ValueError(f"word_vectors: vocab must have one token per Embedding row ({rows} rows), "
                             f"got {len(self.tokens)} tokens")
        idx = list(range(rows))
        if self.counts is not None and self.tokens is not None:
            counts, tokens = self.counts, self.tokens
            idx.sort(key=lambda i: (tokens[i] not in counts, -_count(counts.get(tokens[i]), tokens[i]), i))
        return idx[:self.top]


def _count(v: Any, token: str) -> float:
    if v is None:
        return 0
    if not is_python_number(v):
        raise TypeError(f"counts must map each token to a number, got {describe(v)} for {token!r}")
    return v


def _tokens_of(vocab: Any) -> List[str]:
    seq = getattr(vocab, "idx_to_token", vocab)
    if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence):
        raise TypeError(f"vocab must be a gluonnlp.Vocab or a sequence of str tokens, got {describe(vocab)}")
    tokens = list(seq)
    if not tokens:
        raise ValueError("vocab must hold at least one token, got an empty vocabulary")
    for i, t in enumerate(tokens):
        if not isinstance(t, str):
            raise TypeError(f"vocab must be a sequence of str tokens, got {describe(t)} at index {i}")
    return tokens


def check_word_vectors(value: Any) -> Optional[WordVectors]:
    return check_option(value, "word_vectors", WordVectors)


def find_embedding(net: Any, name: Optional[str]) -> Any:
    """The ``nn.Embedding`` of ``net`` named ``name`` (block name, without the net's prefix, or
    parameter prefix), or its first one."""
    from mxnet.gluon import nn

    found = [b for b in blocks(net) if isinstance(b, nn.Embedding)]
    if not found:
        raise ValueError(f"word_vectors needs an nn.Embedding block, and the network "
                         f"{getattr(net, 'name', type(net).__name__)!r} has none")
    if name is None:
        return found[0]
    emb = match_block(found, name, net, param_prefix=True)
    if emb is not None:
        return emb
    raise ValueError(f"word_vectors: layer must name an nn.Embedding of the network "
                     f"({', '.join(repr(b.name) for b in found)}), got {name!r}")


class WordVectorsLogger(EveryEpochs):
    """Finds the Embedding at ``train_begin`` and logs its rows; see the module docs."""

    def __init__(self, cfg: WordVectors, out: RunWriters) -> None:
        self.cfg, self._out = cfg, out
        self._weight: Any = None
        self._take: Any = None    # NDArray of row indices, or None for all rows in order
        self._labels: List[str] = []
        self._logged = -1

    def prepare(self, fit: Fit) -> None:
        """Find the Embedding and check the vocabulary against it (raises before training)."""
        emb = find_embedding(fit.net, self.cfg.layer)
        self.choose(int(emb.weight.shape[0]))
        self._weight = emb.weight

    def choose(self, rows: int) -> None:
        """The rows to log and their labels, for an Embedding of ``rows`` rows (raises on a
        vocabulary of another length)."""
        import mxnet as mx

        idx = self.cfg.order(rows)
        tokens = self.cfg.tokens
        self._labels = [tokens[i] for i in idx] if tokens is not None else [str(i) for i in idx]
        self._take = None if idx == list(range(rows)) else mx.nd.array(idx, dtype="int64")

    def log(self, step: int) -> None:
        if step == self._logged or self._weight is None:
            return
        self._logged = step
        self._out.call(TRAIN, self._write, step)

    def _array(self) -> Any:
        """The weight as an NDArray (the Parameter's, on its first device)."""
        return self._weight.list_data()[0]

    def _write(self, w: SummaryWriter, step: int) -> None:
        import mxnet as mx

        weight = self._array()
        if self._take is not None:
            weight = mx.nd.take(weight, self._take.as_in_context(weight.context), axis=0)
        w.add_embedding(self.cfg.tag, weight, labels=self._labels, global_step=step)


def embedding_layer(symbol: Any, name: Optional[str]) -> Tuple[str, int]:
    """``(weight argument name, rows)`` of the ``Embedding`` operator ``name`` of ``symbol``, or its first."""
    nodes = _graph(symbol)["nodes"]
    embs = [n for n in nodes if n["op"] == "Embedding"]
    if name is None and not embs:
        ops = ", ".join(n["name"] for n in nodes if n["op"] != "null")
        raise ValueError(f"word_vectors needs an Embedding layer, and the symbol has none (its layers are {ops})")
    node = embs[0] if name is None else next((n for n in embs if n["name"] == name), None)
    if node is None:
        kind = next((n["op"] for n in nodes if n["name"] == name), None)
        got = f"a {kind}" if kind else "not a layer of the symbol"
        raise ValueError(f"word_vectors: layer must name an Embedding of the symbol "
                         f"({', '.join(n['name'] for n in embs) or 'it has none'}), got {name!r} ({got})")
    return nodes[node["inputs"][1][0]]["name"], int(node.get("attrs", {})["input_dim"])


class ModuleWordVectors(WordVectorsLogger):
    """``word_vectors`` for Module: the Embedding operator's weight from ``arg_params`` at epoch end."""
    last_at_epoch_end = True

    def __init__(self, cfg: Any, out: RunWriters) -> None:
        super().__init__(cfg, out)
        self._symbol: Any = None
        self._arg = ""

    def prepare(self, fit: Fit) -> None:
        """At the first batch of a ``fit``: find the Embedding, check the vocabulary (ValueError)."""
        symbol = fit.module.symbol
        if symbol is not self._symbol:
            self._arg, rows = embedding_layer(symbol, self.cfg.layer)
            self.choose(rows)
            self._symbol = symbol

    def epoch_end(self, epoch: Epoch) -> None:
        """The weight to log is ``fit``'s host copy in ``arg_params``; the last epoch is always logged."""
        self._weight = (epoch.arg_params or {}).get(self._arg)
        super().epoch_end(epoch)

    def _array(self) -> Any:
        return self._weight


OPTION = Option("word_vectors", check_word_vectors, WordVectorsLogger, ModuleWordVectors)
