"""Projector embeddings: SummaryWriter.add_embedding's files, loaded by TensorBoard's projector plugin;
the sprite layout and the tag's path component (pure helpers of projector_files.py)."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from PIL import Image
from tensorboard.plugins.projector.metadata import PROJECTOR_FILENAME
from werkzeug.test import Client

import readback
from gluon_tb import SummaryWriter
# what add_embedding runs: for the queued payload, and for a tag longer than add_embedding takes
from gluon_tb.writer._summaries.embedding import capture_embedding, embedding_action
from gluon_tb.writer._summaries.projector_files import EMPTY_LABEL, safe_path_component, sprite_layout


def files(logdir):
    """Every file ``add_embedding`` left under ``logdir`` (relative paths; event files aside)."""
    out = set()
    for root, _dirs, names in os.walk(str(logdir)):
        out |= {os.path.relpath(os.path.join(root, n), str(logdir)).replace(os.sep, "/")
                for n in names if ".tfevents." not in n}
    return out


def config(logdir):
    """The run's projector config, parsed with TensorBoard's protos."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    with open(os.path.join(str(logdir), PROJECTOR_FILENAME)) as f:
        return text_format.Parse(f.read(), ProjectorConfig())


class FileSink:
    """The worker's sink, reduced to what actions use (refuses paths outside logdir)."""

    def __init__(self, logdir):
        self.logdir = str(logdir)
        self.written = []
        self.events = []

    def write_file(self, relpath, data):
        root = os.path.realpath(self.logdir)
        path = os.path.realpath(os.path.join(root, relpath))
        assert os.path.commonpath([root, path]) == root, relpath
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        self.written.append(relpath)

    def write_event(self, event, run=None):
        self.events.append((run, event))

    def write_files(self, files):
        for relpath, data in files.items():
            self.write_file(relpath, data)


def log_action(logdir, tag, step, *args, **kw):
    """What ``add_embedding`` queues, run here on a sink that refuses paths outside ``logdir``."""
    action = embedding_action(tag, step, capture_embedding(*args, **kw), [])
    sink = FileSink(logdir)
    action(sink)
    return sink.written


class Projector:
    """TensorBoard's ProjectorPlugin over ``logdir``, queried through its WSGI routes."""

    def __init__(self, logdir):
        from tensorboard.backend.event_processing import data_provider
        from tensorboard.plugins import base_plugin
        from tensorboard.plugins.projector.projector_plugin import ProjectorPlugin

        import readback

        mux = readback.multiplexer(str(logdir))
        ctx = base_plugin.TBContext(logdir=str(logdir), multiplexer=mux,
                                    data_provider=data_provider.MultiplexerDataProvider(mux, str(logdir)))
        self.plugin = ProjectorPlugin(ctx)
        self.apps = self.plugin.get_plugin_apps()

    def get(self, route, **args):
        resp = Client(self.apps[route]).get("/", query_string=args)
        assert resp.status_code == 200, (route, args, resp.get_data(as_text=True))
        return resp.get_data()

    def runs(self):
        return json.loads(self.get("/runs"))

    def config(self, run="."):
        return json.loads(self.get("/info", run=run))

    def tensor(self, name, run="."):
        return np.frombuffer(self.get("/tensor", run=run, name=name), np.float32)

    def metadata(self, name, run="."):
        return self.get("/metadata", run=run, name=name).decode("utf-8")

    def sprite(self, name, run="."):
        return Image.open(io.BytesIO(self.get("/sprite_image", run=run, name=name)))


