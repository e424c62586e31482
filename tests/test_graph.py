"""The graph summary: capture_graph/build_graph, read back with TensorBoard's protos and graphs plugin."""
from __future__ import annotations

import os
import time

import pytest

mx = pytest.importorskip("mxnet")
from mxnet.gluon import nn  # noqa: E402
from tensorboard.compat.proto import graph_pb2  # noqa: E402

from gluon_tb.writer import _proto  # noqa: E402
from gluon_tb.writer._graph import build_graph, capture_graph  # noqa: E402
from gluon_tb.writer._record import frame_many  # noqa: E402

P = "net"  # scope of the test net (its prefix is "net_")


def make_net(hybridize=True, run=True):
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(nn.Conv2D(4, 3), nn.BatchNorm(), nn.Activation("relu"), nn.Flatten(),
                nn.Dense(10))
    net.initialize()
    if hybridize:
        net.hybridize()
    if run:
        net(mx.nd.ones((2, 3, 8, 8)))
    return net


@pytest.fixture(scope="module")
def net():
    return make_net()


def parse(payload) -> graph_pb2.GraphDef:
    return graph_pb2.GraphDef.FromString(build_graph(payload))


def by_name(graph):
    return {n.name: n for n in graph.node}


def shapes(node):
    return [[d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]


def write_graph(logdir, graph_bytes, run="."):
    """Write one graph event into a fresh event file under ``logdir/run``."""
    d = os.path.join(logdir, run)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"events.out.tfevents.{int(time.time()):010d}.test.{os.getpid()}.0")
    records = [_proto.event(time.time(), 0, file_version="brain.Event:2"),
               _proto.event(time.time(), 0, graph_def=graph_bytes)]
    with open(path, "wb") as f:
        f.write(frame_many(records))
    return path


# ---------------------------------------------------------------- a Gluon block
NET_NODES = {
    "data": "Placeholder",
    f"{P}/conv0/weight": "Variable",
    f"{P}/conv0/bias": "Variable",
    f"{P}/conv0/fwd": "Convolution",
    f"{P}/batchnorm0/gamma": "Variable",
    f"{P}/batchnorm0/beta": "Variable",
    f"{P}/batchnorm0/running_mean": "Variable",
    f"{P}/batchnorm0/running_var": "Variable",
    f"{P}/batchnorm0/fwd": "BatchNorm",
    f"{P}/relu0/fwd": "Activation",
    f"{P}/flatten0/flatten0": "Flatten",
    f"{P}/dense0/weight": "Variable",
    f"{P}/dense0/bias": "Variable",
    f"{P}/dense0/fwd": "FullyConnected",
}


def test_block_nodes_ops_and_edges(net):
    nodes = by_name(parse(capture_graph(net)))
    assert {k: n.op for k, n in nodes.items()} == NET_NODES
    assert list(nodes[f"{P}/conv0/fwd"].input) == ["data", f"{P}/conv0/weight", f"{P}/conv0/bias"]
    assert list(nodes[f"{P}/batchnorm0/fwd"].input) == [
        f"{P}/conv0/fwd", f"{P}/batchnorm0/gamma", f"{P}/batchnorm0/beta",
        f"{P}/batchnorm0/running_mean", f"{P}/batchnorm0/running_var"]
    assert list(nodes[f"{P}/relu0/fwd"].input) == [f"{P}/batchnorm0/fwd"]
    assert list(nodes[f"{P}/flatten0/flatten0"].input) == [f"{P}/relu0/fwd"]
    assert list(nodes[f"{P}/dense0/fwd"].input) == [
        f"{P}/flatten0/flatten0", f"{P}/dense0/weight", f"{P}/dense0/bias"]
    every_input = {i for n in nodes.values() for i in n.input}
    assert every_input <= set(nodes)


