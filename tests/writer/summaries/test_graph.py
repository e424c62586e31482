"""The graph: SummaryWriter.add_graph, read back with TensorBoard's reader and graphs plugin."""
from __future__ import annotations

import json

import pytest

mx = pytest.importorskip("mxnet")
from mxnet.gluon import nn  # noqa: E402

from readback import event_files, multiplexer, raw_events  # noqa: E402

from gluon_tb import SummaryWriter  # noqa: E402

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


def logged(logdir, model, input_shapes=None):
    """``add_graph(model, input_shapes)`` in a fresh writer: the GraphDef TensorBoard's reader returns."""
    with SummaryWriter(str(logdir)) as w:
        w.add_graph(model, input_shapes=input_shapes)
    return multiplexer(str(logdir)).Graph(".")


def graph_bytes(logdir, model, input_shapes=None) -> bytes:
    """``add_graph(model, input_shapes)`` in a fresh writer: the GraphDef's bytes as written."""
    with SummaryWriter(str(logdir)) as w:
        w.add_graph(model, input_shapes=input_shapes)
    (path,) = event_files(str(logdir))
    (graph,) = [e.graph_def for e in raw_events(path) if e.HasField("graph_def")]
    return graph


def by_name(graph):
    return {n.name: n for n in graph.node}


