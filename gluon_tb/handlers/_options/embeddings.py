"""The ``embeddings=`` option: a held-out sample's hidden representation in the projector.

Where the sample comes from: ``Embeddings(data=...)`` (a DataLoader of ``[data, label]``
batches, or an ``(inputs, labels)`` pair of arrays), else the first validation pass the
estimator runs (``batch_processor.evaluate_batch`` is hooked and copies, on MXNet's engine,
the first ``samples`` inputs and labels it sees). The sample is taken once and reused.

What is logged (run ``train``, tag ``Embeddings.tag``, step = epoch index): the chosen
layer's output for the sample, flattened to ``(N, D)``; metadata columns ``label`` (the
true label) and ``predicted`` (``argmax`` of the net's output), with a header row; and the
inputs as sprite thumbnails when they look like images (N×C×H×W with 1 or 3 channels,
or N×H×W; scaled by the sample's min and max).
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional, Union

import numpy as np

from ...writer import SummaryWriter
from ...writer._common.checks import check_name, describe, is_int
from .._common.checks import check_positive_int, check_positive_int_or_none
from .._common.run_writers import TRAIN, RunWriters
from .._mxnet.blocks import LayerProbe, classifier, context_of, find_block
from .._mxnet.hooks import wrap
from .._mxnet.symbols import SymbolProbe, classifier_input, layer_output
from .images import image_format
from .protocol import Batch, EveryEpochs, Fit, Option


class Embeddings:
    """Options of ``TensorBoardHandler(embeddings=...)`` and ``TensorBoardCallback(embeddings=...)``.

    Args:
        samples: how many held-out inputs to embed.
        layer: the block whose output is embedded (full name or without the net's prefix);
            ``None``: the input of the classifier (see :func:`gluon_tb.handlers._mxnet.blocks.classifier`):
            for a (Hybrid)Sequential net the output of all children but the last. With
            :class:`~._module.TensorBoardCallback` (Module): a layer (node) of the symbol, ``"fc2"`` or
            ``"fc2_output"``; ``None``: the input of the layer that feeds the loss output.
        every: log every this many epochs (at the end of epochs ``every - 1``, ``2*every - 1``,
            ...) as well as at the end of training; ``None``: only at the end of training.
        data: where the sample comes from (see the module docs); ``None``: validation
            (for Module: ``fit``'s ``eval_data``). Module also takes a ``DataIter``.
        tag: the projector tag (a folder of the run directory).
    """

    def __init__(self, samples: int = 256, *, layer: Optional[str] = None, every: Optional[int] = None,
                 data: Any = None, tag: str = "embedding") -> None:
        self.samples = check_positive_int(samples, "samples")
        self.layer = check_name(layer, "layer", "None or a block name", allow_none=True)
        self.every = check_positive_int_or_none(every, "every")
        self.data = _check_data(data)
        self.tag = check_name(tag, "tag", "a non-empty str")


def _check_data(data: Any) -> Any:
    """``Embeddings(data=)``: ``None``, an ``(inputs, labels)`` pair of arrays with one label per
    input row, or something iterable giving ``[data, label]`` batches (a DataLoader, a DataIter)."""
    expect = "None, an (inputs, labels) pair of arrays or an iterable of [data, label] batches (a DataLoader)"
    if data is None:
        return None
    if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__") or hasattr(data, "shape"):
        raise TypeError(f"Embeddings(data=) must be {expect}, got {describe(data)}")
    if _is_list_pair(data):  # ([row, ...], [label, ...]) in Python lists: as arrays
        try:
            data = (np.asarray(data[0], dtype=np.float32), np.asarray(data[1], dtype=np.float32))
        except (TypeError, ValueError) as e:
            raise ValueError(f"Embeddings(data=(inputs, labels)) given as lists must hold rows of one shape "
                             f"and numbers, got {describe(data)} ({e})") from e
    if _is_pair(data):  # else batches
        if len(data) != 2 or not all(hasattr(a, "shape") and len(a.shape) >= 1 for a in data):
            raise ValueError(f"Embeddings(data=) must be {expect}; a {type(data).__name__} of "
                             f"{len(data)} is taken as the pair, got {describe(data)}")
        rows, labels = int(data[0].shape[0]), int(data[1].shape[0])
        if rows != labels:
            raise ValueError(f"Embeddings(data=(inputs, labels)) must have one label per input row, got "
                             f"{rows} input rows and {labels} labels")
    return data


def _is_list_pair(data: Any) -> bool:
    """``(inputs, labels)`` as two Python lists (or tuples) of rows and labels, not of batches:
    a batch list holds arrays, these hold numbers or lists of them."""
    return isinstance(data, (tuple, list)) and len(data) == 2 and \
        all(isinstance(a, (list, tuple)) and a and not hasattr(a[0], "shape") for a in data)


def _is_pair(data: Any) -> bool:
    """``Embeddings(data=)`` given as ``(inputs, labels)`` arrays, not as batches (checked to be
    two arrays of as many rows by :func:`_check_data`)."""
    return isinstance(data, (tuple, list)) and bool(data) and hasattr(data[0], "shape")


def check_embeddings(value: Any) -> Optional[Embeddings]:
    if value is None or value is False:
        return None
    if value is True:
        return Embeddings()
    if is_int(value):  # a numpy integer too
        if value < 1:
            raise ValueError(f"embeddings must be None, True, a positive sample count or an Embeddings(...), "
                             f"got {value}")
        return Embeddings(int(value))
    if isinstance(value, Embeddings):
        return value
    raise TypeError(f"embeddings must be None, True, a sample count (int) or an Embeddings(...), "
                    f"got {describe(value)}")


class Projector(EveryEpochs):
    """Collects the sample and logs the embedding; see the module docs."""

    def __init__(self, cfg: Embeddings, out: RunWriters) -> None:
        self.cfg, self._out = cfg, out
        self._xs: List[Any] = []
        self._ys: List[Any] = []
        self._have = 0
        self._net: Any = None
        self._probe: Any = None  # a LayerProbe (the Module callback's projector: a SymbolProbe)
        self._logged = -1
        self._unprobed = False  # Embeddings(data=) to try at the first batch (shapes were deferred)

    def begin(self, fit: Fit) -> Any:
        """Returns the validation hook (a ``Wrap``) to remove at the end, or None."""
        estimator, scope, on_dead = fit.estimator, fit.scope, fit.on_dead
        net = estimator.net
        if net is not self._net:
            self.close()
            self._net = net
            layer = find_block(net, self.cfg.layer, "embeddings' layer") if self.cfg.layer else classifier(net)
            self._probe = LayerProbe(net, layer, take="output" if self.cfg.layer else "input")
        if self._have >= self.cfg.samples:
            return None
        if self.cfg.data is not None:
            self._take_from(self.cfg.data)
            self._unprobed = not self._try_sample(net, wait=True)
            return None
        return wrap(estimator.batch_processor, ("evaluate_batch",), self._see_validation, with_args=True,
                    scope=scope, on_dead=on_dead)

    def batch_end(self, batch: Batch) -> None:
        if self._unprobed:  # the net's shapes were deferred at train_begin: its first batch set them
            self._unprobed = False
            self._try_sample(self._net, wait=False)

    def _try_sample(self, net: Any, wait: bool) -> bool:
        """``Embeddings(data=)``'s inputs through the probe, one row: inputs the net cannot take
        fail before training (or after its first batch, when the net's shapes were deferred), not
        when the embeddings are computed at the end of ``fit``. Only when every parameter's shape
        is known (a deferred one would be set by this row's shape): False when they are not.
        ``wait=False`` in training: no host sync (a wrong shape fails when the probe is called)."""
        if not self._xs or self._probe is None:
            return True
        if not all(p.shape and all(d > 0 for d in p.shape) for p in net.collect_params().values()):
            return False
        x = self._xs[0][:1]
        try:
            feats, _ = self._probe(x.as_in_context(context_of(net)))
            if wait:
                feats.wait_to_read()
        except Exception as e:  # noqa: BLE001 - MXNet's errors, named for the argument they came from
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ValueError(f"Embeddings(data=): the network cannot take its inputs (a row of shape "
                             f"{tuple(x.shape)[1:]}): {first}") from e
        return True

    def _take_from(self, data: Any) -> None:
        if _is_pair(data):
            self._keep(data)
            return
        for batch in data:
            self._keep(batch)
            if self._have >= self.cfg.samples:
                return

    def _see_validation(self, _est: Any = None, batch: Any = None, *args: Any, **kwargs: Any) -> None:
        if self._have < self.cfg.samples:
            self._keep(batch)

    def _keep(self, batch: Any) -> None:
        import mxnet as mx

        if not (isinstance(batch, (list, tuple)) and len(batch) >= 2):
            self._out.say_once("emb-pairs", "gluon_tb: batches are not [data, label] pairs; "
                               "embeddings are not logged", logging.WARNING)
            self._have = self.cfg.samples
            return
        x, y = batch[0], batch[1]
        x = x if isinstance(x, mx.nd.NDArray) else mx.nd.array(x)
        y = y if isinstance(y, mx.nd.NDArray) else mx.nd.array(y)
        k = min(self.cfg.samples - self._have, int(x.shape[0]))
        self._xs.append(x[:k].copy())
        self._ys.append(y[:k].copy())
        self._have += k

    def log(self, step: int) -> None:
        if step == self._logged or self._probe is None:
            return
        if not self._xs:
            self._out.say_once("emb-none", "gluon_tb: no held-out sample was seen (no validation "
                               "data, and no Embeddings(data=...)); embeddings are not logged",
                               logging.WARNING)
            return
        self._logged = step
        self._out.call(TRAIN, self._write, step)

    def _write(self, w: SummaryWriter, step: int) -> None:
        import mxnet as mx

        x = mx.nd.concat(*self._xs, dim=0) if len(self._xs) > 1 else self._xs[0]
        y = mx.nd.concat(*self._ys, dim=0) if len(self._ys) > 1 else self._ys[0]
        emb, pred = self._embed(x)
        labels = {"label": _as_labels(y), "predicted": _as_labels(pred)}
        w.add_embedding(self.cfg.tag, emb, labels=labels, images=_sprite(x), global_step=step)

    def _embed(self, x: Any) -> Any:
        """``(features (N, D), net output or predicted class (N,))`` of the sample ``x``
        (NDArray ops only); the Module callback's projector overrides it."""
        import mxnet as mx

        ctx = context_of(self._net)
        feats, outs = [], []
        for i in range(0, int(x.shape[0]), 256):
            f, o = self._probe(x[i:i + 256].as_in_context(ctx))
            feats.append(mx.nd.flatten(f))
            outs.append(o.argmax(axis=-1) if len(o.shape) > 1 else o)
        emb = mx.nd.concat(*feats, dim=0) if len(feats) > 1 else feats[0]
        pred = mx.nd.concat(*outs, dim=0) if len(outs) > 1 else outs[0]
        return emb, pred

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def _as_labels(y: Any) -> Any:
    """Class labels as an int64 NDArray (float class ids rounded, one-hot rows argmax'ed)."""
    import numpy as np

    if len(y.shape) > 1:
        y = y.reshape((-1,)) if y.size == y.shape[0] else y.argmax(axis=-1)
    if np.dtype(y.dtype).kind == "f":
        y = y.round().astype("int64")
    return y


def _sprite(x: Any) -> Union[None, Any]:
    return x if image_format(tuple(x.shape)) else None  # floats: the writer's one rule (pixels.py)


class ModuleProjector(Projector):
    """The projector option for Module: the sample from ``Embeddings(data=)`` or ``eval_data``.

    The held-out sample (``Embeddings(data=...)``, else the first inputs of ``fit``'s
    ``eval_data``, read once when first logged) goes through the symbol up to the input of the
    layer that feeds the loss output (or ``Embeddings(layer=...)``); predicted labels are the
    ``argmax`` of that prediction layer's output.
    """
    last_at_epoch_end = True  # validation leaves the weights as they are

    def __init__(self, cfg: Embeddings, out: RunWriters) -> None:
        super().__init__(cfg, out)
        self._symbol: Any = None
        self._module: Any = None
        self._eval: Any = None

    def begin(self, fit: Fit) -> None:
        """At the first batch of a ``fit``: the module, its symbol and the validation iterator."""
        module = self._module = fit.module
        self._eval = fit.eval_data
        if module.symbol is not self._symbol:
            self._symbol = module.symbol
            if self.cfg.layer:
                feats = layer_output(self._symbol, self.cfg.layer, "embeddings' layer")
                pred = classifier_input(self._symbol)[1]
            else:
                feats, pred = classifier_input(self._symbol)
            self._probe = SymbolProbe([feats, pred])
            self._data_name = module.data_names[0]

    def close(self) -> None:
        """The probe binds per call: nothing to release, and a later ``fit`` uses it again."""

    def log(self, step: int) -> None:
        if self._have < self.cfg.samples and self._module is not None:
            self._collect()
        super().log(step)

    def _collect(self) -> None:
        import mxnet as mx

        src = self.cfg.data if self.cfg.data is not None else self._eval
        if src is None:
            return
        if not isinstance(src, mx.io.DataIter):
            self._take_from(src)
            return
        src.reset()
        try:
            for b in src:
                if not b.label:
                    self._out.say_once("emb-labels", "gluon_tb: the held-out batches have no labels; "
                                       "embeddings are not logged", logging.WARNING)
                    self._have = self.cfg.samples
                    return
                n = int(b.data[0].shape[0]) - int(b.pad or 0)
                self._keep([b.data[0][:n], b.label[0][:n]])
                if self._have >= self.cfg.samples:
                    break
        finally:
            src.reset()

    def _embed(self, x: Any) -> Any:
        import mxnet as mx

        arg_params, aux_params = self._module.get_params()
        feats, pred = self._probe({self._data_name: x}, arg_params, aux_params)
        return mx.nd.flatten(feats), (pred.argmax(axis=-1) if len(pred.shape) > 1 else pred)


OPTION = Option("embeddings", check_embeddings, Projector, ModuleProjector)