def test_block_attrs_are_strings(net):
    nodes = by_name(parse(capture_graph(net)))
    dense = nodes[f"{P}/dense0/fwd"].attr
    assert dense["num_hidden"].s == b"10"
    assert dense["flatten"].s == b"True"
    assert nodes[f"{P}/relu0/fwd"].attr["act_type"].s == b"relu"
    assert nodes[f"{P}/conv0/fwd"].attr["kernel"].s == b"(3, 3)"


def test_block_output_shapes_with_input_shapes(net):
    nodes = by_name(parse(capture_graph(net, input_shapes=[(2, 3, 8, 8)])))
    assert shapes(nodes["data"]) == [[2, 3, 8, 8]]
    assert shapes(nodes[f"{P}/conv0/fwd"]) == [[2, 4, 6, 6]]
    assert shapes(nodes[f"{P}/flatten0/flatten0"]) == [[2, 144]]
    assert shapes(nodes[f"{P}/dense0/fwd"]) == [[2, 10]]
    assert shapes(nodes[f"{P}/dense0/weight"]) == [[10, 144]]
    # a stale "__shape__" (10, 0) from deferred initialisation is not kept
    assert "__shape__" not in nodes[f"{P}/dense0/weight"].attr


def test_block_input_shapes_forms_agree(net):
    a = build_graph(capture_graph(net, input_shapes=(2, 3, 8, 8)))
    b = build_graph(capture_graph(net, input_shapes={"data": (2, 3, 8, 8)}))
    c = build_graph(capture_graph(net, input_shapes=[[2, 3, 8, 8]]))
    assert a == b == c


def test_block_without_input_shapes_has_parameter_shapes_only(net):
    nodes = by_name(parse(capture_graph(net)))
    assert shapes(nodes[f"{P}/dense0/weight"]) == [[10, 144]]
    assert "_output_shapes" not in nodes[f"{P}/dense0/fwd"].attr
    assert "_output_shapes" not in nodes["data"].attr


def test_nested_blocks_and_block_outside_name_scope():
    class Head(nn.HybridBlock):
        def __init__(self, **kw):
            super().__init__(**kw)
            with self.name_scope():
                self.fc = nn.Dense(3)

        def hybrid_forward(self, F, x):
            return F.relu(self.fc(x))

    net = nn.HybridSequential(prefix="top_")
    with net.name_scope():
        net.add(Head(prefix="head_"))
    net.add(nn.Dense(2, prefix="out_"))  # prefix not under "top_"
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 4)))
    names = set(by_name(parse(capture_graph(net))))
    assert names == {"data", "top/head/dense0/weight", "top/head/dense0/bias",
                     "top/head/dense0/fwd", "top/head/relu0",
                     "top/out/weight", "top/out/bias", "top/out/fwd"}