def test_matrix_labels_and_sprite_load_in_projector(tmp_path):
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((10, 5)).astype(np.float32)
    labels = [f"item {i}" for i in range(10)]
    images = rng.random((10, 3, 8, 6)).astype(np.float32)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("word/emb", emb, labels, images, global_step=3)
    d = safe_path_component("word/emb") + "/00003"
    assert files(tmp_path) == {f"{d}/tensors.bytes", f"{d}/metadata.tsv", f"{d}/sprite.png", PROJECTOR_FILENAME}

    p = Projector(tmp_path)
    assert p.runs() == ["."]
    cfg = p.config()
    (e,) = cfg["embeddings"]
    assert e["tensorName"] == "word/emb"
    assert e["sprite"]["singleImageDim"] == [6, 8]
    np.testing.assert_array_equal(p.tensor("word/emb").reshape(10, 5), emb)  # exact round trip
    assert p.metadata("word/emb").splitlines() == labels  # one column: no header
    sprite = p.sprite("word/emb")
    assert sprite.size == (4 * 6, 4 * 8) and sprite.mode == "RGB"  # 4x4 grid for 10 images
    px = np.asarray(sprite)
    expected0 = (images[0].transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8)
    np.testing.assert_array_equal(px[:8, :6], expected0)
    np.testing.assert_array_equal(px[8:16, 6:12], (images[5].transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8))
    assert not px[16:, 12:].any()  # unused cells are black


def test_several_columns_get_a_header_and_escaping(tmp_path):
    emb = np.arange(12, dtype=np.float64).reshape(4, 3)
    labels = {"name": ["a\tb", "line\nbreak", "", "cr\r"], "class": [1, 2, None, 4]}
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("e", emb, labels)
    text = Projector(tmp_path).metadata("e")
    assert text.split("\n") == ["name\tclass", "a\\tb\t1", "line\\nbreak\t2",
                                f"{EMPTY_LABEL}\t", "cr\\r\t4", ""]


def test_rows_form_with_header_and_numpy_labels(tmp_path):
    emb = np.ones((3, 2), np.float32)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("rows", emb, [("x", 1), ("y", 2), ("z", 3)])
        w.add_embedding("np", emb, np.array([7, 8, 9]))
    p = Projector(tmp_path)
    assert p.metadata("rows").splitlines() == ["label_0\tlabel_1", "x\t1", "y\t2", "z\t3"]
    assert p.metadata("np").splitlines() == ["7", "8", "9"]