def shapes(node):
    return [[d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]


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


def test_block_nodes_ops_and_edges(tmp_path, net):
    nodes = by_name(logged(tmp_path, net))
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


def test_block_attrs_are_strings(tmp_path, net):
    nodes = by_name(logged(tmp_path, net))
    dense = nodes[f"{P}/dense0/fwd"].attr
    assert dense["num_hidden"].s == b"10"
    assert dense["flatten"].s == b"True"
    assert nodes[f"{P}/relu0/fwd"].attr["act_type"].s == b"relu"
    assert nodes[f"{P}/conv0/fwd"].attr["kernel"].s == b"(3, 3)"


def test_block_output_shapes_with_input_shapes(tmp_path, net):
    nodes = by_name(logged(tmp_path, net, input_shapes=[(2, 3, 8, 8)]))
    assert shapes(nodes["data"]) == [[2, 3, 8, 8]]
    assert shapes(nodes[f"{P}/conv0/fwd"]) == [[2, 4, 6, 6]]
    assert shapes(nodes[f"{P}/flatten0/flatten0"]) == [[2, 144]]
    assert shapes(nodes[f"{P}/dense0/fwd"]) == [[2, 10]]
    assert shapes(nodes[f"{P}/dense0/weight"]) == [[10, 144]]
    # a stale "__shape__" (10, 0) from deferred initialisation is not kept
    assert "__shape__" not in nodes[f"{P}/dense0/weight"].attr


def test_block_input_shapes_forms_agree(tmp_path, net):
    a = graph_bytes(tmp_path / "a", net, input_shapes=(2, 3, 8, 8))
    b = graph_bytes(tmp_path / "b", net, input_shapes={"data": (2, 3, 8, 8)})
    c = graph_bytes(tmp_path / "c", net, input_shapes=[[2, 3, 8, 8]])
    assert a == b == c


def test_block_without_input_shapes_has_parameter_shapes_only(tmp_path, net):
    nodes = by_name(logged(tmp_path, net))
    assert shapes(nodes[f"{P}/dense0/weight"]) == [[10, 144]]
    assert "_output_shapes" not in nodes[f"{P}/dense0/fwd"].attr
    assert "_output_shapes" not in nodes["data"].attr


def test_nested_blocks_and_block_outside_name_scope(tmp_path):
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
    names = set(by_name(logged(tmp_path, net)))
    assert names == {"data", "top/head/dense0/weight", "top/head/dense0/bias",
                     "top/head/dense0/fwd", "top/head/relu0",
                     "top/out/weight", "top/out/bias", "top/out/fwd"}


def test_capture_reads_the_same_names_and_parameters_as_mxnet():
    """``capture_graph``'s own walks (each output's node name by handle; each block's parameters
    without ``collect_params``'s look at every attribute) give exactly what MXNet's ways give: on
    multi-output and auxiliary-state nodes, nested blocks, a block outside its parent's name scope
    and a parameter shared by two blocks."""
    from mxnet.gluon.model_zoo import vision

    from gluon_tb.writer._summaries.graph import _block_params, _output_names

    shared = nn.Dense(4, in_units=4, prefix="shared_")
    twin = nn.Dense(4, in_units=4, prefix="twin_", params=shared.collect_params())
    outer = nn.HybridSequential(prefix="outer_")
    with outer.name_scope():
        outer.add(nn.Dense(4, in_units=3), shared, nn.BatchNorm(), twin)
    outer.add(nn.Dense(2, prefix="loose_"))
    zoo_net = vision.squeezenet1_0()
    for net, shape in ((outer, (1, 3)), (zoo_net, (1, 3, 224, 224))):
        net.initialize()
        net.hybridize()
        net(mx.nd.ones(shape))
    nets = [outer, make_net(), zoo_net]
    syms = [n._cached_graph[1] for n in nets] + [make_symbol(), mx.sym.BatchNorm(
        mx.sym.var("x"), name="bn", output_mean_var=True)]
    for sym in syms:
        internals = sym.get_internals()
        n = len(internals.list_outputs())
        assert _output_names(internals, n) == [internals[i].name for i in range(n)]
    for net in nets:
        assert _block_params(net) == {p.name: p for p in net.collect_params().values()}
    assert "shared_weight" in _block_params(outer) and "twin_weight" not in _block_params(outer)


# ---------------------------------------------------------------- a bare Symbol
def make_symbol():
    data = mx.sym.var("data")
    parts = mx.sym.split(data, num_outputs=3, axis=1, name="split0")
    fc1 = mx.sym.FullyConnected(parts[1], num_hidden=2, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    add = mx.sym.elemwise_add(act, parts[2], name="add0")
    return mx.sym.SoftmaxOutput(add, name="softmax")


def test_symbol_nodes_scopes_and_multi_output_edges(tmp_path):
    nodes = by_name(logged(tmp_path, make_symbol()))
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


def test_symbol_shapes_of_multi_output_node(tmp_path):
    nodes = by_name(logged(tmp_path, make_symbol(), input_shapes={"data": (4, 6)}))
    assert shapes(nodes["split0"]) == [[4, 2], [4, 2], [4, 2]]
    assert shapes(nodes["fc1/fc1"]) == [[4, 2]]
    assert shapes(nodes["softmax/label"]) == [[4]]


def test_symbol_with_auxiliary_states(tmp_path):
    sym = mx.sym.BatchNorm(mx.sym.var("x"), name="bn", output_mean_var=True)
    sym = mx.sym.Group([sym[0], sym[1]])
    nodes = by_name(logged(tmp_path, sym, input_shapes=(5, 3)))
    assert {k: n.op for k, n in nodes.items()} == {
        "x": "Placeholder", "bn/gamma": "Variable", "bn/beta": "Variable",
        "bn/moving_mean": "Variable", "bn/moving_var": "Variable", "bn/bn": "BatchNorm"}
    assert shapes(nodes["bn/bn"]) == [[5, 3], [3], [3]]


def test_inconsistent_input_shapes_leave_shapes_out(tmp_path):
    nodes = by_name(logged(tmp_path, make_symbol(), input_shapes={"data": (4, 5)}))
    assert all("_output_shapes" not in n.attr for n in nodes.values())


# ---------------------------------------------------------------- model-zoo symbols
# Built here with the naming of the MXNet 1.x example symbols (image-classification/symbols:
# inception-bn.py, vgg.py, resnet.py), since the published *-symbol.json files cannot be
# downloaded in tests. Small channel counts: only the names and edges matter.
S = mx.sym


def conv_factory(x, nf, kernel, stride=(1, 1), pad=(0, 0), name="", suffix=""):
    x = S.Convolution(x, num_filter=nf, kernel=kernel, stride=stride, pad=pad,
                      name=f"conv_{name}{suffix}")
    x = S.BatchNorm(x, fix_gamma=False, name=f"bn_{name}{suffix}")
    return S.Activation(x, act_type="relu", name=f"relu_{name}{suffix}")


def inception_unit(x, name, pool=None, stride=(1, 1)):
    """InceptionFactoryA (``pool`` is "avg" or "max") or, with ``pool=None``, InceptionFactoryB."""
    same = dict(kernel=(3, 3), pad=(1, 1))
    a = conv_factory(x, 4, (1, 1), name=f"{name}_3x3", suffix="_reduce")
    a = conv_factory(a, 4, stride=stride, name=f"{name}_3x3", **same)
    b = conv_factory(x, 4, (1, 1), name=f"{name}_double_3x3", suffix="_reduce")
    b = conv_factory(b, 4, name=f"{name}_double_3x3_0", **same)
    b = conv_factory(b, 4, stride=stride, name=f"{name}_double_3x3_1", **same)
    p = S.Pooling(x, stride=stride, pool_type=pool or "max",
                  name=f"{pool}_pool_{name}_pool" if pool else f"max_pool_{name}_pool", **same)
    if pool is None:
        return S.Concat(a, b, p, name=f"ch_concat_{name}_chconcat")
    one = conv_factory(x, 4, (1, 1), name=f"{name}_1x1")
    proj = conv_factory(p, 4, (1, 1), name=f"{name}_proj")
    return S.Concat(one, a, b, proj, name=f"ch_concat_{name}_chconcat")


def inception_bn():
    x = conv_factory(S.var("data"), 4, (7, 7), stride=(2, 2), pad=(3, 3), name="1")
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_1")
    x = conv_factory(x, 4, (1, 1), name="2_red")
    x = conv_factory(x, 4, (3, 3), pad=(1, 1), name="2")
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_2")
    for unit in ("3a", "3b", "3c", "4a", "4b", "4c", "4d", "4e", "5a", "5b"):
        if unit in ("3c", "4e"):
            x = inception_unit(x, unit, stride=(2, 2))
        else:
            x = inception_unit(x, unit, pool="max" if unit == "5b" else "avg")
    x = S.Pooling(x, kernel=(7, 7), pool_type="avg", name="global_pool")
    x = S.FullyConnected(S.Flatten(x, name="flatten"), num_hidden=10, name="fc1")
    return S.SoftmaxOutput(x, name="softmax")


def vgg16():
    x = S.var("data")
    for i, n in enumerate([2, 2, 3, 3, 3], 1):
        for j in range(1, n + 1):
            x = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=4, name=f"conv{i}_{j}")
            x = S.Activation(x, act_type="relu", name=f"relu{i}_{j}")
        x = S.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name=f"pool{i}")
    x = S.Flatten(x, name="flatten")
    for k in (6, 7):
        x = S.FullyConnected(x, num_hidden=8, name=f"fc{k}")
        x = S.Dropout(S.Activation(x, act_type="relu", name=f"relu{k}"), p=0.5, name=f"drop{k}")
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=10, name="fc8"), name="softmax")