# ---------------------------------------------------------------- a bare Symbol
def make_symbol():
    data = mx.sym.var("data")
    parts = mx.sym.split(data, num_outputs=3, axis=1, name="split0")
    fc1 = mx.sym.FullyConnected(parts[1], num_hidden=2, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    add = mx.sym.elemwise_add(act, parts[2], name="add0")
    return mx.sym.SoftmaxOutput(add, name="softmax")


def test_symbol_nodes_scopes_and_multi_output_edges():
    nodes = by_name(parse(capture_graph(make_symbol())))
    assert {k: n.op for k, n in nodes.items()} == {
        "data": "Placeholder",
        "split0": "SliceChannel",
        "fc1/weight": "Variable",
        "fc1/bias": "Variable",
        "fc1/fc1": "FullyConnected",
        "relu1": "Activation",
        "add0": "elemwise_add",
        "softmax/label": "Placeholder",
        "softmax/softmax": "SoftmaxOutput",
    }
    assert list(nodes["fc1/fc1"].input) == ["split0:1", "fc1/weight", "fc1/bias"]
    assert list(nodes["add0"].input) == ["relu1", "split0:2"]
    assert list(nodes["softmax/softmax"].input) == ["add0", "softmax/label"]


def test_symbol_shapes_of_multi_output_node():
    nodes = by_name(parse(capture_graph(make_symbol(), input_shapes={"data": (4, 6)})))
    assert shapes(nodes["split0"]) == [[4, 2], [4, 2], [4, 2]]
    assert shapes(nodes["fc1/fc1"]) == [[4, 2]]
    assert shapes(nodes["softmax/label"]) == [[4]]


def test_symbol_with_auxiliary_states():
    sym = mx.sym.BatchNorm(mx.sym.var("x"), name="bn", output_mean_var=True)
    sym = mx.sym.Group([sym[0], sym[1]])
    nodes = by_name(parse(capture_graph(sym, input_shapes=(5, 3))))
    assert {k: n.op for k, n in nodes.items()} == {
        "x": "Placeholder", "bn/gamma": "Variable", "bn/beta": "Variable",
        "bn/moving_mean": "Variable", "bn/moving_var": "Variable", "bn/bn": "BatchNorm"}
    assert shapes(nodes["bn/bn"]) == [[5, 3], [3], [3]]


def test_inconsistent_input_shapes_leave_shapes_out():
    nodes = by_name(parse(capture_graph(make_symbol(), input_shapes={"data": (4, 5)})))
    assert all("_output_shapes" not in n.attr for n in nodes.values())


# ---------------------------------------------------------------- TensorBoard reads it
def test_graphs_plugin_serves_the_graph(tmp_path, net):
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.graph import graphs_plugin

    from readback import multiplexer

    write_graph(str(tmp_path), build_graph(capture_graph(net, input_shapes=[(2, 3, 8, 8)])))
    mux = multiplexer(str(tmp_path))
    assert set(by_name(mux.Graph("."))) == set(NET_NODES)

    provider = data_provider.MultiplexerDataProvider(mux, str(tmp_path))
    plugin = graphs_plugin.GraphsPlugin(base_plugin.TBContext(data_provider=provider,
                                                              logdir=str(tmp_path)))
    ctx = context.RequestContext()
    assert plugin.info_impl(ctx, "")["."]["run_graph"] is True
    pbtxt, mime = plugin.graph_impl(ctx, ".", None, False, "")
    assert mime == "text/x-protobuf"
    assert f'name: "{P}/dense0/fwd"' in pbtxt
    assert 'op: "FullyConnected"' in pbtxt


# ---------------------------------------------------------------- bad input
def test_not_hybridized_block_is_refused():
    with pytest.raises(ValueError, match=r"net.hybridize\(\).*forward"):
        capture_graph(make_net(hybridize=False))


def test_hybridized_block_that_never_ran_is_refused():
    with pytest.raises(ValueError, match=r"has not run yet.*net.hybridize\(\)"):
        capture_graph(make_net(run=False))


def test_plain_block_is_refused():
    class Plain(nn.Block):
        def forward(self, x):
            return x

    with pytest.raises(TypeError, match="net must be a HybridBlock"):
        capture_graph(Plain())


@pytest.mark.parametrize("bad", [3, "net", None, [1, 2]])
def test_other_objects_are_refused(bad):
    with pytest.raises(TypeError, match="net must be a hybridized Gluon HybridBlock or an MXNet "
                                        "Symbol, got"):
        capture_graph(bad)


@pytest.mark.parametrize("shapes_arg, exc, msg", [
    ({"image": (1, 3, 8, 8)}, ValueError, "not inputs of net"),
    ([(1, 3, 8, 8), (1, 3)], ValueError, "has 2 shapes but net has 1 inputs"),
    ("1x3", TypeError, "input_shapes must be"),
    ([(1, -3)], TypeError, "input_shapes must be"),
])
def test_bad_input_shapes_are_refused(net, shapes_arg, exc, msg):
    with pytest.raises(exc, match=msg):
        capture_graph(net, input_shapes=shapes_arg)
