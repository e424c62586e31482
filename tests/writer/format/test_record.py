"""Record framing and CRC32C, checked against independent implementations."""
import errno
import io
import shutil
import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluon_tb.writer._format import crc32c as _crc32c
from gluon_tb.writer._format.record import CorruptRecordError, frame, frame_many, read_records

# RFC 3720 B.4 test vectors and the classic check value
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize("data,expected", VECTORS)
def test_pure_python_crc_matches_known_vectors(data, expected):
    assert _crc32c.crc32c_py(data) == expected


@pytest.mark.parametrize("data,expected", VECTORS)
def test_active_crc_matches_known_vectors(data, expected):
    assert _crc32c.crc32c(data) == expected


def test_a_c_implementation_is_active_in_the_test_environment():
    assert _crc32c.IMPLEMENTATION in ("crc32c", "google_crc32c")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_python_and_c_crc_agree_with_google_crc32c(data):
    expected = google_crc32c.value(data)
    assert _crc32c.crc32c_py(data) == expected
    assert _crc32c.crc32c(data) == expected


def _mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@given(st.binary(max_size=2048))
def test_frame_layout_is_length_crc_data_crc(data):
    rec = frame(data)
    n = len(data)
    assert struct.unpack("<Q", rec[:8])[0] == n
    assert struct.unpack("<I", rec[8:12])[0] == _mask(google_crc32c.value(rec[:8]))
    assert rec[12:12 + n] == data
    assert struct.unpack("<I", rec[12 + n:])[0] == _mask(google_crc32c.value(data))


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_frame_many_equals_concatenated_frames_and_reads_back(records):
    buf = frame_many(records)
    assert buf == b"".join(frame(r) for r in records)
    assert list(read_records(io.BytesIO(buf), strict=True)) == records


def test_torn_tail_costs_only_the_last_record():
    buf = frame_many([b"one", b"two", b"three"])
    for cut in range(1, len(frame(b"three"))):
        assert list(read_records(io.BytesIO(buf[:-cut]))) == [b"one", b"two"]


def test_corrupt_data_is_detected():
    buf = bytearray(frame_many([b"hello", b"world"]))
    buf[13] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(read_records(io.BytesIO(bytes(buf)), strict=True))
    assert list(read_records(io.BytesIO(bytes(buf)))) == []


def test_tensorboard_reads_our_framing(tmp_path):
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: F401  (exists)
    from tensorboard.backend.event_processing import event_file_loader

    from gluon_tb.writer._format import proto as _proto

    path = tmp_path / "events.out.tfevents.1.h"
    evs = [_proto.event(1.5, 0, file_version="brain.Event:2"), _proto.event(2.5, 7)]
    path.write_bytes(frame_many(evs))
    loaded = list(event_file_loader.RawEventFileLoader(str(path)).Load())
    assert [event_pb2.Event.FromString(b).step for b in loaded] == [0, 7]


# ---------------------------------------------------------------- the optional C kernel
try:
    from gluon_tb.writer._format import _fastframe
except ImportError:  # no compiler at install: the Python code is what runs, tested above
    _fastframe = None
needs_c = pytest.mark.skipif(_fastframe is None, reason="the C kernel is not built here")


def test_c_kernel_is_built():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the package falls back to Python")
    assert _fastframe is not None, "setup.py should have built gluon_tb/writer/_format/_fastframe"


@needs_c


@pytest.mark.parametrize("data,expected", VECTORS)
def test_c_kernel_crc_matches_known_vectors(data, expected):
    assert _fastframe.crc32c(data) == expected


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_c_kernel_crc_agrees_with_google_crc32c(data):
    assert _fastframe.crc32c(data) == google_crc32c.value(data)
    assert _fastframe.crc32c(memoryview(data)) == google_crc32c.value(data)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40))
def test_c_kernel_frames_exactly_as_the_python_loop(records):
    from gluon_tb.writer._format.record import frame_many_py

    assert _fastframe.frame_many(records) == frame_many_py(records) == b"".join(map(frame, records))


@needs_c
def test_c_kernel_frames_large_records_and_rejects_what_is_not_bytes():
    from gluon_tb.writer._format.record import frame_many_py

    big = [bytes(range(256)) * 4000, b"", b"x" * 7]
    assert _fastframe.frame_many(big) == frame_many_py(big)
    assert list(read_records(io.BytesIO(_fastframe.frame_many(big)), strict=True)) == big
    with pytest.raises(TypeError, match="records must be a list of bytes, got tuple"):
        _fastframe.frame_many((b"a",))
    with pytest.raises(TypeError, match="records must be a list of bytes or Chains, got str at index 1"):
        _fastframe.frame_many([b"a", "b"])
    assert frame_many is _fastframe.frame_many  # what the writer uses


