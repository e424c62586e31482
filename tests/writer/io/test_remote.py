"""Remote log directories (fsspec URLs): ``memory://`` unit tests and a real S3 server (moto).

TensorBoard reads ``s3://`` only through TensorFlow's file systems, which are not
installed here; so what was written is downloaded with fsspec into a temporary
directory and read back with TensorBoard's own loader (``tests/support/readback.py``).
"""
import os
import socket
import time
import uuid

import numpy as np
import pytest

import readback
import repo_paths
from gluon_tb import SummaryWriter

fsspec = pytest.importorskip("fsspec")

from gluon_tb.writer._format import proto as _proto  # noqa: E402
from gluon_tb.writer._format.record import frame  # noqa: E402
from gluon_tb.writer._io import remote as _remote  # noqa: E402
from gluon_tb.writer._io.event_file import FILE_VERSION  # noqa: E402
from gluon_tb.writer import RemoteOptions, RemoteWriteError  # noqa: E402
from gluon_tb.writer._io.remote_output import RemoteOutput  # noqa: E402
from gluon_tb.writer._io.sink import Sink  # noqa: E402

HEADER = len(frame(_proto.event(time.time(), 0, file_version=FILE_VERSION)))
NAME = r"events\.out\.tfevents\.\d{10}\.[^/]+\.%d\.\d{8}" % os.getpid()


# ---------------------------------------------------------------- helpers
def download(fs, root, local):
    """Copy every object under ``root`` into the local directory ``local``."""
    fs.invalidate_cache()
    for p in fs.find(root):
        dst = local / p[len(root):].lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(fs.cat_file(p))
    return str(local)


def objects(fs, root):
    """``{relative path: size}`` of every object under ``root``."""
    fs.invalidate_cache()
    return {p[len(root):].lstrip("/"): info["size"] for p, info in fs.find(root, detail=True).items()}


class Uploads:
    """Records every whole-object write and every byte handed to the remote event files."""

    def __init__(self, monkeypatch):
        self.puts, self.logged = [], 0
        real_put, real_write = _remote.Store.put, _remote.RemoteEventFile.write

        def put(store, path, data):
            real_put(store, path, data)
            self.puts.append((path, len(data)))

        def write(f, data):
            self.logged += len(data)
            real_write(f, data)

        monkeypatch.setattr(_remote.Store, "put", put)
        monkeypatch.setattr(_remote.RemoteEventFile, "write", write)


@pytest.fixture
def mem():
    """A fresh ``memory://`` log directory, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/gluon_tb_test/{uuid.uuid4().hex}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


def log_everything(w):
    for step in range(3):
        for i in range(10):
            w.add_scalar("loss", 1.0 / (10 * step + i + 1), 10 * step + i)
        w.add_histogram("weights", np.arange(100, dtype=np.float32) + step, step)
        w.flush()  # one part per flush
    w.add_scalars("acc", {"train": 0.5, "val": 0.25}, 30)
    w.add_embedding("emb", np.arange(12, dtype=np.float32).reshape(4, 3), labels=list("abcd"))


def check_everything(local):
    assert readback.tags(local) == {(".", "loss"), (".", "weights"), ("acc_train", "acc"),
                                    ("acc_val", "acc")}
    assert readback.scalars(local, ".", "loss") == [
        (s, float(np.float32(1.0 / (s + 1)))) for s in range(30)]
    assert readback.scalars(local, "acc_val", "acc") == [(30, 0.25)]
    hist = readback.tensor_events(local, ".", "weights")
    assert [e.step for e in hist] == [0, 1, 2]
    from tensorboard.util import tensor_util
    buckets = tensor_util.make_ndarray(hist[2].tensor_proto)
    assert buckets.shape[1] == 3 and buckets[:, 2].sum() == 100
    rows = readback.projector_tensors(local)["emb"]
    assert rows.tolist() == np.arange(12).reshape(4, 3).tolist()
    with open(os.path.join(local, "projector_config.pbtxt")) as f:
        assert 'tensor_path: "emb/00000/tensors.bytes"' in f.read()


# ---------------------------------------------------------------- memory://
def test_records_written_as_pieces_reach_a_remote_run_whole(mem, tmp_path):
    """Audio and PR curves computed while their records are framed, and a large image nested
    uncopied (chain.Chain), go through a remote run's buffered parts: the bytes a local
    directory gets, read back by TensorBoard's reader."""
    fs, root = mem
    rng = np.random.default_rng(16)
    clip = rng.random(44100).astype(np.float32) * 2 - 1
    labels, preds = rng.integers(0, 2, 500), rng.random(500).astype(np.float32)
    image = rng.random((3, 128, 128)).astype(np.float32)

    def log(w):
        w.add_audio("a", clip, global_step=3, sample_rate=44100)
        w.add_pr_curve("p", labels, preds, num_thresholds=11, global_step=5)
        w.add_image("i", image, 7)

    with SummaryWriter("memory://" + root) as w:
        log(w)
    with SummaryWriter(str(tmp_path / "local")) as w:
        log(w)
    remote = download(fs, root, tmp_path / "remote")

    def values(d):
        out = {}
        for tag in ("a", "p", "i"):
            [e] = readback.tensor_events(d, ".", tag)
            out[tag] = (e.step, e.tensor_proto.SerializeToString())
        return out

    got, want = values(remote), values(str(tmp_path / "local"))
    assert got == want and [got[t][0] for t in ("a", "p", "i")] == [3, 5, 7]


