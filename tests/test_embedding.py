"""Projector embeddings: files written by an action, loaded by TensorBoard's projector plugin."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from PIL import Image
from werkzeug.test import Client

from gluon_tb.writer._summaries.embedding import (
    capture_embedding,
    embedding_action,
    embedding_entry,
    embedding_files,
)
from gluon_tb.writer._summaries.projector_config import CONFIG_NAME, add_entry, projector_config
from gluon_tb.writer._summaries.projector_files import EMPTY_LABEL, safe_path_component, sprite_layout


class FileSink:
    """The worker's sink, reduced to what actions use (refuses paths outside logdir)."""

    def __init__(self, logdir):
        self.logdir = str(logdir)
        self.written = []

    def write_file(self, relpath, data):
        root = os.path.realpath(self.logdir)
        path = os.path.realpath(os.path.join(root, relpath))
        assert os.path.commonpath([root, path]) == root, relpath
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        self.written.append(relpath)


def log(logdir, entries, tag, step, *args, run="", **kw):
    action = embedding_action(tag, step, capture_embedding(*args, **kw), entries, run=run)
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
    entries = []
    written = log(tmp_path, entries, "word/emb", 3, emb, labels, images)
    d = safe_path_component("word/emb") + "/00003"
    assert set(written) == {f"{d}/tensors.tsv", f"{d}/metadata.tsv", f"{d}/sprite.png", CONFIG_NAME}

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
    log(tmp_path, [], "e", 0, emb, labels)
    text = Projector(tmp_path).metadata("e")
    assert text.split("\n") == ["name\tclass", "a\\tb\t1", "line\\nbreak\t2",
                                f"{EMPTY_LABEL}\t", "cr\\r\t4", ""]


def test_rows_form_with_header_and_numpy_labels(tmp_path):
    emb = np.ones((3, 2), np.float32)
    entries = []
    log(tmp_path, entries, "rows", 0, emb, [("x", 1), ("y", 2), ("z", 3)])
    log(tmp_path, entries, "np", 0, emb, np.array([7, 8, 9]))
    p = Projector(tmp_path)
    assert p.metadata("rows").splitlines() == ["label_0\tlabel_1", "x\t1", "y\t2", "z\t3"]
    assert p.metadata("np").splitlines() == ["7", "8", "9"]


def test_blank_single_labels_are_not_dropped(tmp_path):
    log(tmp_path, [], "e", 0, np.zeros((3, 2)), ["", "  ", "ok"])
    lines = Projector(tmp_path).metadata("e").splitlines()
    assert lines == [EMPTY_LABEL, EMPTY_LABEL, "ok"]


def test_config_lists_all_embeddings_and_replaces_same_step(tmp_path):
    entries = []
    log(tmp_path, entries, "a", 1, np.zeros((2, 2)))
    log(tmp_path, entries, "b", 1, np.ones((3, 2)), ["p", "q", "r"])
    log(tmp_path, entries, "a", 2, np.full((4, 2), 2.0))
    log(tmp_path, entries, "a", 2, np.full((5, 2), 3.0))  # replaces a@2
    text = (tmp_path / CONFIG_NAME).read_text()
    assert text.count("embeddings {") == 3
    p = Projector(tmp_path)
    names = [e["tensorName"] for e in p.config()["embeddings"]]
    assert names == ["a@1", "b", "a@2"]
    assert p.tensor("a@2").reshape(-1, 2).shape == (5, 2)
    assert (p.tensor("a@2") == 3.0).all()
    assert p.tensor("a@1").reshape(-1, 2).shape == (2, 2)
    assert p.metadata("b").splitlines() == ["p", "q", "r"]


