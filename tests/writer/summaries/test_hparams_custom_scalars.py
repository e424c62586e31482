"""HParams and custom-scalar layouts: SummaryWriter.add_hparams/add_custom_scalars, read back with
TensorBoard's protos and plugin backends."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard import context as tb_context
from tensorboard.backend.event_processing import data_provider
from tensorboard.plugins import base_plugin
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.custom_scalar.metadata import CONFIG_SUMMARY_TAG as CONFIG_TAG
from tensorboard.plugins.hparams import (
    api_pb2,
    backend_context,
    get_experiment,
    list_session_groups,
    plugin_data_pb2,
)
from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG, SESSION_END_INFO_TAG, SESSION_START_INFO_TAG

import readback
from gluon_tb import SummaryWriter

HP_TAGS = {EXPERIMENT_TAG, SESSION_START_INFO_TAG, SESSION_END_INFO_TAG}


# ------------------------------------------------------------ helpers
def tb_context_for(logdir):
    mux = readback.multiplexer(str(logdir))
    dp = data_provider.MultiplexerDataProvider(mux, str(logdir))
    return base_plugin.TBContext(logdir=str(logdir), data_provider=dp, multiplexer=mux,
                                 plugin_name_to_instance={})


def hparams_backend(logdir):
    """(experiment, session_groups) as the HParams dashboard's two requests return them."""
    ctx = backend_context.Context(tb_context_for(logdir))
    rc = tb_context.RequestContext()
    exp = get_experiment.Handler(rc, ctx, "", api_pb2.GetExperimentRequest()).run()
    req = json_format.Parse(
        '{"startIndex": 0, "sliceSize": 100, "allowedStatuses": ["STATUS_UNKNOWN", '
        '"STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"], "colParams": []}',
        api_pb2.ListSessionGroupsRequest())
    groups = list_session_groups.Handler(rc, ctx, "", req).run()
    return exp, groups


def pyvalue(v):
    return json_format.MessageToDict(v)


def logged_hparams(logdir, hparam_dict, metric_dict, **kwargs):
    """``add_hparams`` in a fresh writer: the ``Summary.Value`` list it wrote, in order."""
    with SummaryWriter(str(logdir)) as w:
        w.add_hparams(hparam_dict, metric_dict, **kwargs)
    return [v for _step, v in readback.summary_values(str(logdir))]


# ------------------------------------------------------------ hparams: protos
def test_hparams_values_parse_with_tensorboard_protos(tmp_path):
    before = time.time()
    values = logged_hparams(tmp_path, {"lr": 0.1, "opt": "sgd", "bn": False, "layers": 3}, {"acc": 0.9})
    after = time.time()
    assert [v.tag for v in values] == [EXPERIMENT_TAG, SESSION_START_INFO_TAG,
                                       SESSION_END_INFO_TAG, "acc"]
    for v in values[:3]:
        assert v.metadata.plugin_data.plugin_name == "hparams"
        assert v.metadata.data_class == summary_pb2.DATA_CLASS_TENSOR
    exp = plugin_data_pb2.HParamsPluginData.FromString(values[0].metadata.plugin_data.content)
    assert exp.version == 0 and exp.WhichOneof("data") == "experiment"
    assert [(h.name, h.type) for h in exp.experiment.hparam_infos] == [
        ("bn", api_pb2.DATA_TYPE_BOOL), ("layers", api_pb2.DATA_TYPE_FLOAT64),
        ("lr", api_pb2.DATA_TYPE_FLOAT64), ("opt", api_pb2.DATA_TYPE_STRING)]
    assert [(m.name.group, m.name.tag) for m in exp.experiment.metric_infos] == [("", "acc")]
    start = plugin_data_pb2.HParamsPluginData.FromString(
        values[1].metadata.plugin_data.content).session_start_info
    assert {k: pyvalue(v) for k, v in start.hparams.items()} == {
        "lr": 0.1, "opt": "sgd", "bn": False, "layers": 3.0}
    assert start.hparams["bn"].WhichOneof("kind") == "bool_value"  # False is still present
    assert before <= start.start_time_secs <= after and start.group_name == ""  # the call's time
    end = plugin_data_pb2.HParamsPluginData.FromString(
        values[2].metadata.plugin_data.content).session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS
    assert end.end_time_secs == start.start_time_secs  # logged at the end
    assert values[3].simple_value == pytest.approx(0.9)


