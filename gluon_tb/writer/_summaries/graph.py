"""The model graph: an MXNet symbol turned into TensorBoard's ``GraphDef``.

``capture_graph(net)`` runs on the caller's thread and does every MXNet call
(the symbol's JSON, shape inference, the block tree's prefixes); the payload it
returns is plain Python. Not on the writer thread: MXNet's symbol calls are not safe beside
the training thread's (a ``tojson`` there while the training thread called
``mx.profiler.dump`` aborted the process, 2026-11-28). ``build_graph(payload)`` encodes the ``GraphDef`` with
:mod:`.._format.proto` (the symbol's JSON parsed, the scoped names, the nodes: 35-55 ms of
pure Python for a ResNet-50); for a symbol JSON of 32 KiB or more (ResNet-18 and up) the
writer thread runs it in a child process (``_io/child.py``), so it holds no GIL of the
training process, and wraps the bytes in an ``Event`` (a smaller graph, a few ms, is encoded
on the writer thread: a child costs ~0.3 s of CPU). Memory: the payload (the symbol's JSON and the shapes: about 1 MB for a
ResNet-50) until the child answers, its pickled copy, and the child's own working memory
until it exits. Without a child it runs on the writer thread: the same bytes.

Node names become TensorBoard name scopes that follow the model's structure
(:mod:`.graph_scopes` states the rule): a Gluon block's by its block tree
(``hybridsequential0_dense0_fwd`` -> ``hybridsequential0/dense0/fwd``), a bare
Symbol's by the structure of its names, one group per layer with its parameters
(``conv_1/weight``, ``conv_1/conv_1``) inside the parts that mix operators
(``stage1/unit1/bn1/gamma``).

Data inputs have op ``Placeholder``, parameters and auxiliary states
op ``Variable``; the ``k``-th output (``k > 0``) of a node is ``name:k``.
"""
from __future__ import annotations

import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, cast

from .._format import proto as _proto
from .._common.checks import describe, is_int
from .graph_scopes import scoped_names

__all__ = ["GraphPayload", "capture_graph", "build_graph", "built_before", "keep_built"]

Shape = Tuple[int, ...]

# Variables of a bare Symbol with these name endings are parameters, not data.
_PARAM_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var",
                   "_running_mean", "_running_var", "_parameters", "_state", "_state_cell")
_PARAM_ATTRS = ("__lr_mult__", "__wd_mult__", "__init__")
_NEEDS_RUN = ("call net.hybridize() and then run one forward pass, net(x), before adding "
              "its graph")


@dataclass(frozen=True)
class GraphPayload:
    """What :func:`build_graph` needs, free of MXNet objects."""

    symbol_json: str
    #: ``(prefix, scope path)`` of every block, longest prefix first; ``None`` for a Symbol.
    scopes: Optional[Tuple[Tuple[str, str], ...]]
    data_names: frozenset
    param_names: frozenset
    #: node name -> one shape per output (``-1`` for an unknown dim), where inferred.
    shapes: Mapping[str, Tuple[Shape, ...]]


class _Captured:
    """A net's captured graph, for the next writer that logs the same net: its symbol (held, so
    that its id stays its own), the payload, and the encoded ``GraphDef`` once built."""

    __slots__ = ("net", "sym", "payload", "built")

    def __init__(self, net: Any, sym: Any, payload: GraphPayload) -> None:
        self.net, self.sym, self.payload = weakref.ref(net), sym, payload
        self.built: Optional[bytes] = None


#: the last few nets' graphs (a fit with a new handler on the same net logs the same graph: one
#: capture, ~0.3 ms of MXNet calls on the training thread, and one encoding on the writer's).
#: Memory: the symbols, payloads and GraphDefs of at most _KEEP nets (a ResNet-50's: ~2 MB)
_CAPTURED: List[_Captured] = []
_KEEP = 4
_captured_lock = threading.Lock()


def _forget_lock() -> None:  # a forked child: another thread of the parent may have held it
    global _captured_lock
    _captured_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_lock)


def _captured(net: Any, sym: Any) -> Optional[GraphPayload]:
    with _captured_lock:
        for c in _CAPTURED:
            if c.sym is sym and c.net() is net:
                return c.payload
    return None


def _keep(net: Any, sym: Any, payload: GraphPayload) -> None:
    with _captured_lock:
        _CAPTURED[:] = [c for c in _CAPTURED if c.net() is not None and c.net() is not net][-(_KEEP - 1):]
        _CAPTURED.append(_Captured(net, sym, payload))


def built_before(payload: GraphPayload) -> Optional[bytes]:
    """The ``GraphDef`` of ``payload`` if :func:`build_graph` made it for an earlier writer."""
    with _captured_lock:
        for c in _CAPTURED:
            if c.payload is payload:
                return c.built
    return None


def keep_built(payload: GraphPayload, graph_def: bytes) -> None:
    """Keep ``build_graph(payload)`` for the next writer of the same net's graph."""
    with _captured_lock:
        for c in _CAPTURED:
            if c.payload is payload:
                c.built = graph_def


