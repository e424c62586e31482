"""The writer's outputs (``gluon_tb/writer/_io/output.py``): the worker writes through the
output it is handed, so a test hands in an in-memory one, or a local one whose ``os.write``
fails, instead of patching module globals."""
import errno
import os

import pytest
from tensorboard.compat.proto import event_pb2

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer._io.items import Action
from gluon_tb.writer._io.memory_output import MemoryOutput
from gluon_tb.writer._io.pipeline import Pipeline
from test_reliability import FailingWrite, WriterOn


def events(out, run=None):
    return [event_pb2.Event.FromString(r) for r in out.records(run)]


def scalars(out, run=None):
    return [(e.summary.value[0].tag, e.step, e.summary.value[0].simple_value)
            for e in events(out, run)
            if e.HasField("summary") and e.summary.value[0].WhichOneof("value") == "simple_value"]


def test_the_pipeline_writes_each_run_and_whole_files_through_the_output_it_is_handed():
    out = MemoryOutput()
    p = Pipeline(out, flush_secs=3600)
    p.put_scalar((None, "loss", 0.5, 1, 10.0))
    p.put_scalar(("validation", "loss", 0.25, 1, 10.0))

    def action(sink):
        sink.write_files({"a/x.tsv": b"1\t2\n", "b.txt": b"b"})
        sink.write_event(event_pb2.Event(step=7, wall_time=11.0).SerializeToString(), "validation")

    assert p.put(Action(action, 0))
    p.put_scalar((None, "loss", 0.125, 2, 12.0))
    assert p.close() is True
    assert p.take_error() is None
    first = events(out)[0]
    assert first.file_version == "brain.Event:2" and first.step == 0
    assert scalars(out) == [("loss", 1, 0.5), ("loss", 2, 0.125)]
    assert scalars(out, "validation") == [("loss", 1, 0.25)]
    assert [e.step for e in events(out, "validation")] == [0, 1, 7]  # the action's event in queue order
    assert out.files == {"a/x.tsv": b"1\t2\n", "b.txt": b"b"}
    assert set(out.event_files) == {None, "validation"}
    assert all(f.closed for files in out.event_files.values() for f in files)


def test_a_failed_write_of_the_output_keeps_nothing_of_it_and_is_reported_once():
    out = MemoryOutput()
    p = Pipeline(out, flush_secs=3600)
    p.put_scalar((None, "s", 0.0, 0, 0.0))
    assert p.flush()
    out.fail(errno.ENOSPC)
    p.put_scalar((None, "s", 1.0, 1, 0.0))
    p.put(Action(lambda sink: sink.write_files({"f": b"x"}), 0))
    assert p.flush()
    err = p.take_error()
    assert isinstance(err, OSError) and err.errno == errno.ENOSPC
    assert p.take_error() is None  # once
    out.heal()
    p.put_scalar((None, "s", 2.0, 2, 0.0))
    assert p.close() is True
    assert scalars(out) == [("s", 0, 0.0), ("s", 2, 2.0)]
    assert out.files == {}
    assert p.dropped == 1  # the lost scalar, counted (and not logged: that write failed too)


def test_a_slow_output_holds_the_producer_to_the_queue_bound():
    out = MemoryOutput(delay=0.002)
    limit = 64 << 10
    p = Pipeline(out, flush_secs=3600, max_queue_bytes=limit)
    from gluon_tb.writer._io.items import Summary

    peak = 0
    for i in range(100):
        assert p.put(Summary(None, "h", lambda tag, payload: b"", None, i, 0.0, 16 << 10))
        peak = max(peak, p.queued_bytes())
    assert p.close() is True
    assert peak <= limit + (16 << 10)
    assert [e.step for e in events(out) if e.HasField("summary")] == list(range(100))


def test_a_reopened_writer_keeps_the_output_it_was_given(tmp_path):
    disk = FailingWrite()
    w = WriterOn(tmp_path, records=disk)
    w.add_scalar("s", 1.0, 1)
    w.close()
    w.reopen()
    disk.fail(errno.EIO)
    w.add_scalar("s", 2.0, 2)
    with pytest.raises(OSError) as exc:
        w.flush()
    assert exc.value.errno == errno.EIO
    disk.heal()
    w.add_scalar("s", 3.0, 3)
    w.close()
    assert readback.scalars(str(tmp_path), ".", "s") == [(1, 1.0), (3, 3.0)]


def test_a_writer_on_a_memory_output_leaves_no_file(tmp_path):
    out = MemoryOutput(str(tmp_path / "never"))
    w = WriterOn(str(tmp_path / "never"), output=out)
    w.add_scalar("s", 1.0, 1)
    w.add_text("t", "hello", 2)
    w.close()
    assert not os.path.exists(tmp_path / "never")
    assert scalars(out) == [("s", 1, 1.0)]
    (text,) = [e for e in events(out) if e.step == 2]
    assert text.summary.value[0].tag == "t" and text.summary.value[0].tensor.string_val == [b"hello"]
    assert [e.step for e in events(out)] == [0, 1, 2]


def test_the_local_output_is_the_default_and_names_its_directory(tmp_path):
    w = SummaryWriter(f"file://{tmp_path}/run")
    assert w._p.logdir == f"{tmp_path}/run"  # file:// stripped, as before
    assert os.path.isdir(tmp_path / "run")  # made at once, as mxboard did
    w.close()