_hp_value = st.one_of(st.text(max_size=20), st.booleans(), st.integers(-2**53, 2**53),
                      st.floats(allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=10), _hp_value, min_size=1, max_size=6))
def test_any_hparam_dict_round_trips(tmp_path_factory, hparams):
    values = logged_hparams(tmp_path_factory.mktemp("hp"), hparams, {})
    start = plugin_data_pb2.HParamsPluginData.FromString(
        values[1].metadata.plugin_data.content).session_start_info
    assert start.group_name == ""  # every run is a row of its own
    assert set(start.hparams) == set(hparams)
    for k, v in hparams.items():
        pv = start.hparams[k]
        if isinstance(v, bool):
            assert pv.WhichOneof("kind") == "bool_value" and pv.bool_value is v
        elif isinstance(v, str):
            assert pv.string_value == v
        else:
            assert pv.number_value == float(v)


def test_numpy_scalars_and_domains(tmp_path):
    values = logged_hparams(
        tmp_path, {"lr": np.float32(0.5), "n": np.int64(4), "act": "relu"}, {"m": np.float64(2.0)},
        hparam_domain_discrete={"act": ["relu", "tanh"], "n": [2, 4, 8]})
    exp = plugin_data_pb2.HParamsPluginData.FromString(
        values[0].metadata.plugin_data.content).experiment
    domains = {h.name: [pyvalue(v) for v in h.domain_discrete.values] for h in exp.hparam_infos
               if h.HasField("domain_discrete")}
    assert domains == {"act": ["relu", "tanh"], "n": [2.0, 4.0, 8.0]}


def test_option_drops_the_experiment(tmp_path):
    values = logged_hparams(tmp_path, {"a": 1}, {"m": 1.0}, experiment=False)
    assert [v.tag for v in values] == [SESSION_START_INFO_TAG, SESSION_END_INFO_TAG, "m"]
    end = plugin_data_pb2.HParamsPluginData.FromString(values[1].metadata.plugin_data.content)
    assert end.session_end_info.status == api_pb2.STATUS_SUCCESS


@pytest.mark.parametrize("args, kwargs, exc, word", [
    (([("a", 1)], {}), {}, TypeError, "hparam_dict"),
    (({1: 1}, {}), {}, TypeError, "hparam_dict"),
    (({"": 1}, {}), {}, ValueError, "hparam_dict"),
    (({"a": None}, {}), {}, TypeError, "hparam_dict"),
    (({"a": [1, 2]}, {}), {}, TypeError, "hparam_dict"),
    (({"a": 1}, None), {}, TypeError, "metric_dict"),
    (({"a": 1}, {"m": "high"}), {}, TypeError, "metric_dict"),
    (({"a": 1}, {"m": True}), {}, TypeError, "metric_dict"),
    (({"a": 1}, {3: 1.0}), {}, TypeError, "metric_dict"),
    (({"a": 1}, {}), {"hparam_domain_discrete": {"a": [2, 3]}}, ValueError, "hparam_domain_discrete"),
    (({"a": 1}, {}), {"hparam_domain_discrete": {"a": ["1"]}}, TypeError, "hparam_domain_discrete"),  # str for int
    (({"a": 1}, {}), {"hparam_domain_discrete": {"b": [1]}}, ValueError, "hparam_domain_discrete"),
])
def test_hparams_errors_name_the_argument(tmp_path, args, kwargs, exc, word):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=word):
        w.add_hparams(*args, **kwargs)