RESNET152_UNITS = (3, 8, 36, 3)


def resnet152():
    def bn(x, name):
        return S.BatchNorm(x, fix_gamma=False, eps=2e-5, name=name)

    def unit(x, nf, stride, dim_match, name):  # the bottleneck residual_unit
        act1 = S.Activation(bn(x, name + "_bn1"), act_type="relu", name=name + "_relu1")
        y = S.Convolution(act1, num_filter=nf, kernel=(1, 1), no_bias=True, name=name + "_conv1")
        y = S.Activation(bn(y, name + "_bn2"), act_type="relu", name=name + "_relu2")
        y = S.Convolution(y, num_filter=nf, kernel=(3, 3), stride=stride, pad=(1, 1),
                          no_bias=True, name=name + "_conv2")
        y = S.Activation(bn(y, name + "_bn3"), act_type="relu", name=name + "_relu3")
        y = S.Convolution(y, num_filter=nf, kernel=(1, 1), no_bias=True, name=name + "_conv3")
        short = x if dim_match else S.Convolution(act1, num_filter=nf, kernel=(1, 1), stride=stride,
                                                  no_bias=True, name=name + "_sc")
        return y + short  # named _plus<k>

    x = S.identity(S.var("data"), name="id")
    x = S.BatchNorm(x, fix_gamma=True, eps=2e-5, name="bn_data")
    x = S.Convolution(x, num_filter=4, kernel=(7, 7), stride=(2, 2), pad=(3, 3), no_bias=True,
                      name="conv0")
    x = S.Activation(bn(x, "bn0"), act_type="relu", name="relu0")
    x = S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
    for i, n in enumerate(RESNET152_UNITS, 1):
        for j in range(1, n + 1):
            stride = (2, 2) if i > 1 and j == 1 else (1, 1)
            x = unit(x, 4, stride, j > 1, f"stage{i}_unit{j}")
    x = S.Activation(bn(x, "bn1"), act_type="relu", name="relu1")
    x = S.Pooling(x, global_pool=True, kernel=(7, 7), pool_type="avg", name="pool1")
    x = S.FullyConnected(S.Flatten(x), num_hidden=10, name="fc1")
    return S.SoftmaxOutput(x, name="softmax")


