"""Whole files the writer makes (projector files, profiles): written under a temporary name
created exclusively, renamed into place, and removed when a write fails; an embedding step's
files appear together or not at all."""
import errno
import os
import threading

import numpy as np
import pytest
from tensorboard.plugins.projector.metadata import PROJECTOR_FILENAME

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer._io import local_output as _local
from gluon_tb.writer._summaries.projector_files import safe_path_component


def every_file(logdir):
    out = set()
    for root, _dirs, names in os.walk(str(logdir)):
        out |= {os.path.relpath(os.path.join(root, n), str(logdir)).replace(os.sep, "/") for n in names}
    return out


def non_event_files(logdir):
    return {f for f in every_file(logdir) if ".tfevents." not in f}


def embedding(n=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 4)).astype(np.float32), [f"w{i}" for i in range(n)],
            rng.random((n, 3, 8, 8)).astype(np.float32))


def writer_failing_whole_files(logdir):
    """A writer and its whole files' ``os.write``: after ``disk.fail(err_no, after)`` the whole-file
    write number ``after + 1`` (a count of os.write calls) writes half its buffer, then fails as a
    filling disk does; the event files are written as usual."""
    from test_reliability import FailingWrite, WriterOn

    disk = FailingWrite()
    return WriterOn(str(logdir), files=disk), disk


def test_a_failed_embedding_write_leaves_no_temporary_file_and_no_half_step(tmp_path):
    emb, labels, images = embedding()
    w, disk = writer_failing_whole_files(tmp_path)
    w.add_embedding("e", emb, labels, images, global_step=1)
    w.flush()
    before = non_event_files(tmp_path)
    d1 = safe_path_component("e") + "/00001"
    assert before == {f"{d1}/tensors.bytes", f"{d1}/metadata.tsv", f"{d1}/sprite.png", PROJECTOR_FILENAME}
    config_before = (tmp_path / PROJECTOR_FILENAME).read_bytes()

    heal = disk.fail(errno.ENOSPC, after=2)  # tensors, metadata ok; sprite fails
    w.add_embedding("e", emb, labels, images, global_step=2)
    w.add_scalar("s", 1.0, 1)
    with pytest.raises(OSError) as exc:
        w.flush()
    assert exc.value.errno == errno.ENOSPC
    assert non_event_files(tmp_path) == before  # no *.tmp.*, no step 2 files, config untouched
    assert not (tmp_path / "e" / "00002").exists()
    assert (tmp_path / PROJECTOR_FILENAME).read_bytes() == config_before

    heal()
    w.add_embedding("e", emb, labels, images, global_step=3)
    w.close()
    d3 = safe_path_component("e") + "/00003"
    assert non_event_files(tmp_path) == before | {f"{d3}/tensors.bytes", f"{d3}/metadata.tsv",
                                                  f"{d3}/sprite.png"}
    text = (tmp_path / PROJECTOR_FILENAME).read_text()
    assert "00001/tensors.bytes" in text and "00003/sprite.png" in text and "00002" not in text
    assert readback.scalars(str(tmp_path), ".", "s") == [(1, 1.0)]