# ------------------------------------------------------------ hparams: dashboard backend
def test_dashboard_shows_the_session_in_the_callers_run(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_hparams({"lr": 0.01, "opt": "adam", "bn": True}, {"val/acc": 0.75, "loss": 0.5})
    # no extra run directory: everything is in the caller's run "."
    assert readback.tags(str(tmp_path)) == {(".", t) for t in HP_TAGS | {"val/acc", "loss"}}
    exp, groups = hparams_backend(tmp_path)
    assert {h.name for h in exp.hparam_infos} == {"lr", "opt", "bn"}
    assert {m.name.tag for m in exp.metric_infos} == {"val/acc", "loss"}
    (group,) = groups.session_groups
    assert [s.name for s in group.sessions] == ["."]
    assert {k: pyvalue(v) for k, v in group.hparams.items()} == {"lr": 0.01, "opt": "adam", "bn": True}
    assert {m.name.tag: m.value for m in group.metric_values} == {"val/acc": 0.75, "loss": 0.5}
    assert group.sessions[0].status == api_pb2.STATUS_SUCCESS


def test_metric_value_is_the_last_logged_scalar(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_scalar("val/acc", 0.1, 1)
        w.add_scalar("val/acc", 0.2, 2)
        w.add_hparams({"lr": 1.0}, {"val/acc": 0.3}, global_step=3)
        w.add_scalar("val/acc", 0.4, 4)
    _, groups = hparams_backend(tmp_path)
    (group,) = groups.session_groups
    (mv,) = group.metric_values
    assert mv.value == pytest.approx(0.4) and mv.training_step == 4


def test_several_runs_are_one_row_each(tmp_path):
    for run, lr, acc in [("run_a", 0.1, 0.5), ("run_b", 0.2, 0.7), ("run_c", 0.1, 0.9)]:
        with SummaryWriter(str(tmp_path / run)) as w:
            w.add_hparams({"lr": lr, "opt": "sgd"}, {"acc": acc}, global_step=10)
    exp, groups = hparams_backend(tmp_path)
    assert [h.name for h in exp.hparam_infos] == ["lr", "opt"]
    rows = {g.sessions[0].name: (g.hparams["lr"].number_value,
                                 {m.name.tag: round(m.value, 6) for m in g.metric_values})
            for g in groups.session_groups}
    assert rows == {"run_a": (0.1, {"acc": 0.5}), "run_b": (0.2, {"acc": 0.7}),
                    "run_c": (0.1, {"acc": 0.9})}


def test_with_the_experiment_in_every_run_one_runs_names_are_the_columns(tmp_path):
    with SummaryWriter(str(tmp_path / "r1")) as w:
        w.add_hparams({"a": 1, "b": "x"}, {"m": 3.0})
    with SummaryWriter(str(tmp_path / "r2")) as w:
        w.add_hparams({"a": 2, "c": True}, {"m": 4.0})
    exp, groups = hparams_backend(tmp_path)
    assert {h.name for h in exp.hparam_infos} in ({"a", "b"}, {"a", "c"})  # the run met first
    assert len(groups.session_groups) == 2


def test_without_experiment_tensorboard_derives_the_columns(tmp_path):
    with SummaryWriter(str(tmp_path / "r1")) as w:
        w.add_hparams({"a": 1, "b": "x"}, {"m": 3.0}, experiment=False)
    with SummaryWriter(str(tmp_path / "r2")) as w:
        w.add_hparams({"a": 2, "c": True}, {"m": 4.0}, experiment=False)
    with pytest.raises(TypeError, match="experiment must be a bool, got str 'no'"):
        SummaryWriter(str(tmp_path / "r3")).add_hparams({"a": 1}, {"m": 1.0}, experiment="no")
    exp, groups = hparams_backend(tmp_path)
    assert {h.name for h in exp.hparam_infos} == {"a", "b", "c"}
    assert {m.name.tag for m in exp.metric_infos} == {"m"}
    assert len(groups.session_groups) == 2


# ------------------------------------------------------------ custom scalars
LAYOUT = {
    "Losses": {"loss": ["Multiline", ["loss/train", "loss/val.*"]],
               "acc band": ["Margin", ["acc/mean", "acc/lo", "acc/hi"]]},
    "Other": {"lr": ["Multiline", ["lr"]]},
}


def expected_layout():
    lay = layout_pb2.Layout()
    c = lay.category.add(title="Losses")
    c.chart.add(title="loss").multiline.tag.extend(["loss/train", "loss/val.*"])
    c.chart.add(title="acc band").margin.series.add(value="acc/mean", lower="acc/lo", upper="acc/hi")
    lay.category.add(title="Other").chart.add(title="lr").multiline.tag.append("lr")
    return lay


def test_layout_reads_back_equal(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_custom_scalars(LAYOUT)
    assert readback.tags(str(tmp_path)) == {(".", CONFIG_TAG)}
    assert readback.plugin_name(str(tmp_path), ".", CONFIG_TAG) == "custom_scalars"
    (ev,) = readback.tensor_events(str(tmp_path), ".", CONFIG_TAG)
    assert ev.tensor_proto.tensor_shape.dim == [] and len(ev.tensor_proto.string_val) == 1
    assert layout_pb2.Layout.FromString(ev.tensor_proto.string_val[0]) == expected_layout()


def test_custom_scalars_plugin_serves_the_layout(tmp_path):
    from tensorboard.plugins.custom_scalar.custom_scalars_plugin import CustomScalarsPlugin

    with SummaryWriter(str(tmp_path)) as w:
        w.add_custom_scalars(LAYOUT)
    plugin = CustomScalarsPlugin(tb_context_for(tmp_path))
    got = plugin.layout_impl(tb_context.RequestContext(), "")  # JSON text
    assert json_format.Parse(got, layout_pb2.Layout()) == expected_layout()


@pytest.mark.parametrize("layout, exc, word", [
    ([], TypeError, "layout"),
    ({}, ValueError, "layout"),
    ({"c": ["Multiline", ["a"]]}, TypeError, r"layout\['c'\]"),
    ({"c": {"t": ("Multiline",)}}, ValueError, r"layout\['c'\]\['t'\]"),  # a sequence, not a pair
    ({"c": {"t": "Multiline"}}, TypeError, r"layout\['c'\]\['t'\] must be \['Multiline'"),
    ({"c": {"t": [None, ["a"]]}}, TypeError, r"layout\['c'\]\['t'\]\[0\] must be 'Multiline' or 'Margin'"),
    ({"c": {"t": ["", ["a"]]}}, ValueError, r"\[0\] must be 'Multiline' or 'Margin'"),
    ({"c": {"t": ["Multiline", ["a", ""]]}}, ValueError, "non-empty str tags, got str ''"),
    ({"c": {"t": ["Lines", ["a"]]}}, ValueError, "'Multiline' or 'Margin'"),
    ({"c": {"t": ["Multiline", "a"]}}, TypeError, "list of str"),
    ({"c": {"t": ["Multiline", []]}}, ValueError, "at least one"),
    ({"c": {"t": ["Margin", ["a", "b"]]}}, ValueError, "value_tag, lower_tag, upper_tag"),
    ({"c": {"t": ["Multiline", ["a", 3]]}}, TypeError, "str tags"),
    ({1: {"t": ["Multiline", ["a"]]}}, TypeError, "category"),
])
def test_layout_errors_name_layout(tmp_path, layout, exc, word):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=word) as info:
        w.add_custom_scalars(layout)
    assert "layout" in str(info.value)


def test_nan_metric_is_allowed(tmp_path):
    (v,) = logged_hparams(tmp_path, {"a": 1}, {"m": float("nan")}, experiment=False)[2:]
    assert math.isnan(v.simple_value)


def test_an_empty_hparam_dict_is_refused_and_the_writer_goes_on(tmp_path):
    """TensorBoard showed an experiment without a column; the handler's hparams={} likewise."""
    from gluon_tb import TensorBoardHandler

    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"^hparam_dict must name at least one hyperparameter, got an empty dict$"):
            w.add_hparams({}, {"acc": 0.5})
        w.add_hparams({"lr": 0.1}, {"acc": 0.5})
    with pytest.raises(ValueError, match=r"^hparams must name at least one hyperparameter"):
        TensorBoardHandler(str(tmp_path / "h"), hparams={})


# ------------------------------------------------------------ hparams: tensorboardX's habits
def test_a_loop_of_trials_on_one_writer_is_one_session_each(tmp_path, caplog):
    """tensorboardX makes a run per add_hparams call. Here the first set is the writer's own run's
    session; each other set went into it too, and TensorBoard showed one session pairing the first
    call's hparams with the last call's metric. Now each new set gets a run of its own (named by
    its values), with one warning; the same set again updates its session."""
    trials = [(0.1, 0.5), (0.01, 0.7), (0.001, 0.6)]
    with SummaryWriter(str(tmp_path)) as w, caplog.at_level("WARNING", logger="gluon_tb"):
        for lr, acc in trials:
            w.add_hparams({"lr": lr, "bs": 32}, {"hp/acc": acc})
        w.add_hparams({"lr": 0.1, "bs": 32}, {"hp/acc": 0.55})  # the first set again: its session
    assert [r.getMessage() for r in caplog.records] == [
        f"gluon_tb: add_hparams: {tmp_path} already holds the session of other hyperparameters (TensorBoard "
        "shows one session per run): this one goes into the run 'lr=0.01,bs=32' under it, and so does each "
        "later new set; pass run_name= to name them"]
    _, groups = hparams_backend(tmp_path)
    rows = {g.sessions[0].name: (g.hparams["lr"].number_value, [round(m.value, 6) for m in g.metric_values])
            for g in groups.session_groups}
    assert rows == {".": (0.1, [0.55]), "lr=0.01,bs=32": (0.01, [0.7]), "lr=0.001,bs=32": (0.001, [0.6])}


def test_run_name_puts_the_session_in_a_run_of_that_name(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_hparams({"lr": 0.1}, {"hp/acc": 0.5}, run_name="trial/a")
        w.add_hparams({"lr": 0.2}, {"hp/acc": 0.6}, run_name="trial/b")
        with pytest.raises(ValueError, match=r"^run_name must be a relative name"):
            w.add_hparams({"lr": 0.3}, {"hp/acc": 0.7}, run_name="../x")
    _, groups = hparams_backend(tmp_path)
    assert {g.sessions[0].name: g.hparams["lr"].number_value for g in groups.session_groups} == \
        {"trial/a": 0.1, "trial/b": 0.2}
    assert readback.scalars(str(tmp_path), "trial/a", "hp/acc") == [(0, 0.5)]


def test_session_run_names_are_plain_and_distinct():
    from gluon_tb.writer._summaries.hparams import session_run_name

    import re

    assert session_run_name({"lr": 0.01, "opt": "sgd"}) == "lr=0.01,opt=sgd"
    assert re.fullmatch(r"path=_data_x_y,\.h=1-[0-9a-f]{12}", session_run_name({"path": "/data/x y", ".h": 1}))
    assert re.fullmatch(r"a=1-[0-9a-f]{12}", session_run_name({".a": 1}))
    # a name changed to be a run's is followed by a hash of the text: two sets never share one
    assert session_run_name({"opt": "adam w"}) != session_run_name({"opt": "adam_w"}) == "opt=adam_w"
    long1, long2 = session_run_name({"a": "x" * 200}), session_run_name({"a": "x" * 199 + "y"})
    assert len(long1) == 113 and long1 != long2


def test_a_run_name_given_twice_for_two_sets_is_refused(tmp_path):
    """run_name=f"lr={lr:.1f}" for 0.01 and 0.001: the second set went into the first's session,
    which then showed the second's metric against the first's hyperparameters."""
    with SummaryWriter(str(tmp_path)) as w:
        w.add_hparams({"lr": 0.01}, {"hp/acc": 0.5}, run_name="lr=0.0")
        with pytest.raises(ValueError, match=r"^run_name 'lr=0.0' already holds the session of other "
                                             r"hyperparameters \({'lr': 0.01}\), got {'lr': 0.001}"):
            w.add_hparams({"lr": 0.001}, {"hp/acc": 0.7}, run_name="lr=0.0")
        w.add_hparams({"lr": 0.01}, {"hp/acc": 0.55}, run_name="lr=0.0")  # the same set: its metric again
    _, groups = hparams_backend(tmp_path)
    assert [(g.sessions[0].name, g.hparams["lr"].number_value, [round(m.value, 6) for m in g.metric_values])
            for g in groups.session_groups] == [("lr=0.0", 0.01, [0.55])]


@pytest.mark.parametrize("load_fast", ["true", "false"])
def test_a_metric_named_as_a_curve_keeps_the_curve(tmp_path, load_fast):
    """add_hparams without global_step wrote its metric at step 0 into the run whose curve of the
    same tag had reached step 10: TensorBoard read a restart, and its Rust loader served the one
    point (0, 0.99). Now the metric goes at the largest step the writer was given."""
    from tb_server import served_scalars

    with SummaryWriter(str(tmp_path)) as w:
        for s in range(11):
            w.add_scalar("acc", s / 10, s)
        w.add_hparams({"lr": 0.1}, {"acc": 0.99})
    got = served_scalars(str(tmp_path), [(".", "acc")], [list(range(11)) + ([10] if load_fast == "false" else [])],
                         load_fast=load_fast)[(".", "acc")]
    assert [s for s, _ in got][:10] == list(range(10))
    assert got[-1] == (10, pytest.approx(0.99))
    _, groups = hparams_backend(tmp_path)
    (group,) = groups.session_groups
    assert [round(m.value, 6) for m in group.metric_values] == [0.99]
