"""Looking inside a Gluon network: find a layer, and read its output (or input) for some inputs.

Used by the estimator handler's options that look inside its net: ``conv_filters=``
(``_options/conv_filters.py``), ``embeddings=`` (``_options/embeddings.py``) and ``word_vectors=``
(``_options/word_vectors.py``). Imports mxnet lazily.

How a layer's output is read without touching the training graph:

* a ``HybridBlock`` net (hybridized or not) is called once on a ``Symbol`` with a forward
  hook on the chosen layer, which captures that layer's output symbol; a ``SymbolBlock``
  over it (and over the net's own output) *shares the net's parameters*, so it always sees
  the current weights. The training graph and its cached op are left alone.
* any other ``Block`` net: a forward hook on the layer captures its NDArray output while
  the probe runs the net (hooks are inactive the rest of the time). Children of such a net
  that are hybridized run as one cached op, so *their* children's outputs cannot be seen.

The probe runs in inference mode (``autograd.pause(train_mode=False)``: dropout off,
BatchNorm with running statistics) and only queues work on MXNet's engine.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional, Tuple

from ...writer._common.checks import check_name


def blocks(net: Any) -> Iterator[Any]:
    """``net`` and all its descendants, depth first in registration order."""
    yield net
    for child in getattr(net, "_children", {}).values():
        yield from blocks(child)


def _names(net: Any) -> List[str]:
    return [b.name for b in blocks(net)]


def match_block(found: Iterable[Any], name: str, net: Any, *, param_prefix: bool = False) -> Optional[Any]:
    """The first of ``found`` (blocks of ``net``) named ``name``, else None. A block's name is its
    full ``block.name`` (``"digits_conv0"``), that name without the net's prefix (``"conv0"``)
    and, with ``param_prefix``, its parameter prefix (``"digits_conv0_"``, or without the ``_``)."""
    prefix = getattr(net, "prefix", "") or ""
    for b in found:
        if b.name == name or (prefix and b.name == prefix + name):
            return b
        if param_prefix and name in (b.prefix, b.prefix.rstrip("_")):
            return b
    return None


def find_block(net: Any, name: str, what: str = "layer") -> Any:
    """The block of ``net`` named ``name`` (see :func:`match_block`); ``what`` is the argument
    named in the errors."""
    check_name(name, what, "a non-empty block name (str)")
    found = match_block(blocks(net), name, net)
    if found is not None:
        return found
    raise ValueError(f"{what} {name!r} is not a block of the network; its blocks are "
                     f"{', '.join(_names(net))}")


def first_of(net: Any, cls: Any) -> Optional[Any]:
    for b in blocks(net):
        if isinstance(b, cls):
            return b
    return None


def classifier(net: Any) -> Any:
    """The layer whose *input* is "the layer before the classifier": the last child of a
    (Hybrid)Sequential net, else the last ``Dense`` block of the net."""
    from mxnet.gluon import nn

    kids = list(getattr(net, "_children", {}).values())
    if isinstance(net, (nn.Sequential, nn.HybridSequential)) and kids:
        return kids[-1]
    dense = [b for b in blocks(net) if isinstance(b, nn.Dense)]
    if not dense:
        raise ValueError("the layer before the classifier cannot be found: the network is not "
                         "a (Hybrid)Sequential and has no Dense layer; name a layer instead")
    return dense[-1]


def context_of(net: Any) -> Any:
    import mxnet as mx

    for p in net.collect_params().values():
        try:
            return p.list_ctx()[0]
        except RuntimeError:  # not initialized
            continue
    return mx.cpu()


def _first(x: Any) -> Any:
    return x[0] if isinstance(x, (list, tuple)) else x


class LayerProbe:
    """``probe(x) -> (layer value, net output)`` for NDArray inputs ``x`` (one input).

    ``take="output"``: the output of ``layer``; ``"input"``: its (first) input.
    """

    def __init__(self, net: Any, layer: Any, take: str = "output") -> None:
        from mxnet import gluon

        if take not in ("output", "input"):
            raise ValueError(f"take must be 'output' or 'input', got {take!r}")
        self.net, self.layer, self.take = net, layer, take
        self._seen: List[Any] = []
        self._active = False
        self._handle: Any = None
        self._sym: Any = None
        if isinstance(net, gluon.HybridBlock):
            self._sym = self._symbol_block()
        else:
            self._handle = self._hook(self._keep_while_active)

    def _keep_while_active(self, value: Any) -> None:
        if self._active:
            self._seen.append(value)

    def _hook(self, keep: Any) -> Any:
        if self.take == "output":
            return self.layer.register_forward_hook(lambda _b, _i, out: keep(_first(out)))
        return self.layer.register_forward_pre_hook(lambda _b, inp: keep(_first(inp)))

    def _symbol_block(self) -> Any:
        import mxnet as mx
        from mxnet import gluon

        got: List[Any] = []
        handle = self._hook(got.append)
        data = mx.sym.var("data")
        try:
            out = _first(self.net(data))
        finally:
            handle.detach()
        if not got:
            raise ValueError(f"layer {self.layer.name!r} is not used by the network's forward")
        with _quiet():
            return gluon.SymbolBlock(mx.sym.Group([got[0], out]), data,
                                     params=self.net.collect_params())

    def __call__(self, x: Any) -> Tuple[Any, Any]:
        from mxnet import autograd

        with autograd.pause(train_mode=False):
            if self._sym is not None:
                feat, out = self._sym(x)
                return feat, out
            self._seen, self._active = [], True
            try:
                out = _first(self.net(x))
            finally:
                self._active = False
            if not self._seen:
                raise ValueError(f"layer {self.layer.name!r} was not run by the network's forward")
            return self._seen[0], out

    def close(self) -> None:
        if self._handle is not None:
            self._handle.detach()
            self._handle = None


class _quiet:
    """SymbolBlock warns about every shared parameter the sub-graph does not use."""

    def __enter__(self) -> None:
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: Any) -> None:
        self._w.__exit__(*exc)