def test_embedding_in_a_run_subdirectory(tmp_path):
    import readback

    readback.write_values(str(tmp_path), [], run="train")  # the run exists (has an event file)
    log(tmp_path, [], "emb", 7, np.eye(3), run="train")
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
    payload = capture_embedding(np.zeros((n, 2), np.float32), images=imgs)
    files = embedding_files("big", 0, payload)
    sprite = Image.open(io.BytesIO(files["big/00000/sprite.png"]))
    side, th, tw = sprite_layout(n, 64, 64)
    assert sprite.size == (side * tw, side * th) and max(sprite.size) <= 8192
    entry = embedding_entry("big", 0, payload)
    assert entry.sprite_dim == (tw, th) == (57, 57)
    cell = np.asarray(sprite)[:th, :tw]
    assert cell[th // 2, tw // 2] == 255 and cell[0, 0] == 0  # scaled content, not cropped


@pytest.mark.parametrize("tag", [
    "..", ".", "../../etc/passwd", "/abs/path", "a/../../b", "a\x00b", "x" * 5000, "C:\\win",
    "con", "CON.txt", "-rf", "emb.", "~", "\u00e9\u00e8/\u4e2d", "a\nb",
])
def test_hostile_tags_stay_inside_the_logdir(tmp_path, tag):
    comp = safe_path_component(tag)
    assert comp and len(comp) <= 64 and "/" not in comp and "\\" not in comp and "\x00" not in comp
    assert comp not in (".", "..") and not comp.startswith((".", "-"))
    assert all(c.isascii() and (c.isalnum() or c in "_-~.") for c in comp)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    log(logdir, [], tag, 1, np.eye(2), ["a", "b"])
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


def test_projector_config_parses_with_tensorboard_protos():
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    entries = []
    add_entry(entries, embedding_entry('q"\\\n\u4e2d', 5, capture_embedding(np.eye(2), ["a", "b"])))
    add_entry(entries, embedding_entry("img", 5, capture_embedding(np.eye(2), images=np.zeros((2, 4, 3)))))
    cfg = text_format.Parse(projector_config(entries), ProjectorConfig())
    assert [e.tensor_name for e in cfg.embeddings] == ['q"\\\n\u4e2d', "img"]
    assert cfg.embeddings[0].metadata_path.endswith("/00005/metadata.tsv")
    assert not cfg.embeddings[1].metadata_path
    assert list(cfg.embeddings[1].sprite.single_image_dim) == [3, 4]


def test_ndarray_inputs_are_copied_on_mxnets_engine():
    mx = pytest.importorskip("mxnet")
    emb = mx.nd.array(np.arange(6).reshape(3, 2))
    imgs = mx.nd.ones((3, 1, 4, 4))
    labels = mx.nd.array([1, 2, 3])
    payload = capture_embedding(emb, labels, imgs)
    assert type(payload.matrix).__module__.startswith("mxnet")  # a copy, not asnumpy
    emb[:] = -1
    files = embedding_files("nd", 0, payload)
    assert files["nd/00000/tensors.tsv"].decode().splitlines() == ["0\t1", "2\t3", "4\t5"]
    assert files["nd/00000/metadata.tsv"].decode().splitlines() == ["1.0", "2.0", "3.0"]


def test_numpy_inputs_are_copied():
    emb = np.zeros((2, 2))
    labels = ["a", "b"]
    payload = capture_embedding(emb, labels)
    emb[:] = 5
    labels[0] = "changed"
    files = embedding_files("t", 0, payload)
    assert files["t/00000/tensors.tsv"] == b"0\t0\n0\t0\n"
    assert files["t/00000/metadata.tsv"] == b"a\nb\n"


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(embedding=np.zeros(3)), ValueError, "embedding"),
    (dict(embedding=np.zeros((0, 3))), ValueError, "embedding"),
    (dict(embedding="abc"), TypeError, "embedding"),
    (dict(embedding=np.zeros((3, 2)), labels=["a", "b"]), ValueError, "labels"),
    (dict(embedding=np.zeros((3, 2)), labels={"a": [1, 2, 3], "b": [1, 2]}), ValueError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels=[("a", 1), ("b",)]), ValueError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels="ab"), TypeError, "labels"),
    (dict(embedding=np.zeros((2, 2)), labels={"x": [1, 2], "x\t": [1, 2], "x\\t": [3, 4]}),
     ValueError, "labels"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((2, 3, 4, 4))), ValueError, "images"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((3, 5, 4, 4))), ValueError, "images"),
    (dict(embedding=np.zeros((3, 2)), images=np.zeros((3, 4))), ValueError, "images"),
])
def test_errors_name_the_argument(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        capture_embedding(**kwargs)
