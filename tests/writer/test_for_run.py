"""SummaryWriter.for_run: several runs written by one writer's queue and thread, read back through TensorBoard."""
import json
import os
import threading
import warnings

import numpy as np
import pytest

import readback
from gluon_tb import SummaryWriter, WriterClosedError


def writer_threads():
    return [t for t in threading.enumerate() if t.name == "gluon_tb-writer" and t.is_alive()]


def test_runs_of_one_writer_are_read_back_each_in_its_own_run_with_nothing_at_the_top(tmp_path):
    d = str(tmp_path)
    before = len(writer_threads())
    with SummaryWriter(d) as sw:
        train, val = sw.for_run("train"), sw.for_run("validation")
        for i in range(3):
            train.add_scalar("loss", 1.0 / (i + 1), i)
            val.add_scalar("loss", 2.0 / (i + 1), i)
        train.add_histogram("w", np.arange(100, dtype=np.float32), 2)
        val.add_scalar("acc", {"top1": 0.5, "top5": 0.75}, 1)  # mxboard's named curves: runs under the run
        train.add_text("note", "hello", 0)
        sw.flush()  # the worker has started (its starter thread starts it after the first call)
        assert train._p is sw._p and val._p is sw._p  # one queue
        assert sw._p._thread in writer_threads() and len(writer_threads()) <= before + 1  # one thread
        assert train.logdir == os.path.join(d, "train") and val.get_logdir() == os.path.join(d, "validation")
    assert readback.tags(d) == {("train", "loss"), ("validation", "loss"), ("train", "w"),
                                ("validation/acc/top1", "acc"), ("validation/acc/top5", "acc"),
                                ("train", "note")}
    assert readback.scalars(d, "train", "loss") == [(i, float(np.float32(1.0 / (i + 1)))) for i in range(3)]
    assert readback.scalars(d, "validation", "loss") == [(i, float(np.float32(2.0 / (i + 1)))) for i in range(3)]
    assert readback.scalars(d, "validation/acc/top5", "acc") == [(1, 0.75)]
    assert not [f for f in os.listdir(d) if ".tfevents." in f]  # no event file of the writer's own run
    assert sw._p._thread not in writer_threads()  # closed with the writer


def test_the_same_name_is_the_same_writer_and_a_run_of_a_run_is_under_it(tmp_path):
    with SummaryWriter(tmp_path) as sw:
        a = sw.for_run("eval")
        assert sw.for_run("eval") is a
        clean = a.for_run("clean")
        assert clean is sw.for_run("eval/clean")
        clean.add_scalar("acc", 0.9, 1)
        sw.add_scalar("lr", 0.1, 1)  # the writer's own run still works beside them
    assert readback.tags(str(tmp_path)) == {("eval/clean", "acc"), (".", "lr")}


def test_embeddings_and_graph_of_a_run_go_to_its_directory(tmp_path):
    mx = pytest.importorskip("mxnet")
    d = str(tmp_path)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(4, in_units=3))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 3)))
    vectors = np.arange(12, dtype=np.float32).reshape(4, 3)
    with SummaryWriter(d) as sw:
        train = sw.for_run("train")
        train.add_embedding("emb", vectors, labels=["a", "b", "c", "d"], global_step=0)
        train.add_graph(net)
    assert sorted(os.listdir(d)) == ["train"]
    (tensor,) = readback.projector_tensors(os.path.join(d, "train")).values()
    np.testing.assert_array_equal(np.asarray(tensor, dtype=np.float32), vectors)
    assert readback.multiplexer(d).Runs()["train"]["graph"] is True


def test_embeddings_of_a_run_logged_through_writers_made_again_all_stay_in_its_projector(tmp_path):
    """``sw.for_run("train")`` made anew for each call: the projector's config, rewritten whole at
    each embedding, still lists the earlier ones."""
    import gc

    d = str(tmp_path)
    with SummaryWriter(d) as sw:
        for step in range(3):
            sw.for_run("train").add_embedding("emb", np.full((4, 2), step, dtype=np.float32), global_step=step)
            gc.collect()  # the temporary writer is gone
    tensors = readback.projector_tensors(os.path.join(d, "train"))
    assert len(tensors) == 3
    assert sorted(float(np.asarray(t, dtype=np.float32)[0, 0]) for t in tensors.values()) == [0.0, 1.0, 2.0]