def test_blank_single_labels_are_not_dropped(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("e", np.zeros((3, 2)), ["", "  ", "ok"])
    lines = Projector(tmp_path).metadata("e").splitlines()
    assert lines == [EMPTY_LABEL, EMPTY_LABEL, "ok"]


def test_config_lists_all_embeddings_and_replaces_same_step(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("a", np.zeros((2, 2)), global_step=1)
        w.add_embedding("b", np.ones((3, 2)), ["p", "q", "r"], global_step=1)
        w.add_embedding("a", np.full((4, 2), 2.0), global_step=2)
        w.add_embedding("a", np.full((5, 2), 3.0), global_step=2)  # replaces a@2
    text = (tmp_path / PROJECTOR_FILENAME).read_text()
    assert text.count("embeddings {") == 3
    p = Projector(tmp_path)
    names = [e["tensorName"] for e in p.config()["embeddings"]]
    assert names == ["a@1", "b", "a@2"]
    assert p.tensor("a@2").reshape(-1, 2).shape == (5, 2)
    assert (p.tensor("a@2") == 3.0).all()
    assert p.tensor("a@1").reshape(-1, 2).shape == (2, 2)
    assert p.metadata("b").splitlines() == ["p", "q", "r"]


def test_embedding_in_a_run_subdirectory(tmp_path):
    with SummaryWriter(str(tmp_path / "train")) as w:
        w.add_scalar("loss", 1.0, 7)  # the run exists (has an event file)
        w.add_embedding("emb", np.eye(3), global_step=7)
    p = Projector(tmp_path)
    assert p.runs() == ["train"]
    assert p.tensor("emb", run="train").reshape(3, 3).tolist() == np.eye(3).tolist()


def test_large_n_sprite_fits_8192():
    n = 100_000
    side, th, tw = sprite_layout(n, 28, 28)
    assert side == 317 and side * th <= 8192 and side * tw <= 8192 and th == tw == 25
    side, th, tw = sprite_layout(n, 100, 50)
    assert side * th <= 8192 and side * tw <= 8192 and (th, tw) == (25, 12)
    assert sprite_layout(1, 20000, 10) == (1, 8192, 4)


def test_large_n_writes_a_bounded_sprite(tmp_path):
    n = 20_000
    imgs = np.zeros((n, 1, 64, 64), np.uint8)
    imgs[:, :, 16:48, 16:48] = 255
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("big", np.zeros((n, 2), np.float32), images=imgs)
    sprite = Image.open(tmp_path / "big" / "00000" / "sprite.png")
    side, th, tw = sprite_layout(n, 64, 64)
    assert sprite.size == (side * tw, side * th) and max(sprite.size) <= 8192
    (entry,) = config(tmp_path).embeddings
    assert tuple(entry.sprite.single_image_dim) == (tw, th) == (57, 57)
    cell = np.asarray(sprite)[:th, :tw]
    assert cell[th // 2, tw // 2] == 255 and cell[0, 0] == 0  # scaled content, not cropped


LONG_TAG = "x" * 5000  # longer than add_embedding takes (check_tag: at most 4096 characters)


@pytest.mark.parametrize("tag", [
    "..", ".", "../../etc/passwd", "/abs/path", "a/../../b", "a\x00b", LONG_TAG, "C:\\win",
    "con", "CON.txt", "-rf", "emb.", "~", "\u00e9\u00e8/\u4e2d", "a\nb",
    "projector_config.pbtxt", "events.out.tfevents.1.h.2.3",  # the run directory's own files' names
])
def test_hostile_tags_stay_inside_the_logdir(tmp_path, tag):
    comp = safe_path_component(tag)
    assert comp and len(comp) <= 64 and "/" not in comp and "\\" not in comp and "\x00" not in comp
    assert comp not in (".", "..") and not comp.startswith((".", "-"))
    assert all(c.isascii() and (c.isalnum() or c in "_-~.") for c in comp)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    if tag == LONG_TAG:  # refused by add_embedding: what it would queue is run here instead
        written = set(log_action(logdir, tag, 1, np.eye(2), ["a", "b"]))
    else:
        with SummaryWriter(str(logdir)) as w:  # its sink refuses a path outside logdir: close() raises
            w.add_embedding(tag, np.eye(2), ["a", "b"], global_step=1)
        written = files(logdir)
    assert written == {f"{comp}/00001/tensors.bytes", f"{comp}/00001/metadata.tsv", PROJECTOR_FILENAME}
    assert os.listdir(tmp_path) == ["logs"]
    p = Projector(logdir)
    (e,) = p.config()["embeddings"]
    assert e["tensorName"] == tag
    assert p.metadata(tag).splitlines() == ["a", "b"]


def test_safe_path_component_is_injective_on_lookalikes():
    tags = ["a/b", "a_b", "a b", "A_b", "a_B", "a:b", "a__b", "a_b~" + "0" * 16, "a.b", "a..b"]
    comps = [safe_path_component(t) for t in tags]
    assert len(set(c.lower() for c in comps)) == len(tags)  # even on case-insensitive disks
    assert safe_path_component("embedding_1.v2") == "embedding_1.v2"  # clean tags kept


def test_projector_config_parses_with_tensorboard_protos(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding('q"\\\n\u4e2d', np.eye(2), ["a", "b"], global_step=5)
        w.add_embedding("img", np.eye(2), images=np.zeros((2, 4, 3)), global_step=5)
    cfg = config(tmp_path)
    assert [e.tensor_name for e in cfg.embeddings] == ['q"\\\n\u4e2d', "img"]
    assert cfg.embeddings[0].metadata_path.endswith("/00005/metadata.tsv")
    assert not cfg.embeddings[1].metadata_path
    assert list(cfg.embeddings[1].sprite.single_image_dim) == [3, 4]


def test_ndarray_inputs_are_copied_on_mxnets_engine(tmp_path):
    mx = pytest.importorskip("mxnet")
    emb = mx.nd.array(np.arange(6).reshape(3, 2))
    imgs = mx.nd.ones((3, 1, 4, 4))
    labels = mx.nd.array([1, 2, 3])
    payload = capture_embedding(emb, labels, imgs)  # what add_embedding queues
    assert type(payload.matrix).__module__.startswith("mxnet")  # a copy, not asnumpy
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("nd", emb, labels, imgs)
        emb[:] = -1
    np.testing.assert_array_equal(readback.projector_tensors(str(tmp_path))["nd"], [[0, 1], [2, 3], [4, 5]])
    assert (tmp_path / "nd/00000/metadata.tsv").read_text().splitlines() == ["1.0", "2.0", "3.0"]


def test_numpy_inputs_are_copied(tmp_path):
    emb = np.zeros((2, 2))
    labels = ["a", "b"]
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding("t", emb, labels)
        emb[:] = 5
        labels[0] = "changed"
    assert (tmp_path / "t/00000/tensors.tsv").read_bytes() == b"0\t0\n0\t0\n"
    assert (tmp_path / "t/00000/metadata.tsv").read_bytes() == b"a\nb\n"


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(embedding=np.zeros(3)), ValueError, "embedding"),
    (dict(embedding=np.zeros((0, 3))), ValueError, "embedding"),
    (dict(embedding="abc"), TypeError, "embedding"),
    (dict(embedding=np.zeros((3, 2)), labels=["a", "b"]), ValueError, "labels"),
    (dict(embedding=np.zeros((3, 2)), labels={"a": [1, 2, 3], "b": [1, 2]}), ValueError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels=[("a", 1), ("b",)]), ValueError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels=[("a", 1), "b"]), TypeError, "labels rows .*got str 'b' among them"),
    (dict(embedding=np.zeros((2, 2)), labels="ab"), TypeError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels={"x": [1, 2], "x\t": [1, 2], "x\\t": [3, 4]}),
     ValueError, "labels"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((2, 3, 4, 4))), ValueError, "images"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((3, 5, 4, 4))), ValueError, "images"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((3, 4))), ValueError, "images"),
])
def test_errors_name_the_argument(tmp_path, kwargs, exc, word):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=word):
        w.add_embedding("e", **kwargs)