def _chain(record, cuts, kinds):
    """``record`` as a Chain cut at ``cuts``, its pieces bytes, memoryviews and bytearrays."""
    from gluon_tb.writer._format.chain import Chain

    edges = [0, *sorted(c % (len(record) + 1) for c in cuts), len(record)]
    pieces = []
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        kind = kinds[i % len(kinds)] if kinds else 0
        part = record[a:b]
        pieces.append(part if kind == 0 else memoryview(part) if kind == 1 else bytearray(part))
    return Chain(pieces, len(record))


@needs_c
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=5),
                          st.lists(st.integers(0, 2), max_size=4), st.booleans()), min_size=1, max_size=12))
def test_chains_frame_as_their_joined_bytes(tmp_path_factory, spec):
    """A record given as pieces (chain.Chain) is framed, appended and joined exactly as its bytes."""
    import os

    records = [r for r, _, _, _ in spec]
    mixed = [_chain(r, cuts, kinds) if as_chain else r for r, cuts, kinds, as_chain in spec]
    want = frame_many(records)
    assert _fastframe.frame_many(mixed) == want == frame_many_py_of(mixed)
    assert [bytes(m) for m in mixed] == records
    assert [_fastframe.join(m) for m in mixed] == records
    path = tmp_path_factory.mktemp("chains") / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        assert _fastframe.frame_append(fd, mixed, 0) == len(want)
    finally:
        os.close(fd)
    assert path.read_bytes() == want


def frame_many_py_of(records):
    from gluon_tb.writer._format.record import frame_many_py

    return frame_many_py(records)


@needs_c
def test_a_chain_with_a_piece_that_is_not_bytes_is_refused_and_named():
    from gluon_tb.writer._format.chain import Chain

    with pytest.raises(TypeError, match="bytes-like pieces, got str in record 1 at piece 2"):
        _fastframe.frame_many([b"a", Chain([b"b", memoryview(b"c"), "d"], 3)])
    with pytest.raises(TypeError, match="got list at index 0"):
        _fastframe.frame_many([[b"a"]])
    import datetime  # a capsule of another kind: refused by its name

    capsule = datetime.datetime_CAPI
    with pytest.raises(ValueError, match="incorrect name"):
        _fastframe.frame_many([Chain([capsule], 1)])
    assert _fastframe.frame_many([Chain([], 0)]) == frame(b"")  # still working


needs_append = pytest.mark.skipif(getattr(_fastframe, "frame_append", None) is None,
                                  reason="frame_append is not built here (not POSIX)")


@needs_append
@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.binary(max_size=50))
def test_frame_append_appends_the_bytes_frame_many_makes(tmp_path_factory, records, before):
    """What EventFile.write_records hands the C kernel: framing, the deleted-file check and the
    write in one call; the file then holds what frame_many's bytes would have made it."""
    import os

    path = tmp_path_factory.mktemp("append") / "f"
    path.write_bytes(before)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        assert _fastframe.frame_append(fd, records, len(before)) == len(frame_many(records))
    finally:
        os.close(fd)
    assert path.read_bytes() == before + frame_many(records)


@needs_append
def test_frame_append_writes_nothing_to_a_deleted_file_and_raises_what_write_raised(tmp_path):
    import os

    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.unlink(path)
        assert _fastframe.frame_append(fd, [b"abc"], 0) == -1  # deleted: the caller starts a new file
        assert os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(BrokenPipeError):
            _fastframe.frame_append(w, [b"abc"], 0)
    finally:
        os.close(w)
    with pytest.raises(OSError) as e:  # a closed descriptor: fstat fails
        _fastframe.frame_append(w, [b"abc"], 0)
    assert e.value.errno == errno.EBADF
    with pytest.raises(TypeError, match="records must be a list of bytes or Chains, got str at index 0"):
        _fastframe.frame_append(0, ["x"], 0)


CUT_BACK = """
import os, resource, signal, sys
from gluon_tb.writer._format import _fastframe
from gluon_tb.writer._format.record import frame_many
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"x" * 500)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
try:
    _fastframe.frame_append(fd, [b"y" * 300, b"z" * 300], 500)  # the first fits, the second does not
except OSError as e:
    print(e.errno, os.fstat(fd).st_size)
"""


@needs_append
def test_frame_append_cuts_a_failed_write_back_to_the_last_whole_record(tmp_path):
    """A write that fails halfway (the file-size limit here, a full disk in life) leaves the file
    as it was before the call, as EventFile._write_all does."""
    import os
    import subprocess
    import sys

    from repo_paths import ROOT

    out = subprocess.run([sys.executable, "-c", CUT_BACK, str(tmp_path / "f")], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout.split()
    assert out == [str(errno.EFBIG), "500"]
    assert (tmp_path / "f").read_bytes() == b"x" * 500