def test_closing_the_writer_closes_its_runs_and_reopening_reopens_them(tmp_path):
    d = str(tmp_path)
    sw = SummaryWriter(d)
    train = sw.for_run("train")
    train.add_scalar("loss", 1.0, 0)
    sw.close()
    with pytest.raises(WriterClosedError):
        train.add_scalar("loss", 2.0, 1)
    with pytest.raises(WriterClosedError):
        sw.for_run("validation")
    sw.reopen()
    train.add_scalar("loss", 3.0, 2)
    sw.close()
    assert readback.scalars(d, "train", "loss") == [(0, 1.0), (2, 3.0)]
    assert len([f for f in os.listdir(os.path.join(d, "train")) if ".tfevents." in f]) == 2  # new files


def test_closing_a_run_writes_what_it_logged_and_only_it_stops(tmp_path):
    d = str(tmp_path)
    with SummaryWriter(d, flush_secs=3600) as sw:
        train, val = sw.for_run("train"), sw.for_run("validation")
        train.add_scalar("loss", 1.0, 0)
        val.close()
        assert readback.scalars(d, "train", "loss") == [(0, 1.0)]  # on disk at its close
        with pytest.raises(WriterClosedError):
            val.add_scalar("loss", 2.0, 0)
        train.add_scalar("loss", 4.0, 1)
        val.reopen()  # the writer it came from is open: it only takes calls again
        val.add_scalar("loss", 5.0, 1)
        assert val._p is sw._p
    assert readback.scalars(d, "train", "loss") == [(0, 1.0), (1, 4.0)]
    assert readback.scalars(d, "validation", "loss") == [(1, 5.0)]


def test_reopening_a_run_reopens_the_writer_it_came_from(tmp_path):
    d = str(tmp_path)
    sw = SummaryWriter(d)
    train = sw.for_run("train")
    sw.close()
    train.reopen()
    train.add_scalar("loss", 1.0, 0)
    sw.add_scalar("lr", 0.5, 0)
    sw.close()
    assert readback.tags(d) == {("train", "loss"), (".", "lr")}


def test_purge_step_of_a_run_hides_its_later_steps_only_and_is_not_warned_about(tmp_path):
    d = str(tmp_path)
    earlier = SummaryWriter(d)  # its files still open (a warning's cause: see the next test)
    for run in ("train", "validation"):
        for i in range(10):
            earlier.for_run(run).add_scalar("loss", float(i), i)
    earlier.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # appending to a resumed run is on purpose: no warning
        with SummaryWriter(d) as sw:
            sw.for_run("train", purge_step=5).add_scalar("loss", 105.0, 5)
    earlier.close()
    assert readback.scalars(d, "train", "loss") == [(i, float(i)) for i in range(5)] + [(5, 105.0)]
    assert readback.scalars(d, "validation", "loss") == [(i, float(i)) for i in range(10)]


def test_another_writer_appending_to_a_run_is_still_warned_about(tmp_path):
    d = str(tmp_path)
    with SummaryWriter(d) as a, SummaryWriter(d) as b:
        a.for_run("train").add_scalar("x", 1.0, 0)
        a.flush()
        with pytest.warns(RuntimeWarning, match="two writers are logging into the run directory"):
            b.for_run("train").add_scalar("x", 2.0, 1)
            b.flush()