# ---------------------------------------------------------------- caller thread
def capture_graph(net: Any, *, input_shapes: Any = None) -> GraphPayload:
    """Take the graph of a hybridized, already-run Gluon ``HybridBlock`` or of a ``Symbol``.

    ``input_shapes`` gives the data inputs' shapes so that every node's output
    shape can be inferred: a mapping ``{input name: shape}``, a list of shapes
    in input order, or one shape for a single input. MXNet does not keep the
    shapes of the last forward pass, so without it only the shapes that follow
    from the parameters are recorded.

    A block's graph without ``input_shapes`` is taken once for the same net and the same
    cached graph (MXNet makes a new one when the net is hybridized again, changes or is cast):
    a later call returns the same payload.
    """
    import mxnet as mx  # lazily: the writer works without MXNet

    if isinstance(net, mx.sym.Symbol):
        sym, data, scopes, params = net, None, None, None
    elif isinstance(net, mx.gluon.HybridBlock):
        sym, data = _block_graph(net)
        if input_shapes is None:
            before = _captured(net, sym)
            if before is not None:
                return before
            payload = _capture(sym, data, _block_scopes(net), _block_params(net), None)
            _keep(net, sym, payload)
            return payload
        scopes, params = _block_scopes(net), _block_params(net)
    elif isinstance(net, mx.gluon.Block):
        raise TypeError(f"net must be a HybridBlock to have a graph, got the Block "
                        f"{type(net).__name__}; build it from gluon HybridBlocks, then {_NEEDS_RUN}")
    else:
        raise TypeError(f"net must be a hybridized Gluon HybridBlock or an MXNet Symbol, "
                        f"got {describe(net)}")
    return _capture(sym, data, scopes, params, input_shapes)


def _capture(sym: Any, data: Optional[List[str]], scopes: Any, params: Optional[Dict[str, Any]],
             input_shapes: Any) -> GraphPayload:
    if scopes is not None:
        scopes = tuple(sorted(scopes, key=lambda s: -len(s[0])))
    arg_names = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    if data is None:  # a bare Symbol: tell data from parameters by name and attributes
        attrs = sym.attr_dict()
        data = [n for n in arg_names if not _looks_like_param(n, attrs.get(n, {}))]
    data_set = frozenset(data)
    param_set = frozenset(n for n in arg_names + aux_names if n not in data_set)

    known: Dict[str, Shape] = {}
    if params is not None:
        for name in param_set:
            p = params.get(name)
            if p is not None and p.shape is not None and all(d > 0 for d in p.shape):
                known[name] = tuple(p.shape)
    known.update(_check_input_shapes(input_shapes, list(data)))
    return GraphPayload(sym.tojson(), scopes, data_set, param_set, _infer_shapes(sym, known))


def _block_graph(net: Any) -> Tuple[Any, List[str]]:
    import mxnet as mx

    # a SymbolBlock holds its graph from the start; any other block builds it when it
    # first runs hybridized
    if not isinstance(net, mx.gluon.SymbolBlock) and not getattr(net, "_active", False):
        raise ValueError(f"net {type(net).__name__} is not hybridized: {_NEEDS_RUN}")
    graph = getattr(net, "_cached_graph", ())
    if not graph:
        raise ValueError(f"net {type(net).__name__} is hybridized but has not run yet: "
                         f"{_NEEDS_RUN}")
    inputs, sym = graph
    return sym, [s.name for s in inputs]


def _block_scopes(block: Any, parent_prefix: str = "", parent_path: str = ""):
    """``(prefix, path)`` for ``block`` and every descendant."""
    prefix = block.prefix
    short = prefix[len(parent_prefix):] if prefix.startswith(parent_prefix) else prefix
    short = short.strip("_")
    path = "/".join(p for p in (parent_path, short) if p)
    out = [(prefix, path)] if prefix else []
    for child in block._children.values():
        out += _block_scopes(child, prefix, path)
    return out


def _block_params(net: Any) -> Dict[str, Any]:
    """Every parameter of ``net`` and its descendants by name, as ``collect_params()`` gathers them
    (each block's own ``params``, its registered children's), without that method's look through
    every attribute of every block for unregistered ones: 60% of capturing a ResNet-50's graph."""
    try:
        out: Dict[str, Any] = {}
        blocks = [net]
        while blocks:
            b = blocks.pop()
            for p in b.params.values():
                out[p.name] = p
            blocks.extend(b._children.values())
        return out
    except (AttributeError, TypeError):  # a block of another make: MXNet's own walk
        return {p.name: p for p in net.collect_params().values()}