def test_memory_url_is_read_back_by_tensorboard(mem, tmp_path):
    fs, root = mem
    with SummaryWriter("memory://" + root) as w:
        log_everything(w)
    files = objects(fs, root)
    assert {p for p in files if ".tfevents." not in p} == {
        "projector_config.pbtxt", "emb/00000/tensors.bytes", "emb/00000/metadata.tsv"}
    check_everything(download(fs, root, tmp_path))


def test_each_flush_writes_a_new_part_and_no_object_is_rewritten(mem, tmp_path, monkeypatch):
    import re

    fs, root = mem
    up = Uploads(monkeypatch)
    w = SummaryWriter("memory://" + root)
    for flush in range(6):
        for i in range(10):
            w.add_scalar("x", float(i), 10 * flush + i)
        w.flush()
        assert len(up.puts) == flush + 1  # visible right after flush()
    w.close()
    names = [os.path.basename(p) for p, _ in up.puts]
    assert all(re.fullmatch(NAME, n) for n in names), names
    assert names == sorted(names)  # TensorBoard reads them in name order = write order
    assert len(set(names)) == 6  # no object written twice
    assert objects(fs, root) == {n: size for n, (_, size) in zip(names, up.puts)}
    assert sum(s for _, s in up.puts) == up.logged + 6 * HEADER  # linear: nothing resent
    local = download(fs, root, tmp_path)
    for n in names:  # each part is a whole event file of its own
        events = readback.raw_events(os.path.join(local, n))
        assert events[0].file_version == FILE_VERSION and len(events) == 11
    assert [s for s, _ in readback.scalars(str(tmp_path), ".", "x")] == list(range(60))


def test_part_bytes_and_part_secs_upload_without_flush(mem, monkeypatch):
    fs, root = mem
    monkeypatch.setenv("GLUON_TB_PART_BYTES", "2000")
    monkeypatch.setenv("GLUON_TB_PART_SECS", "3600")
    up = Uploads(monkeypatch)
    w = SummaryWriter("memory://" + root, flush_secs=0.05)
    for batch in range(20):  # ~40 bytes a record, 1000 bytes a batch
        for i in range(25):
            w.add_scalar("x", float(i), 25 * batch + i)
        time.sleep(0.1)  # let the worker drain it: one write per batch
    deadline = time.monotonic() + 10
    while len(up.puts) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    # a part is uploaded once part_bytes are buffered: at most part_bytes + one batch
    assert 5 <= len(up.puts) <= 10 and all(s < HEADER + 2000 + 1100 for _, s in up.puts), up.puts
    w.close()

    monkeypatch.setenv("GLUON_TB_PART_BYTES", str(1 << 20))
    monkeypatch.setenv("GLUON_TB_PART_SECS", "0.2")
    w = SummaryWriter("memory://" + root + "/timed", flush_secs=0.05)
    w.add_scalar("y", 1.0, 1)
    deadline = time.monotonic() + 10
    while not any("/timed/" in p for p, _ in up.puts) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("/timed/" in p for p, _ in up.puts)  # uploaded by the timer, no flush()
    w.close()