@pytest.mark.parametrize("name, error, words", [
    ("../up", ValueError, "name must be a relative name"),
    ("", ValueError, "name must be a relative name"),
    ("/abs", ValueError, "name must be a relative name"),
    (3, TypeError, "name must be a str, got"),
])
def test_a_bad_run_name_is_refused_by_name_and_the_writer_goes_on(tmp_path, name, error, words):
    with SummaryWriter(tmp_path) as sw:
        sw.for_run("train").add_scalar("a", 1.0, 0)
        with pytest.raises(error, match=words):
            sw.for_run(name)
        with pytest.raises(ValueError, match="purge_step"):
            sw.for_run("train", purge_step=-1)
        sw.for_run("train").add_scalar("a", 2.0, 1)
    assert readback.scalars(str(tmp_path), "train", "a") == [(0, 1.0), (1, 2.0)]


R3 = "/".join(["r" * 250] * 3)  # 752 bytes, each part a file name's most


@pytest.mark.parametrize("call, word", [
    (lambda sw: sw.for_run("a/" * 1200 + "b"), "name makes a run directory of 2401 bytes and 1201 levels"),
    (lambda sw: sw.for_run("/".join(["x" * 250] * 5)), "name makes a run directory of 1254 bytes and 5 levels"),
    (lambda sw: sw.for_run("/".join(["x" * 250] * 4)).for_run("y" * 30), "of 1034 bytes and 5 levels"),
    (lambda sw: sw.for_run("d/" * 40 + "e").for_run("f/" * 30 + "g"), "of 143 bytes and 72 levels"),
    (lambda sw: sw.add_scalar("/".join(["t" * 200] * 3), {"/".join(["n" * 200] * 3): 1.0}, 0),
     "value name makes a run directory of 1205 bytes and 6 levels"),
    (lambda sw: sw.for_run(R3).add_scalar("t" * 150, {"n" * 150: 1.0}, 0),
     "value name makes a run directory of 1054 bytes"),
    (lambda sw: sw.for_run(R3 + "/" + "r" * 150).add_scalars("m" * 60, {"k" * 60: 1.0}, 0),
     "tag_scalar_dict key makes a run directory of 1025 bytes and 5 levels"),
])
def test_a_run_too_long_or_deep_for_a_path_is_refused_at_the_call(tmp_path, call, word):
    """A run name's parts each fit in a file name, but the whole would not fit in a path (or
    os.makedirs recursed past Python's limit at the first flush): refused by name at the call,
    and the writer goes on."""
    with SummaryWriter(tmp_path) as sw:
        sw.add_scalar("a", 1.0, 0)
        with pytest.raises(ValueError, match=word):
            call(sw)
        sw.add_scalar("a", 2.0, 1)
        sw.for_run("d/" * 40 + "e").add_scalar("deep", 3.0, 0)  # 41 levels: made
    assert readback.scalars(str(tmp_path), ".", "a") == [(0, 1.0), (1, 2.0)]
    assert readback.scalars(str(tmp_path), "d/" * 40 + "e", "deep") == [(0, 3.0)]


def test_export_scalars_of_a_run_has_its_own_curves_named_from_it(tmp_path):
    d = str(tmp_path / "logs")
    out = tmp_path / "scalars.json"
    with SummaryWriter(d) as sw:
        train = sw.for_run("train")
        train.add_scalar("loss", 1.0, 1, walltime=10.0)
        train.add_scalar("acc", {"top1": 0.5}, 1, walltime=11.0)
        sw.for_run("validation").add_scalar("loss", 9.0, 1, walltime=12.0)
        train.export_scalars(str(out))
    run = os.path.join(d, "train")
    assert json.loads(out.read_text()) == {f"{run}/loss": [[10.0, 1, 1.0]], f"{run}/acc/top1": [[11.0, 1, 0.5]]}


def test_the_roots_export_keys_a_runs_named_curves_as_the_runs_own_export_does(tmp_path):
    d = str(tmp_path / "logs")
    with SummaryWriter(d) as sw:
        train = sw.for_run("train")
        train.add_scalar("acc", {"top1": 0.5}, 1, walltime=10.0)
        train.add_scalars("lr", {"g0": 0.25}, 1, walltime=11.0)
        train.add_scalar("loss", 2.0, 1, walltime=12.0)
        sw.export_scalars(str(tmp_path / "root.json"))
        train.export_scalars(str(tmp_path / "run.json"))
    run = os.path.join(d, "train")
    want = {f"{run}/acc/top1": [[10.0, 1, 0.5]], f"{run}/lr_g0": [[11.0, 1, 0.25]], f"{run}/loss": [[12.0, 1, 2.0]]}
    assert json.loads((tmp_path / "run.json").read_text()) == want
    assert json.loads((tmp_path / "root.json").read_text()) == {k.replace(run, d + "/train"): v for k, v in want.items()}