def test_a_failed_profile_write_leaves_no_temporary_file(tmp_path):
    w, disk = writer_failing_whole_files(tmp_path)
    disk.fail(errno.ENOSPC, after=0)
    w.add_profile({"traceEvents": [{"name": "op", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]},
                  session="s1", host="box")
    with pytest.raises(OSError):
        w.flush()
    w.close()
    assert non_event_files(tmp_path) == set()
    assert not (tmp_path / "plugins").exists()  # the directories it made are gone too


def test_a_symlink_planted_at_the_temporary_name_is_never_written_through(tmp_path):
    logdir = tmp_path / "log"
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    w = SummaryWriter(str(logdir))
    assert w._p._launched.wait(10)  # the starter thread has started the worker
    pid, tid = os.getpid(), w._p._thread.ident  # the worker writes whole files
    assert tid is not None
    planted = logdir / f"{PROJECTOR_FILENAME}.tmp.{pid}.{tid}"
    os.symlink(outside, planted)
    dangling = logdir / safe_path_component("e") / f"00001"
    dangling.mkdir(parents=True)
    os.symlink(tmp_path / "nowhere", dangling / f"tensors.bytes.tmp.{pid}.{tid}")
    emb, labels, images = embedding()
    w.add_embedding("e", emb, labels, images, global_step=1)
    w.close()
    assert outside.read_text() == "precious"
    assert not (tmp_path / "nowhere").exists()
    assert os.path.islink(planted)  # someone else's name: left alone
    config = logdir / PROJECTOR_FILENAME
    assert not os.path.islink(config) and "00001/tensors.bytes" in config.read_text()
    np.testing.assert_array_equal(readback.projector_tensors(str(logdir))["e"], emb)
    assert non_event_files(logdir) == {
        f"{PROJECTOR_FILENAME}.tmp.{pid}.{tid}", f"e/00001/tensors.bytes.tmp.{pid}.{tid}",
        "e/00001/tensors.bytes", "e/00001/metadata.tsv", "e/00001/sprite.png", PROJECTOR_FILENAME}


def test_symlinks_in_the_log_directory_never_lead_a_file_outside_it(tmp_path):
    """A file's own name that is a symlink is replaced (the link, not its target); a directory
    that is a symlink to outside the log directory is refused, and nothing is written."""
    logdir, outside = tmp_path / "log", tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("precious")
    out = _local.LocalOutput(str(logdir))
    (logdir / "d").mkdir(parents=True)
    os.symlink(outside / "precious", logdir / "d" / "a.txt")
    out.write_files({"d/a.txt": b"one", "d/b.txt": b"two"})
    assert (outside / "precious").read_text() == "precious"
    assert not os.path.islink(logdir / "d" / "a.txt") and (logdir / "d" / "a.txt").read_bytes() == b"one"
    assert (logdir / "d" / "b.txt").read_bytes() == b"two"
    os.symlink(outside, logdir / "link")
    for rel in ("link/c.txt", "d/../../outside/c.txt", "..", ".", "/abs"):
        with pytest.raises(ValueError, match="outside the log directory"):
            out.write_files({"d/ok.txt": b"x", rel: b"evil"})
    assert sorted(os.listdir(outside)) == ["precious"]
    assert not (logdir / "d" / "ok.txt").exists()  # all or nothing


def test_whole_files_are_created_exclusively_with_mode_0644(tmp_path):
    target = tmp_path / "t"
    target.write_text("x")
    name = _local.write_new_file(str(tmp_path / "f"), b"data")
    assert os.stat(name).st_mode & 0o777 == 0o644 & ~_umask()
    os.unlink(name)
    os.symlink(target, name)  # now the first-choice name is a link
    other = _local.write_new_file(str(tmp_path / "f"), b"data")
    assert other != name and other.startswith(name + ".")
    assert target.read_text() == "x" and open(other, "rb").read() == b"data"


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.fixture
def tiny_tmpfs(mount_tmpfs):
    return mount_tmpfs("256k")


def _free(path):
    st = os.statvfs(str(path))
    return st.f_bavail * st.f_frsize


def test_a_real_full_disk_leaves_no_temporary_files_holding_space(tiny_tmpfs):
    logdir = tiny_tmpfs / "run"
    w = SummaryWriter(str(logdir))
    w.add_scalar("s", 0.0, 0)
    w.flush()
    free_before = _free(tiny_tmpfs)
    rng = np.random.default_rng(0)
    big = rng.standard_normal((8000, 16)).astype(np.float32)  # 512 kB of tensors.bytes: cannot fit
    errors = []
    for step in range(1, 4):
        w.add_embedding("e", big, global_step=step)
        try:
            w.flush()
        except OSError as e:
            errors.append(e.errno)
    assert errors == [errno.ENOSPC] * 3
    small = rng.standard_normal((5, 3)).astype(np.float32)
    w.add_embedding("small", small, global_step=7)
    w.add_scalar("s", 1.0, 1)
    w.close()
    assert not [f for f in every_file(logdir) if ".tmp." in f]
    assert non_event_files(logdir) == {f"small/00007/tensors.bytes", PROJECTOR_FILENAME}
    assert not (logdir / "e").exists()
    assert _free(tiny_tmpfs) >= free_before - 64 * 1024  # the failed files hold no space
    assert readback.scalars(str(logdir), ".", "s") == [(0, 0.0), (1, 1.0)]


needs_fastio = pytest.mark.skipif(_local._fast_write_files is None, reason="the C kernel _fastio is not built here")


def test_the_whole_file_kernel_is_built():
    import shutil

    if not (shutil.which("cc") or shutil.which("gcc")) or os.name != "posix":
        pytest.skip("no C compiler (or not POSIX): the Python code writes whole files")
    assert _local._fast_write_files is not None, "setup.py should have built gluon_tb/writer/_io/_fastio"


@needs_fastio
def test_whole_files_are_written_by_the_c_kernel_in_one_call(tmp_path, monkeypatch):
    """With the kernel built and os.write, the Python file code is not used: one release of the
    GIL for every file of the step, not 3-4 system calls (each a hand-over) per file."""
    def refuse(*a, **k):
        raise AssertionError("the Python path ran")

    monkeypatch.setattr(_local, "write_new_file", refuse)
    monkeypatch.setattr(_local, "_makedirs", refuse)
    logdir = tmp_path / "log"
    logdir.mkdir()
    out = _local.LocalOutput(str(logdir))
    out.write_files({"a/b/x.bin": b"\x00x", "a/y.tsv": b"y\n", "z.pbtxt": b"z", "a/b/w": bytearray(b"w")})
    assert every_file(logdir) == {"a/b/x.bin", "a/y.tsv", "z.pbtxt", "a/b/w"}
    assert (logdir / "a" / "b" / "x.bin").read_bytes() == b"\x00x" and (logdir / "a" / "b" / "w").read_bytes() == b"w"
    assert os.stat(logdir / "z.pbtxt").st_mode & 0o777 == 0o644 & ~_umask()
    out.write_files({"z.pbtxt": b"z2"})  # replaced whole
    assert (logdir / "z.pbtxt").read_bytes() == b"z2"


@needs_fastio
def test_what_the_c_kernel_leaves_to_python_is_done_the_same_way(tmp_path):
    """A symlinked directory: inside the log directory it is followed (by the Python code, which
    resolves it), leading outside it is refused; the directories the kernel made before it met
    the link are removed first."""
    logdir, outside = tmp_path / "log", tmp_path / "outside"
    (logdir / "real").mkdir(parents=True)
    outside.mkdir()
    os.symlink(logdir / "real", logdir / "alias")
    os.symlink(outside, logdir / "away")
    out = _local.LocalOutput(str(logdir))
    out.write_files({"new/deep/a": b"1", "alias/b": b"2"})
    assert (logdir / "real" / "b").read_bytes() == b"2" and os.path.islink(logdir / "alias")
    assert (logdir / "new" / "deep" / "a").read_bytes() == b"1"
    with pytest.raises(ValueError, match="outside the log directory"):
        out.write_files({"made/here/c": b"3", "away/d": b"4"})
    assert not (logdir / "made").exists() and os.listdir(outside) == []


FSIZE = """
import os, resource, signal, sys
from gluon_tb.writer._io.local_output import LocalOutput
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
logdir = sys.argv[1]
os.makedirs(os.path.join(logdir, "keep"))
with open(os.path.join(logdir, "keep", "old"), "wb") as f:
    f.write(b"old")
try:
    LocalOutput(logdir).write_files({"keep/old": b"new", "m1/m2/small": b"s", "m1/big": b"b" * 5000})
except OSError as e:
    print(e.errno, e.filename)
"""


@needs_fastio
def test_a_failed_c_write_removes_its_temporary_files_and_the_directories_it_made(tmp_path):
    """The kernel's own error path (the Python one is tested with a failing os.write above): a
    write over the file-size limit fails as a full disk does; nothing new is left, the error
    names the file."""
    import subprocess
    import sys

    logdir = tmp_path / "log"
    from repo_paths import ROOT

    out = subprocess.run([sys.executable, "-c", FSIZE, str(logdir)], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout.split()
    assert out == [str(errno.EFBIG), os.path.join(str(logdir), "m1/big")]
    assert every_file(logdir) == {"keep/old"} and (logdir / "keep" / "old").read_bytes() == b"old"
    assert sorted(os.listdir(logdir)) == ["keep"]