ORDERS = ("the order is mxboard's, add_embedding(tag, embedding, labels, images, global_step); tensorboardX's is "
          "add_embedding(mat, metadata, label_img, global_step, tag)")


@pytest.mark.parametrize("first,described", [
    (np.zeros((2, 3)), "ndarray of shape (2, 3) and dtype float64"),
    ([[0.5, 1.0], [2.0, 3.0]], "list [[0.5, 1.0], [2.0, 3.0]]"),
    ((np.zeros(2), np.ones(2)), "tuple (array([0., 0.]), array([1., 1.]))"),
    ("nd", "NDArray of shape (2, 3) and dtype float32"),
], ids=["numpy", "list-of-lists", "tuple-of-arrays", "ndarray"])
def test_a_matrix_first_in_tensorboardxs_order_says_both_orders(tmp_path, first, described):
    if isinstance(first, str):
        mx = pytest.importorskip("mxnet")
        first = mx.nd.zeros((2, 3))
    emb = np.arange(6, dtype=np.float32).reshape(2, 3)
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(TypeError) as info:
            w.add_embedding(first, ["a", "b"])  # tensorboardX's add_embedding(mat, metadata)
        w.add_embedding("e", emb, ["a", "b"])  # the writer goes on
    assert str(info.value) == f"tag must be a str, got {described}: {ORDERS}"
    p = Projector(tmp_path)
    assert [e["tensorName"] for e in p.config()["embeddings"]] == ["e"]
    np.testing.assert_array_equal(p.tensor("e").reshape(2, 3), emb)
    assert p.metadata("e").splitlines() == ["a", "b"]


@pytest.mark.parametrize("tag", [3, None, ["a", "b"], []])
def test_a_tag_of_another_kind_keeps_the_plain_message(tmp_path, tag):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(TypeError) as info:
        w.add_embedding(tag, np.zeros((2, 2)))
    assert str(info.value).startswith("tag must be a str, got ") and "order" not in str(info.value)