class Flaky:
    """Makes the memory file system's writes fail while ``down`` is true."""

    def __init__(self, monkeypatch):
        self.down, self.calls = False, 0
        cls = fsspec.implementations.memory.MemoryFileSystem
        real = cls.pipe_file

        def pipe_file(fs, path, value, *a, **kw):
            self.calls += 1
            if self.down:
                raise OSError(5, "Input/output error (injected)")
            return real(fs, path, value, *a, **kw)

        monkeypatch.setattr(cls, "pipe_file", pipe_file)


def test_store_outage_is_reported_bounded_and_loses_nothing_once_it_recovers(mem, tmp_path,
                                                                             monkeypatch):
    fs, root = mem
    flaky = Flaky(monkeypatch)
    w = SummaryWriter("memory://" + root)
    w.add_scalar("x", 1.0, 1)
    w.flush()
    flaky.down, flaky.calls = True, 0
    w.add_scalar("x", 2.0, 2)
    t0 = time.monotonic()
    with pytest.raises(RemoteWriteError, match=r"after 3 attempts: OSError.*kept in memory"):
        w.flush()
    assert flaky.calls == 3 and time.monotonic() - t0 < 10  # bounded retries, no hang
    w.add_scalar("x", 3.0, 3)  # the writer goes on
    flaky.down = False
    w.close()
    assert readback.scalars(download(fs, root, tmp_path), ".", "x") == [(1, 1.0), (2, 2.0), (3, 3.0)]


def test_store_still_down_at_close_reports_what_is_lost(mem, monkeypatch):
    fs, root = mem
    flaky = Flaky(monkeypatch)
    w = SummaryWriter("memory://" + root)
    w.add_scalar("x", 1.0, 1)
    w.add_scalar("x", 2.0, 2)
    flaky.down = True
    with pytest.raises(RemoteWriteError, match="2 events could not be written and are lost"):
        w.close()
    assert not fs.exists(root)


def test_buffer_is_bounded_while_the_store_is_down(mem, monkeypatch):
    fs, root = mem
    flaky = Flaky(monkeypatch)
    flaky.down = True
    f = _remote.RemoteEventFile(_remote.Store("memory://" + root, RemoteOptions(
        part_bytes=1000, max_buffer_bytes=3000, retry_wait=0.0)))
    record = frame(_proto.scalar_event(0.0, 1, _proto.scalar_prefix("x"), 1.0))
    lost = []
    for _ in range(400):
        try:
            f.write(record * 5)
        except RemoteWriteError as e:
            lost.append(e.lost_records)
        assert f.pending_bytes <= 3000 + 5 * len(record)
    assert sum(lost) > 0 and all(n % 5 == 0 for n in lost)


def test_projector_and_other_files_stay_inside_the_remote_logdir(mem):
    fs, root = mem
    sink = Sink(RemoteOutput("memory://" + root))
    for bad in ("../evil", "/abs", "a/../../evil", ".."):
        with pytest.raises(ValueError, match="outside the log directory"):
            sink.write_file(bad, b"x")
    sink.write_file("a/b.txt", b"ok")
    assert fs.cat_file(root + "/a/b.txt") == b"ok"


def test_export_scalars_is_not_there_for_a_url_and_clear_scalar_dict_does_nothing(mem):
    fs, root = mem
    with SummaryWriter("memory://" + root) as w:
        w.add_scalar("a", 1.0, 0)
        w.clear_scalar_dict()  # mxboard's code calls it: nothing to clear, no error
        with pytest.raises(NotImplementedError, match="reading event files back needs a local logdir"):
            w.export_scalars("unused.json")
        w.add_scalar("a", 2.0, 1)
    assert fs.ls(root + "/", detail=False)  # written all the same


def test_url_errors_are_clear(monkeypatch, tmp_path):
    import pathlib
    import sys

    with pytest.raises(ValueError, match="URL with one slash"):
        SummaryWriter(pathlib.PurePosixPath("s3://bucket/run"))
    with pytest.raises(ValueError, match="fsspec cannot open it"):
        SummaryWriter("nosuchprotocol://bucket/run")
    monkeypatch.setitem(sys.modules, "fsspec", None)
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    with pytest.raises(ImportError, match=r"needs fsspec: pip install fsspec \(from gluon_tb's checkout: pip install '\.\[remote\]'\)"):
        SummaryWriter("memory://x")
    with SummaryWriter("file://" + str(tmp_path)) as w:  # file:// is the local path
        w.add_scalar("x", 1.0, 1)
    assert readback.scalars(str(tmp_path), ".", "x") == [(1, 1.0)]