def gluon_resnet18():
    # no pretrained weights: builds offline; prefix resnetv1<k>_, k counts earlier ones
    net = mx.gluon.model_zoo.vision.resnet18_v1()
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 3, 32, 32)))
    return net


def mlp():
    net = nn.HybridSequential()  # prefix hybridsequential<k>_: the k depends on the process
    with net.name_scope():
        net.add(nn.Dense(8), nn.Dense(4))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 3)))
    return net


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Each model logged with SummaryWriter.add_graph into its own run, and read back:
    run -> (the model as logged, the GraphDef TensorBoard's reader returns)."""
    resnet18, dense = gluon_resnet18(), mlp()
    with mx.name.NameManager():  # fresh counters: pooling0, _plus0 whatever ran before
        symbols = {"inception_bn": inception_bn(), "vgg16": vgg16(), "resnet152": resnet152()}
    models = {**symbols, "resnet18": resnet18, "resnet18_symbol": resnet18._cached_graph[1],
              "mlp": dense, "mlp_symbol": dense._cached_graph[1]}
    logdir = tmp_path_factory.mktemp("zoo")
    for run, model in models.items():
        with SummaryWriter(str(logdir / run)) as w:
            w.add_graph(model)
    mux = multiplexer(str(logdir))
    assert set(mux.Runs()) == set(models)
    return {run: (model, mux.Graph(run)) for run, model in models.items()}


def op_nodes(graph):
    return [n for n in graph.node if n.op not in ("Variable", "Placeholder")]


def top_groups(graph):
    """Top-level group -> how many operator nodes it holds (a bare node counts as its own)."""
    out = {}
    for n in op_nodes(graph):
        top = n.name.split("/", 1)[0]
        out[top] = out.get(top, 0) + 1
    return out


def scope(name):
    return name.rsplit("/", 1)[0] if "/" in name else ""


def op_names(sym):
    return {n["name"] for n in json.loads(sym.tojson())["nodes"] if n["op"] != "null"}


def test_symbol_part_that_mixes_operators_is_a_scope(tmp_path):
    """A prefix over layers of several kinds is a part even with one parametrised layer in it."""
    x = S.var("data")
    for b in ("block1", "block2"):
        x = S.Convolution(x, num_filter=2, kernel=(3, 3), name=f"{b}_conv")
        x = S.Pooling(S.relu(x, name=f"{b}_relu"), kernel=(2, 2), name=f"{b}_pool")
    x = S.Activation(S.Activation(x, act_type="relu", name="act_1"), act_type="relu", name="act_2")
    assert [n.name for n in logged(tmp_path, x).node] == [
        "data", "block1/conv/weight", "block1/conv/bias", "block1/conv/conv", "block1/relu",
        "block1/pool", "block2/conv/weight", "block2/conv/bias", "block2/conv/conv", "block2/relu",
        "block2/pool", "act_1", "act_2"]


@pytest.mark.parametrize("run", ["inception_bn", "vgg16", "resnet152", "resnet18",
                                 "resnet18_symbol", "mlp", "mlp_symbol"])
def test_zoo_names_unique_and_inputs_resolve(zoo, run):
    model, graph = zoo[run]
    names = [n.name for n in graph.node]
    assert len(names) == len(set(names))
    sym = model if isinstance(model, mx.sym.Symbol) else model._cached_graph[1]
    assert len(names) == len(json.loads(sym.tojson())["nodes"])
    assert {i.split(":")[0] for n in graph.node for i in n.input} <= set(names)
    # no node is also a group: TensorBoard could not draw both
    groups = {name[:i] for name in names for i, c in enumerate(name) if c == "/"}
    assert not groups & set(names)


def test_inception_bn_is_grouped_by_layer(zoo):
    model, graph = zoo["inception_bn"]
    nodes = by_name(graph)
    ops = op_nodes(graph)
    assert len(ops) == 233
    # one top-level entry per layer, named as the layer; before: 12 op-type groups, bn 69 ops
    assert set(top_groups(graph)) == op_names(model)
    assert max(top_groups(graph).values()) <= 0.05 * len(ops)
    assert {k for k in nodes if k.startswith("bn_3a_double_3x3_0/")} == {
        f"bn_3a_double_3x3_0/{p}" for p in
        ("gamma", "beta", "moving_mean", "moving_var", "bn_3a_double_3x3_0")}
    assert {k for k in nodes if k.startswith("ch_concat_3a_chconcat")} == {"ch_concat_3a_chconcat"}
    assert "avg_pool_3a_pool" in nodes and "max_pool_3c_pool" in nodes
    convs = [n for n in ops if n.op == "Convolution"]
    assert len(convs) == 69
    for conv in convs:  # weight, bias and the op share the layer's scope, and nothing else does
        layer = conv.name.split("/")[0]
        assert conv.name == f"{layer}/{layer}"
        assert list(conv.input)[1:] == [f"{layer}/weight", f"{layer}/bias"]
        assert {k for k in nodes if k.startswith(layer + "/")} == {
            conv.name, f"{layer}/weight", f"{layer}/bias"}


def test_vgg16_layers_are_not_split_at_their_index(zoo):
    model, graph = zoo["vgg16"]
    nodes = by_name(graph)
    assert set(top_groups(graph)) == op_names(model)
    for layer in ("conv1_1", "conv1_2", "conv5_3"):
        assert {k for k in nodes if k.startswith(layer + "/")} == {
            f"{layer}/weight", f"{layer}/bias", f"{layer}/{layer}"}
    assert list(nodes["conv1_2/conv1_2"].input) == ["relu1_1", "conv1_2/weight", "conv1_2/bias"]
    assert not [k for k in nodes if k.startswith(("conv1/", "relu1/"))]
    assert {"relu1_1", "pool1", "fc8/fc8", "drop7", "softmax/label"} <= set(nodes)


def test_resnet152_nests_stages_and_units(zoo):
    _, graph = zoo["resnet152"]
    nodes = by_name(graph)
    n_units = sum(RESNET152_UNITS)
    assert set(top_groups(graph)) == (
        {"id", "bn_data", "conv0", "bn0", "relu0", "pooling0", "stage1", "stage2", "stage3",
         "stage4", "bn1", "relu1", "pool1", "flatten0", "fc1", "softmax"}
        | {f"_plus{k}" for k in range(n_units)})
    assert top_groups(graph)["stage3"] == 36 * 9 + 1  # 36 x 3 x (bn, relu, conv), unit1_sc
    for name, op in {
        "stage1/unit1/bn1/gamma": "Variable",
        "stage1/unit1/bn1/moving_var": "Variable",
        "stage1/unit1/bn1/bn1": "BatchNorm",
        "stage1/unit1/relu1": "Activation",
        "stage1/unit1/conv1/weight": "Variable",
        "stage1/unit1/conv1/conv1": "Convolution",
        "stage1/unit1/sc/sc": "Convolution",
        "stage3/unit36/conv3/weight": "Variable",
        "bn_data/gamma": "Variable",  # was bn/data/gamma: bn_data is one layer
        "bn_data/bn_data": "BatchNorm",
        "conv0/conv0": "Convolution",
        "fc1/fc1": "FullyConnected",
    }.items():
        assert nodes[name].op == op, name
    assert list(nodes["stage1/unit1/conv1/conv1"].input) == [
        "stage1/unit1/relu1", "stage1/unit1/conv1/weight"]
    assert list(nodes["_plus0"].input) == ["stage1/unit1/conv3/conv3", "stage1/unit1/sc/sc"]


def test_gluon_model_nests_by_blocks_and_its_symbol_agrees(zoo):
    net, graph = zoo["resnet18"]
    p = net.prefix.rstrip("_")  # resnetv10 when it is the first in the process
    names = [n.name for n in graph.node]
    # a Symbol exported from the block gets the very same names from its names alone
    assert [n.name for n in zoo["resnet18_symbol"][1].node] == names
    nodes = by_name(graph)
    for name, op in {
        f"{p}/conv0/weight": "Variable",
        f"{p}/batchnorm0/running_mean": "Variable",
        f"{p}/relu0/fwd": "Activation",
        f"{p}/stage1/conv0/fwd": "Convolution",
        f"{p}/stage1/batchnorm0/gamma": "Variable",
        f"{p}/stage1/_plus0": "elemwise_add",
        f"{p}/stage2/conv2/fwd": "Convolution",  # the downsample of unit 1
        f"{p}/stage1/activation0": "Activation",
        f"{p}/dense0/fwd": "FullyConnected",
    }.items():
        assert nodes[name].op == op, name
    assert {n.split("/")[0] for n in names} == {"data", p}


def test_gluon_stack_of_one_kind_still_nests(zoo):
    block, symbol = zoo["mlp"][1], zoo["mlp_symbol"][1]
    p = zoo["mlp"][0].prefix.rstrip("_")
    expected = ["data"] + [f"{p}/dense{k}/{leaf}"
                           for k in (0, 1) for leaf in ("weight", "bias", "fwd")]
    assert [n.name for n in block.node] == expected
    assert [n.name for n in symbol.node] == expected


# ---------------------------------------------------------------- TensorBoard reads it
def test_graphs_plugin_serves_the_graph(tmp_path, net):
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.graph import graphs_plugin

    assert set(by_name(logged(tmp_path, net, input_shapes=[(2, 3, 8, 8)]))) == set(NET_NODES)
    mux = multiplexer(str(tmp_path))

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
def test_not_hybridized_block_is_refused(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"net.hybridize\(\).*forward"):
            w.add_graph(make_net(hybridize=False))


def test_hybridized_block_that_never_ran_is_refused(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"has not run yet.*net.hybridize\(\)"):
            w.add_graph(make_net(run=False))


def test_plain_block_is_refused(tmp_path):
    class Plain(nn.Block):
        def forward(self, x):
            return x

    with SummaryWriter(str(tmp_path)) as w, pytest.raises(TypeError, match="net must be a HybridBlock"):
        w.add_graph(Plain())


@pytest.mark.parametrize("bad", [3, "net", None, [1, 2]])
def test_other_objects_are_refused(tmp_path, bad):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(TypeError, match="net must be a hybridized Gluon HybridBlock or an MXNet "
                                            "Symbol, got"):
            w.add_graph(bad)


@pytest.mark.parametrize("shapes_arg, exc, msg", [
    ({"image": (1, 3, 8, 8)}, ValueError, "not inputs of net"),
    ([(1, 3, 8, 8), (1, 3)], ValueError, "has 2 shapes but net has 1 inputs"),
    ("1x3", TypeError, "input_shapes must be"),
    ([(1, -3)], ValueError, "input_shapes must be"),  # ints, but a negative size: a wrong value
    ([(1, 3.0)], TypeError, "input_shapes must be .*the shape of 'data' is tuple \\(1, 3.0\\)"),
    ({"data": ()}, ValueError, "input_shapes must be .*the shape of 'data' is tuple \\(\\)"),
    ((1, 0), ValueError, "input_shapes must be .*the shape of 'data' is tuple \\(1, 0\\)"),
])
def test_bad_input_shapes_are_refused(tmp_path, net, shapes_arg, exc, msg):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=msg):
        w.add_graph(net, input_shapes=shapes_arg)


