"""Rank detection and the kvstore averaging scheme, without a cluster (see test_distributed.py)."""
import math
import sys
import types

import pytest

from gluon_tb.handlers._options import distributed as _dist
from gluon_tb.handlers._common.run_writers import RunWriters
from gluon_tb.writer import SummaryWriter


@pytest.mark.parametrize("env, want", [
    ({}, (0, 1, "single")),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}, (2, 4, "env:OMPI_COMM_WORLD_RANK")),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2, "env:PMI_RANK")),
    ({"RANK": "3", "WORLD_SIZE": "8"}, (3, 8, "env:RANK")),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, (0, 2, "env:SLURM_PROCID")),
    ({"RANK": "x", "WORLD_SIZE": "2"}, (0, 1, "single")),  # not numbers: ignored
    ({"RANK": "5", "WORLD_SIZE": "2"}, (0, 1, "single")),  # rank out of range: ignored
])
def test_launcher_variables(env, want):
    w = _dist.from_env(env)
    assert (w.rank, w.size, w.source) == want


class FakeKV:
    """Two workers' kvstores sharing one dict of keys, as a parameter server would."""

    def __init__(self, rank, store, type_="dist_sync"):
        self.rank, self.num_workers, self.type, self.store = rank, 2, type_, store
        self.barriers = 0

    def push(self, key, value):
        assert key not in self.store, "a key is written once"
        self.store[key] = value.asnumpy().copy()

    def pull(self, key, out):
        out[:] = self.store[key]

    def _barrier(self):
        self.barriers += 1


def test_kvstore_mean_is_nan_aware_and_uses_fresh_keys_each_round():
    mx = pytest.importorskip("mxnet")
    store = {}
    kv0, kv1 = FakeKV(0, store), FakeKV(1, store)
    w0 = _dist.detect(kvstore=kv0)
    assert (w0.rank, w0.size, w0.source) == (0, 2, "kvstore:dist_sync")
    m0 = _dist.WorkerMean(w0)
    assert _dist.detect(kvstore=kv1).rank == 1
    assert m0.shared
    # worker 1 "pushes first"; its pull would wait at the barrier on a real cluster
    kv1.push(_dist._KEY_BASE + 1, mx.nd.array([3.0, 0.5, 0.0, 1.0, 1.0, 0.0]))  # sums, counts
    got = m0([1.0, 0.5, float("nan")])
    assert got[0] == 2.0 and got[1] == 0.5 and math.isnan(got[2])  # NaN: only worker 0 had it
    assert sorted(store) == [_dist._KEY_BASE, _dist._KEY_BASE + 1] and kv0.barriers == 1
    kv1.push(_dist._KEY_BASE + 3, mx.nd.array([4.0, 1.0]))
    assert m0([2.0]) == [3.0]  # round 2: keys base+2 (rank 0) and base+3 (rank 1)
    assert _dist._KEY_BASE + 2 in store


def test_single_worker_and_local_kvstores_are_not_shared():
    assert not _dist.WorkerMean(_dist.Worker()).shared
    assert _dist.detect(kvstore=types.SimpleNamespace(type="local", rank=0, num_workers=1)).size == 1
    assert _dist.WorkerMean(_dist.from_env({"RANK": "0", "WORLD_SIZE": "2"})).shared is False
    assert _dist.WorkerMean(_dist.Worker())([1.0, float("nan")])[0] == 1.0


def test_horovod_is_found_first_when_initialised(monkeypatch):
    hvd = types.SimpleNamespace(is_initialized=lambda: True, rank=lambda: 1, size=lambda: 3)
    monkeypatch.setitem(sys.modules, "horovod.mxnet", hvd)
    kv = types.SimpleNamespace(type="dist_sync", rank=0, num_workers=2)
    w = _dist.detect(kvstore=kv)
    assert (w.rank, w.size, w.source) == (1, 3, "horovod")
    hvd.is_initialized = lambda: False
    assert _dist.detect(kvstore=kv).source == "kvstore:dist_sync"


@pytest.mark.parametrize("mode, rank, prefix, muted", [
    ("rank0", 0, "", False), ("rank0", 1, "", True), ("all", 0, "worker_0", False), ("all", 1, "worker_1", False),
])
def test_place_mutes_or_prefixes(tmp_path, mode, rank, prefix, muted):
    out = RunWriters(str(tmp_path), "raise", 1.0)
    _dist.place(out, _dist.Worker(rank, 2, "env:RANK"), mode)
    assert (out.prefix, out.muted) == (prefix, muted)
    out.call("train", SummaryWriter.add_scalar, "x", 1.0, 0)
    assert out.errors == 0
    out.close()
    want = set() if muted else {(prefix + "/train").lstrip("/")}
    got = {str(p.parent.relative_to(tmp_path)) for p in tmp_path.rglob("events.out.tfevents.*")}
    assert got == want


def test_distributed_argument_is_checked():
    pytest.importorskip("mxnet")
    from gluon_tb import TensorBoardCallback, TensorBoardHandler

    for cls in (TensorBoardHandler, TensorBoardCallback):
        with pytest.raises(ValueError, match="distributed must be one of 'rank0', 'all', got str 'rank1'"):
            cls("x", distributed="rank1")


def test_keys_stay_where_mxnet_can_place_them_and_running_out_is_graceful(caplog):
    kv = FakeKV(0, {})
    m = _dist.WorkerMean(_dist.detect(kvstore=kv))
    # (key * 9973) % num_servers is computed in int32 by MXNet: every key must keep it positive
    assert _dist._KEY_END * 9973 < 2 ** 31 and _dist._KEY_BASE > 10_000
    m._round = (_dist._KEY_END - _dist._KEY_BASE) // 2  # the next round would pass the end
    with caplog.at_level("WARNING", logger="gluon_tb.handlers"):
        assert not m.shared
        assert m([1.5]) == [1.5]  # this worker's own value, nothing pushed
    assert kv.store == {} and "no kvstore keys left" in caplog.text


@pytest.mark.parametrize("rank", [0, 1])
def test_a_muted_worker_says_nothing_of_a_used_logdir(tmp_path, monkeypatch, caplog, rank):
    """rank0 mode: rank 1 writes nothing, and said what rank 0 says (a used logdir, seen as rank 0 had
    just made its files; a gradient warning of its own bookkeeping): its place is now found first."""
    import logging

    from estimator_setup import loader, make_est, make_net
    from gluon_tb import TensorBoardHandler

    with SummaryWriter(str(tmp_path / "train")) as w:  # an earlier training's events
        w.add_scalar("epoch_accuracy", 0.5, 0)
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with caplog.at_level(logging.INFO, logger="gluon_tb"):
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path))])
    said = [r.getMessage() for r in caplog.records if r.name.startswith("gluon_tb")]
    reused = [m for m in said if "already holds the events of an earlier training" in m]
    assert len(reused) == (1 if rank == 0 else 0), said
    if rank == 1:
        assert said == [], said


def test_say_once_is_silent_on_a_muted_worker(tmp_path, caplog):
    import logging

    out = RunWriters(str(tmp_path), "raise", 1.0)
    out.place("", muted=True)
    with caplog.at_level(logging.INFO, logger="gluon_tb"):
        out.say_once("k", "gluon_tb: something", logging.WARNING)
    assert caplog.records == []