def test_options_are_validated():
    with pytest.raises(ValueError, match="part_bytes must be a positive int"):
        RemoteOptions(part_bytes=-1)
    with pytest.raises(ValueError, match="max_buffer_bytes must be >= part_bytes"):
        RemoteOptions(part_bytes=100, max_buffer_bytes=10)
    # a wrong type is a TypeError, a wrong value of the right type a ValueError
    with pytest.raises(TypeError, match="part_bytes must be a positive int, got str '16M'"):
        RemoteOptions(part_bytes="16M")
    with pytest.raises(TypeError, match="retries must be a positive int, got bool True"):
        RemoteOptions(retries=True)
    with pytest.raises(ValueError, match="retries must be a positive int, got int 0"):
        RemoteOptions(retries=0)
    with pytest.raises(TypeError, match="retry_wait must be a non-negative number, got str '1'"):
        RemoteOptions(retry_wait="1")
    with pytest.raises(ValueError, match="retry_wait must be a non-negative number, got -1"):
        RemoteOptions(retry_wait=-1)
    with pytest.raises(TypeError, match="timeout must be a positive number of seconds, got str '30'"):
        RemoteOptions(timeout="30")
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got 0"):
        RemoteOptions(timeout=0)


# ---------------------------------------------------------------- a real S3 server
BUCKET = "gluon-tb-test"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's S3 in server mode on 127.0.0.1, with s3fs configured (through fsspec's config) to use it."""

    def __init__(self, port):
        from moto.server import ThreadedMotoServer

        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)

    def start(self):
        self.server.start()
        return self

    def stop(self):
        self.server.stop()


@pytest.fixture
def s3(monkeypatch):
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    server = S3Server(_free_port()).start()
    # every s3fs client made from here on talks to the server, with short timeouts and few retries
    monkeypatch.setitem(fsspec.config.conf, "s3", {
        "endpoint_url": server.endpoint, "skip_instance_cache": True,
        "config_kwargs": {"connect_timeout": 3, "read_timeout": 10, "retries": {"max_attempts": 2}}})
    client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    server.client = client
    server.fs = fsspec.filesystem("s3")
    try:
        yield server
    finally:
        server.stop()


def test_s3_everything_is_read_back_by_tensorboard(s3, tmp_path):
    with SummaryWriter(f"s3://{BUCKET}/run") as w:
        log_everything(w)
    check_everything(download(s3.fs, f"{BUCKET}/run", tmp_path))


def test_s3_storage_options_reach_the_file_system(s3, tmp_path, monkeypatch):
    monkeypatch.setitem(fsspec.config.conf, "s3", {})  # only storage_options know the endpoint now
    opts = {"endpoint_url": s3.endpoint, "skip_instance_cache": True}
    with SummaryWriter(f"s3://{BUCKET}/opts", storage_options=opts) as w:
        w.add_scalar("x", 2.5, 7)
    w.reopen()  # ... and to the file system of a reopened writer
    w.add_scalar("x", 3.5, 8)
    w.close()
    assert readback.scalars(download(s3.fs, f"{BUCKET}/opts", tmp_path), ".", "x") == [(7, 2.5), (8, 3.5)]


def test_storage_options_are_checked(tmp_path):
    with pytest.raises(TypeError, match="storage_options must be a dict of fsspec options, got str"):
        SummaryWriter("memory://gluon-tb-opts", storage_options="key=1")
    with pytest.raises(ValueError, match="storage_options and remote apply to a URL logdir"):
        SummaryWriter(str(tmp_path), storage_options={"key": "k"})
    with pytest.raises(TypeError, match="remote must be a RemoteOptions"):
        SummaryWriter("memory://gluon-tb-opts", remote={"part_bytes": 1})


def test_s3_bytes_uploaded_grow_linearly_and_no_object_is_rewritten(s3, monkeypatch):
    up = Uploads(monkeypatch)
    totals = {}
    for n in (4, 8, 16):
        before, logged_before = len(up.puts), up.logged
        with SummaryWriter(f"s3://{BUCKET}/linear{n}") as w:
            for flush in range(n):
                for i in range(5):
                    w.add_scalar("x", float(i), 5 * flush + i + 1, walltime=1.0)  # same-size records
                w.flush()
        stored = objects(s3.fs, f"{BUCKET}/linear{n}")
        puts = up.puts[before:]
        assert len(stored) == len(puts) == n  # one part per flush, nothing else
        assert sum(stored.values()) == sum(s for _, s in puts) == up.logged - logged_before + n * HEADER
        totals[n] = sum(stored.values())
    assert totals[8] == 2 * totals[4] and totals[16] == 4 * totals[4]  # linear, not quadratic
    # the server's own record: every key has exactly one version, so nothing was overwritten
    versions = s3.client.list_object_versions(Bucket=BUCKET, Prefix="linear").get("Versions", [])
    keys = [v["Key"] for v in versions]
    assert len(keys) == 28 and len(set(keys)) == 28


def test_s3_missing_bucket_is_a_clear_error(s3):
    w = SummaryWriter("s3://no-such-bucket-gluon-tb/run")
    w.add_scalar("x", 1.0, 1)
    with pytest.raises(RemoteWriteError, match="no-such-bucket-gluon-tb"):
        w.flush()
    with pytest.raises(RemoteWriteError, match="1 events could not be written and are lost"):
        w.close()


def test_s3_server_down_then_back_loses_nothing(s3, tmp_path):
    w = SummaryWriter(f"s3://{BUCKET}/outage")
    w.add_scalar("x", 1.0, 1)
    w.flush()
    s3.stop()
    w.add_scalar("x", 2.0, 2)
    t0 = time.monotonic()
    with pytest.raises(RemoteWriteError, match="kept in memory"):
        w.flush()
    assert time.monotonic() - t0 < 60  # bounded: no endless retry
    w.add_scalar("x", 3.0, 3)
    s3.server = S3Server(s3.port).server  # same port; moto's state lives on in this process
    s3.start()
    w.close()
    local = download(s3.fs, f"{BUCKET}/outage", tmp_path)
    assert readback.scalars(local, ".", "x") == [(1, 1.0), (2, 2.0), (3, 3.0)]


@pytest.mark.parametrize("ending", ["end", "raise"])
def test_s3_process_ending_without_close_uploads_everything(s3, tmp_path, ending):
    import subprocess
    import sys

    script = ("import sys\n"
              "from gluon_tb import SummaryWriter\n"
              "w = SummaryWriter(sys.argv[1])\n"
              "for i in range(100):\n"
              "    w.add_scalar('x', float(i), i)\n"
              "if sys.argv[2] == 'raise':\n"
              "    raise RuntimeError('training failed')\n")
    env = dict(os.environ, FSSPEC_S3_ENDPOINT_URL=s3.endpoint,
               PYTHONPATH=os.pathsep.join([repo_paths.ROOT,
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script, f"s3://{BUCKET}/end-{ending}", ending],
                          env=env, timeout=120, capture_output=True, text=True)
    assert proc.returncode == (0 if ending == "end" else 1), proc.stderr
    local = download(s3.fs, f"{BUCKET}/end-{ending}", tmp_path)
    assert [s for s, _ in readback.scalars(local, ".", "x")] == list(range(100))


@pytest.mark.parametrize("adapter", ["TensorBoardHandler", "TensorBoardCallback"])
def test_the_handlers_check_logdir_and_storage_options_as_the_writer_does(tmp_path, adapter):
    """One check for both: a URL that lost a slash and fsspec options for a local (or file://)
    directory are refused when the handler is made, not at its first write."""
    import pathlib

    import gluon_tb

    cls = getattr(gluon_tb, adapter)
    for make in (cls, SummaryWriter):
        with pytest.raises(ValueError, match="looks like a URL with one slash, got 's3:/bucket/run'"):
            make(pathlib.Path("s3://bucket/run"))
        for local in (str(tmp_path), "file://" + str(tmp_path)):
            with pytest.raises(ValueError, match="apply to a URL logdir"):
                make(local, storage_options={"anon": True})
    with pytest.raises(TypeError, match="storage_options must be a dict of fsspec options, got list"):
        cls("memory://bucket/run", storage_options=["anon"])