# ------------------------------------------------------------ metadata.tsv: the fast path's bytes
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gluon_tb.writer._summaries import projector_files  # noqa: E402

_CELL = st.one_of(st.text(alphabet=st.sampled_from(list("ab \t\n\r\ufeff\x1c\u2028é")), max_size=4),
                  st.sampled_from(["", "xyz", "word7"]),
                  st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                  st.binary(max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda k: st.lists(st.lists(_CELL, min_size=k, max_size=k), max_size=6)),
       st.booleans())
def test_metadata_fast_path_writes_the_row_by_row_bytes(rows, with_header):
    """Labels of common kinds (str, int, float, bool; no tab, newline or blank row) are joined in
    a few C-level passes; every input gives the bytes the row by row loop gives."""
    k = len(rows[0]) if rows else 1
    cols = [[r[i] for r in rows] for i in range(k)]
    header = [f"c{i}" for i in range(k)] if with_header or k > 1 else None
    fast = projector_files.metadata_tsv(cols, header)
    real = projector_files._plain_rows
    try:
        projector_files._plain_rows = lambda cols: None
        slow = projector_files.metadata_tsv(cols, header)
    finally:
        projector_files._plain_rows = real
    assert fast == slow


def test_metadata_fast_path_is_taken_for_plain_labels():
    words = [f"word{i}" for i in range(5000)]
    assert projector_files._plain_rows([words]) == "\n".join(words)
    assert projector_files._plain_rows([words, list(range(5000))]).split("\n")[7] == "word7\t7"
    assert projector_files._plain_rows([["a", " "]]) is None  # a blank row: the loop's <empty>
    assert projector_files._plain_rows([["a\tb"]]) is None  # a tab to escape
    assert projector_files.metadata_tsv([["a", " "]], None) == f"a\n{EMPTY_LABEL}\n".encode()


def test_tensor_bytes_that_read_as_utf8_are_written_as_text():
    """The projector reads a tensor file as TSV when it decodes as UTF-8: checked a chunk at a time."""
    zeros = np.zeros((3, 2), np.float32)  # all zero bytes: valid UTF-8
    assert projector_files.tensor_file(zeros)[0] == projector_files.TENSORS_TSV
    rnd = np.random.default_rng(0).standard_normal((5000, 300)).astype(np.float32)
    assert projector_files.tensor_file(rnd) == (projector_files.TENSORS_BINARY, rnd.tobytes())
    assert projector_files._is_utf8("é".encode() * 40000, chunk=7)  # a character across chunks
    assert not projector_files._is_utf8(b"a" * 100 + b"\xc3", chunk=7)  # cut short at the end


@pytest.mark.parametrize("load_fast", ["true", "false"])
def test_a_run_with_embeddings_alone_is_listed_by_tensorboard(tmp_path, load_fast):
    """A run is listed by its event file; one that logs only an embedding (an mxboard script that
    writes nothing else) gets one with an event without a value at the embedding's step, and
    TensorBoard's run list, its projector's run list and tensor show it."""
    from tb_server import tensorboard

    vecs = np.random.default_rng(0).random((10, 4)).astype(np.float32)
    with SummaryWriter(str(tmp_path / "sw")) as w:
        w.add_embedding("vecs", vecs, labels=[f"l{i}" for i in range(10)], global_step=3)
    (path,) = readback.event_files(str(tmp_path / "sw"))
    events = readback.raw_events(path)
    assert [e.file_version for e in events] == ["brain.Event:2", ""]
    assert events[1].step == 3 and not events[1].HasField("summary")
    with tensorboard(str(tmp_path), load_fast=load_fast) as tb:
        assert tb.get("/data/runs") == ["sw"]
        assert tb.get("/data/plugin/projector/runs") == ["sw"]
        info = tb.get("/data/plugin/projector/info", run="sw")
        [emb] = info["embeddings"]
        assert emb["tensorShape"] == [10, 4]
        got = np.frombuffer(tb.get("/data/plugin/projector/tensor", run="sw", name=emb["tensorName"]), "<f4")
        np.testing.assert_array_equal(got.reshape(10, 4), vecs)
