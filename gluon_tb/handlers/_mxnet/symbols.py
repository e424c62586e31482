"""Looking inside a Module's symbol: find a layer, and compute its output for some inputs.

The Module counterpart of :mod:`gluon_tb.handlers._mxnet.blocks` (which works on Gluon blocks). A
layer is a node of the symbol, named as in ``mx.sym.Convolution(..., name="conv1")``; its
output is ``symbol.get_internals()["conv1_output"]``.

:class:`SymbolProbe` binds a sub-graph of the symbol (up to the chosen layers) to the
parameters it is given (``Module.get_params()``: the module's own host copies, refreshed at
each epoch end) and to the sample inputs, and runs it forward in inference mode. That only
queues work on MXNet's engine; the outputs are NDArrays for the writer to read on its thread.
The training executors are never touched.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...writer._common.checks import check_name

#: Operators that turn the network's output into a loss (their first input is the prediction).
LOSS_OPS = frozenset({"SoftmaxOutput", "Softmax", "LinearRegressionOutput", "LogisticRegressionOutput",
                      "MAERegressionOutput", "SVMOutput", "MakeLoss", "make_loss"})


def _graph(symbol: Any) -> Dict[str, Any]:
    return json.loads(symbol.tojson())


def graph_symbol(module: Any) -> Any:
    """The symbol a module's graph shows: a ``BucketingModule``'s default bucket (the network it
    was bound with, whatever bucket the first batch used), else ``module.symbol``; None without one."""
    buckets = getattr(module, "_buckets", None)  # BucketingModule keeps its Modules by bucket key
    if isinstance(buckets, dict):
        default = buckets.get(getattr(module, "_default_bucket_key", None))
        if default is not None:
            return default.symbol
    return getattr(module, "symbol", None)


def op_of(symbol: Any) -> str:
    """The operator of the (first) head of ``symbol``; ``"null"`` for a variable."""
    g = _graph(symbol)
    return g["nodes"][g["heads"][0][0]]["op"]


def layers(symbol: Any, op: Optional[str] = None) -> List[str]:
    """Names of the symbol's operator nodes (of operator ``op``), in topological order."""
    return [n["name"] for n in _graph(symbol)["nodes"] if n["op"] != "null" and (op is None or n["op"] == op)]


def layer_output(symbol: Any, name: str, what: str = "layer") -> Any:
    """The output of layer ``name`` (``"fc2"`` or ``"fc2_output"``) of ``symbol``."""
    check_name(name, what, "a non-empty layer name (str)")
    internals = symbol.get_internals()
    outs = internals.list_outputs()
    for key in (name, f"{name}_output"):
        if key in outs and not key.endswith(("_weight", "_bias")) and key not in symbol.list_arguments():
            return internals[key]
    raise ValueError(f"{what} {name!r} is not a layer of the symbol; its layers are {', '.join(layers(symbol))}")


def conv_layer(symbol: Any, name: Optional[str] = None) -> Tuple[str, str]:
    """``(layer name, weight argument name)`` of the 2-D ``Convolution`` named ``name``, or the first."""
    g = _graph(symbol)
    nodes = g["nodes"]
    convs = [n for n in nodes if n["op"] == "Convolution" and
             len(re.findall(r"\d+", n.get("attrs", {}).get("kernel", ""))) == 2]
    if name is not None:
        found = [n for n in convs if n["name"] == name]
        if not found:
            kind = next((n["op"] for n in nodes if n["name"] == name), None)
            got = f"a {kind}" if kind else "not a layer of the symbol"
            raise ValueError(f"conv_filters must name a 2-D Convolution of the symbol "
                             f"({', '.join(n['name'] for n in convs) or 'it has none'}), got {name!r} ({got})")
        node = found[0]
    elif convs:
        node = convs[0]
    else:
        raise ValueError("conv_filters: the symbol has no 2-D Convolution layer")
    return node["name"], nodes[node["inputs"][1][0]]["name"]


def classifier_input(symbol: Any) -> Tuple[Any, Any]:
    """``(features, prediction)``: the input of the layer that feeds the loss output (the layer
    before the classifier), and that layer's output (the prediction before the loss)."""
    out = symbol[0] if len(symbol.list_outputs()) > 1 else symbol
    pred = out.get_children()[0] if op_of(out) in LOSS_OPS else out
    kids = pred.get_children()
    if kids is None or op_of(kids[0]) == "null":
        raise ValueError("the layer before the classifier cannot be found (the prediction layer "
                         "reads the input directly); name a layer: Embeddings(layer=...)")
    return kids[0], pred


class SymbolProbe:
    """``probe(inputs, arg_params, aux_params) -> [NDArray]``: the outputs of ``symbols`` (Symbols of
    one graph) for ``inputs`` (``{data name: NDArray}``), computed on the CPU, inference mode."""

    def __init__(self, symbols: List[Any]) -> None:
        import mxnet as mx

        self.symbol = mx.sym.Group(list(symbols)) if len(symbols) > 1 else symbols[0]

    def __call__(self, inputs: Mapping[str, Any], arg_params: Mapping[str, Any],
                 aux_params: Optional[Mapping[str, Any]] = None) -> List[Any]:
        import mxnet as mx

        cpu = mx.cpu()
        args = {}
        for n in self.symbol.list_arguments():
            v = inputs.get(n, arg_params.get(n))
            if v is None:
                raise ValueError(f"the probe needs {n!r}, which is neither an input "
                                 f"({', '.join(inputs)}) nor a parameter")
            args[n] = v.as_in_context(cpu)
        aux = {n: (aux_params or {})[n].as_in_context(cpu) for n in self.symbol.list_auxiliary_states()}
        # bound per call: an executor kept across epochs can go on using MKL-DNN's cached copy
        # of the previous epoch's weights although get_params() rewrote the arrays in place
        exe = self.symbol.bind(cpu, args=args, aux_states=aux, grad_req="null")
        return exe.forward(is_train=False)

    def close(self) -> None:
        """Nothing to release (the executor is bound per call); for the Projector's interface."""