def _output_names(internals: Any, count: int) -> List[str]:
    """The node name of each of ``internals``' ``count`` outputs. ``internals[i].name`` reads every
    output's name again for its bounds check, for each ``i``: quadratic (4 ms for a ResNet-50's 474
    outputs); here three calls into MXNet an output."""
    import ctypes

    from mxnet.base import _LIB, SymbolHandle, check_call, py_str

    names: List[str] = []
    name, ok = ctypes.c_char_p(), ctypes.c_int()
    for i in range(count):
        out = SymbolHandle()
        check_call(_LIB.MXSymbolGetOutput(internals.handle, ctypes.c_uint(i), ctypes.byref(out)))
        try:
            check_call(_LIB.MXSymbolGetName(out, ctypes.byref(name), ctypes.byref(ok)))
            names.append(py_str(name.value) if ok.value else "")
        finally:
            check_call(_LIB.MXSymbolFree(out))
    return names


def _looks_like_param(name: str, attrs: Mapping[str, str]) -> bool:
    return name.endswith(_PARAM_SUFFIXES) or any(a in attrs for a in _PARAM_ATTRS)


def _check_input_shapes(input_shapes: Any, data: List[str]) -> Dict[str, Shape]:
    if input_shapes is None:
        return {}
    msg = (f"input_shapes must be a shape, a list of shapes (one per input {data}) or a dict "
           f"from input name to shape, got {describe(input_shapes)}")
    if isinstance(input_shapes, Mapping):
        items = list(input_shapes.items())
        unknown = [k for k, _ in items if k not in data]
        if unknown:
            raise ValueError(f"input_shapes names {unknown} that are not inputs of net; "
                             f"its inputs are {data}")
    elif not isinstance(input_shapes, (list, tuple)):
        raise TypeError(msg)
    elif input_shapes and all(is_int(d) for d in input_shapes):  # ints: one shape (its dims checked below)
        items = list(zip(data[:1], [input_shapes]))
        if len(data) != 1:
            raise ValueError(f"input_shapes is one shape but net has {len(data)} inputs {data}")
    else:
        if len(input_shapes) != len(data):
            raise ValueError(f"input_shapes has {len(input_shapes)} shapes but net has "
                             f"{len(data)} inputs {data}")
        items = list(zip(data, input_shapes))
    out = {}
    for k, shp in items:
        if not isinstance(shp, (list, tuple)) or not all(is_int(d) for d in shp):
            raise TypeError(f"{msg}: the shape of {k!r} is {describe(shp)}")
        if not shp or not all(_is_dim(d) for d in shp):  # ints, but not positive sizes
            raise ValueError(f"{msg}: the shape of {k!r} is {describe(shp)}")
        out[k] = tuple(int(d) for d in shp)
    return out


def _is_dim(d: Any) -> bool:
    return is_int(d) and d > 0


def _infer_shapes(sym: Any, known: Dict[str, Shape]) -> Dict[str, Tuple[Shape, ...]]:
    """Every node's output shapes that MXNet can infer from ``known``; ``-1`` for unknown dims."""
    internals = sym.get_internals()
    try:
        _, out_shapes, _ = internals.infer_shape_partial(**known)
    except Exception:  # inconsistent shapes: record the graph without them
        return {}
    if out_shapes is None:
        return {}
    grouped: Dict[str, List[Optional[Shape]]] = {}
    for name, shp in zip(_output_names(internals, len(out_shapes)), out_shapes):
        # an unknown shape is () in MXNet's legacy shape semantics, an unknown dim 0
        grouped.setdefault(name, []).append(
            tuple(d if d > 0 else -1 for d in shp) if shp else None)
    return {k: cast("Tuple[Shape, ...]", tuple(v))  # no None: those with one are left out
            for k, v in grouped.items() if all(s is not None for s in v)}


# ---------------------------------------------------------------- worker
def build_graph(payload: GraphPayload) -> bytes:
    """The encoded ``GraphDef`` of a captured graph."""
    graph = json.loads(payload.symbol_json)
    nodes = graph["nodes"]
    ops = [n["op"] for n in nodes]
    raw = [n["name"] for n in nodes]
    names = scoped_names(raw, ops, [[e[0] for e in n.get("inputs", [])] for n in nodes],
                         payload.scopes)
    counts: Dict[str, int] = {}
    for n in raw:
        counts[n] = counts.get(n, 0) + 1

    encoded = []
    for i, node in enumerate(nodes):
        name = raw[i]
        attrs = dict(node.get("attrs") or node.get("attr") or node.get("param") or {})
        shapes = payload.shapes.get(name) if counts[name] == 1 else None
        if ops[i] == "null":
            op = "Placeholder" if name in payload.data_names else "Variable"
            if shapes:
                attrs.pop("__shape__", None)  # may be stale, e.g. (10, 0) before deferred init
        else:
            op = ops[i]
        values = {k: _proto.attr_value(str(v)) for k, v in attrs.items() if k != "_output_shapes"}
        if shapes:
            values["_output_shapes"] = _proto.attr_shapes(shapes)
        inputs = [names[e[0]] + (f":{e[1]}" if e[1] else "") for e in node.get("inputs", [])]
        encoded.append(_proto.node_def(names[i], op, inputs, values))
    return _proto.graph_def(encoded)