def test_export_keys_of_a_run_whose_name_starts_with_its_tag(tmp_path):
    """``for_run("acc_val")``'s tag ``acc`` is keyed ``<logdir>/acc_val/acc``: not taken for a curve of
    ``add_scalars("acc", {"val": ...})`` (``<logdir>/acc_val``), which the root's own ``acc_val`` tag is
    keyed as too; the same key from the root's export and, relative to it, from the run's."""
    d = str(tmp_path / "logs")
    with SummaryWriter(d) as sw:
        sw.add_scalar("acc_val", 1.0, 0, walltime=10.0)
        sw.add_scalars("loss", {"val": 2.0}, 0, walltime=11.0)
        acc_val = sw.for_run("acc_val")
        acc_val.add_scalar("acc", 3.0, 0, walltime=12.0)
        acc_val.add_scalar("acc", {"top1": 4.0}, 0, walltime=13.0)  # a named curve of the run
        sw.export_scalars(str(tmp_path / "root.json"))
        acc_val.export_scalars(str(tmp_path / "run.json"))
    root = json.loads((tmp_path / "root.json").read_text())
    assert root == {f"{d}/acc_val": [[10.0, 0, 1.0]], f"{d}/loss_val": [[11.0, 0, 2.0]],
                    f"{d}/acc_val/acc": [[12.0, 0, 3.0]], f"{d}/acc_val/acc/top1": [[13.0, 0, 4.0]]}
    run = os.path.join(d, "acc_val")
    assert json.loads((tmp_path / "run.json").read_text()) == {f"{run}/acc": [[12.0, 0, 3.0]],
                                                               f"{run}/acc/top1": [[13.0, 0, 4.0]]}


def test_runs_logged_from_several_threads_keep_every_event(tmp_path):
    d = str(tmp_path)
    with SummaryWriter(d) as sw:
        def log(run):
            w = sw.for_run(run)
            for i in range(2000):
                w.add_scalar("x", float(i), i)

        threads = [threading.Thread(target=log, args=(f"r{k}",)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for k in range(4):
        assert readback.scalars(d, f"r{k}", "x") == [(i, float(i)) for i in range(2000)]


def test_a_run_closed_by_a_with_block_is_open_again_when_asked_for_again(tmp_path):
    d = str(tmp_path)
    with SummaryWriter(d) as sw:
        for epoch in range(3):
            with sw.for_run("train") as t:  # its close() at the block's end leaves sw open
                t.add_scalar("loss", float(epoch), epoch)
            with pytest.raises(WriterClosedError):
                t.add_scalar("loss", -1.0, epoch)
        sw.add_scalar("lr", 0.1, 0)
    assert readback.scalars(d, "train", "loss") == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert readback.tags(d) == {("train", "loss"), (".", "lr")}


@pytest.mark.parametrize("timeout, error", [("x", TypeError), (True, TypeError), (-1, ValueError),
                                            (float("nan"), ValueError)])
def test_a_bad_close_timeout_is_refused_by_name_and_leaves_the_writer_open(tmp_path, timeout, error):
    d = str(tmp_path)
    sw = SummaryWriter(d)
    train = sw.for_run("train")
    train.add_scalar("loss", 1.0, 0)
    for w in (train, sw):
        with pytest.raises(error, match=r"timeout must be None or a number of seconds >= 0, got"):
            w.close(timeout=timeout)
    train.add_scalar("loss", 2.0, 1)  # neither was closed
    sw.close(timeout=30)
    assert readback.scalars(d, "train", "loss") == [(0, 1.0), (1, 2.0)]