# ---------------------------------------------------------------- the same net, logged again
def test_the_same_nets_graph_is_taken_once_and_written_the_same(tmp_path, monkeypatch):
    """A second writer logging the same net (a new handler, a new fit) gets the graph that was
    taken and encoded for the first: no MXNet call on the caller's thread, no encoding on the
    writer's, the same bytes. Hybridized again, the net has a new graph: taken again."""
    from gluon_tb.writer._summaries import graph as g

    net = make_net()
    first = graph_bytes(tmp_path / "a", net)
    calls = []
    monkeypatch.setattr(g, "_infer_shapes", lambda *a: calls.append("infer") or {})
    real_build = g.build_graph
    monkeypatch.setattr(g, "build_graph", lambda *a: calls.append("build") or real_build(*a))
    assert graph_bytes(tmp_path / "b", net) == first
    assert calls == []
    net.hybridize()  # a new cached graph at the next forward
    net(mx.nd.ones((2, 3, 8, 8)))
    again = graph_bytes(tmp_path / "c", net)
    assert calls == ["infer", "build"]
    assert again != first  # no parameter shapes: _infer_shapes was replaced
    other = make_net()  # another net of the same structure: its own capture
    graph_bytes(tmp_path / "d", other)
    assert calls == ["infer", "build"] * 2
