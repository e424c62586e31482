"""Read-only and vanished log directories, as an unprivileged user.

Tests (and CI) run as root, for whom no directory is read-only. These run a small
program as uid/gid 65534 ("nobody", with ``setpriv``, or ``subprocess``'s ``user=``
where ``setpriv`` is missing): a log directory it cannot write, and one deleted
(by someone else, here the test as root) while it writes into it and that it may not
create again. ``SummaryWriter`` must raise a clear error naming the directory at the
first write; ``TensorBoardHandler(on_error="warn")`` must warn once and let training go on.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from repo_paths import ROOT  # noqa: E402
NOBODY = 65534
SETPRIV = "/usr/bin/setpriv"

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="switching to an unprivileged user needs root (run as non-root, the suite "
           "itself is that user: the read-only case is then covered by any run)")


@pytest.fixture
def base():
    """A directory ``nobody`` can enter (pytest's own tmp_path is private to root)."""
    d = tempfile.mkdtemp(prefix="gluon_tb_nobody_")
    os.chmod(d, 0o755)  # root's: nobody may read it, not create in it
    home = os.path.join(d, "home")
    os.mkdir(home)
    os.chown(home, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(base, program, *args, stdin=False):
    """Start ``program`` (Python source) as uid/gid 65534 with this checkout's interpreter."""
    path = os.path.join(base, "prog.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(program))
    os.chmod(path, 0o644)
    env = dict(os.environ, HOME=os.path.join(base, "home"), PYTHONPATH=ROOT,
               PYTHONDONTWRITEBYTECODE="1", MXNET_SUBGRAPH_VERBOSE="0", PYTHONWARNINGS="always")
    cmd = [sys.executable, path, *args]
    kw = {}
    if os.path.exists(SETPRIV):
        cmd = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
    else:
        kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    return subprocess.Popen(cmd, cwd=base, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.PIPE if stdin else None, **kw)


def results(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def test_nobody_really_cannot_write_here(base):
    """The premise: the program runs without root's powers (else every test here proves nothing)."""
    ro = os.path.join(base, "ro")
    os.mkdir(ro, 0o555)
    os.chmod(ro, 0o555)
    p = as_nobody(base, """
        import json, os, sys
        try:
            open(os.path.join(sys.argv[1], "x"), "w")
            print(json.dumps({"wrote": True, "uid": os.getuid()}))
        except PermissionError:
            print(json.dumps({"wrote": False, "uid": os.getuid()}))
    """, ro)
    assert results(p)[0] == [{"wrote": False, "uid": NOBODY}]


WRITER = """
    import json, os, sys
    from gluon_tb import SummaryWriter

    def attempt(fn):
        try:
            fn()
            return None
        except Exception as e:
            return {"type": type(e).__name__, "msg": str(e)}

    for logdir in sys.argv[1:]:
        w = SummaryWriter(logdir)
        w.add_scalar("s", 1.0, 0)
        first = attempt(w.flush)
        w.add_scalar("s", 2.0, 1)  # the writer goes on taking calls
        print(json.dumps({"logdir": logdir, "flush": first, "close": attempt(w.close)}))
"""


def test_read_only_logdir_is_a_clear_error_naming_it_at_the_first_write(base):
    ro = os.path.join(base, "ro")
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    sub = os.path.join(ro, "run")  # would have to be created inside the read-only one
    got, _ = results(as_nobody(base, WRITER, ro, sub))
    for logdir, r in zip([ro, sub], got):
        assert r["logdir"] == logdir
        for call in ("flush", "close"):  # the first write fails, and so does the next one
            assert r[call]["type"] == "PermissionError", r
            assert f"cannot create an event file in {logdir}: Permission denied" in r[call]["msg"]
    assert os.listdir(ro) == []


def test_logdir_deleted_while_writing_and_not_creatable_again(base):
    owned = os.path.join(base, "owned")  # nobody's; its parent is root's
    os.mkdir(owned)
    os.chown(owned, NOBODY, NOBODY)
    logdir = os.path.join(owned, "run")
    p = as_nobody(base, """
        import json, sys
        from gluon_tb import SummaryWriter
        w = SummaryWriter(sys.argv[1])
        w.add_scalar("s", 1.0, 0)
        w.flush()
        print(json.dumps({"path": w._p.event_paths()[None][-1]}), flush=True)
        sys.stdin.readline()  # the test deletes the directory now
        w.add_scalar("s", 2.0, 1)
        try:
            w.flush()
            print(json.dumps({"error": None}))
        except OSError as e:
            print(json.dumps({"error": type(e).__name__, "msg": str(e)}))
        w.add_scalar("s", 3.0, 2)
        try:
            w.close()
        except OSError as e:
            print(json.dumps({"close": type(e).__name__, "msg": str(e)}))
    """, logdir, stdin=True)
    first = json.loads(p.stdout.readline())
    assert first["path"].startswith(logdir + os.sep)
    shutil.rmtree(owned)
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode == 0, err[-3000:]
    flush, close = [json.loads(line) for line in out.splitlines()]
    assert flush["error"] == "EventFileDeletedError"
    assert f"event file {first['path']} was deleted while in use" in flush["msg"]
    assert "Permission denied" in flush["msg"] and base in flush["msg"]
    assert close == {"close": "PermissionError",
                     "msg": close["msg"]} and f"cannot create an event file in {logdir}" in close["msg"]
    assert not os.path.exists(owned)


FIT = """
    import json, os, sys, warnings
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon.contrib.estimator import BatchEnd, EpochEnd, Estimator
    from gluon_tb import TensorBoardHandler

    logdir, mode = sys.argv[1], sys.argv[2]
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(2))
    net.initialize()
    x = mx.nd.random.uniform(shape=(32, 4))
    y = (x.sum(axis=1) > 2).astype("float32")
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=8)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=[mx.metric.Accuracy()],
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))

    class Progress(BatchEnd, EpochEnd):
        batches = epochs = 0
        def batch_end(self, estimator, *args, **kwargs):
            Progress.batches += 1
            if mode == "vanish" and Progress.batches == 3:  # mid-epoch 0
                print(json.dumps({"delete": True}), flush=True)
                sys.stdin.readline()
        def epoch_end(self, estimator, *args, **kwargs):
            Progress.epochs += 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(data, epochs=2, event_handlers=[TensorBoardHandler(logdir, on_error="warn",
                                                                   flush_secs=0.1), Progress()])
    ours = [str(w.message) for w in caught if "gluon_tb" in str(w.message)]
    print(json.dumps({"batches": Progress.batches, "epochs": Progress.epochs, "warnings": ours}))
"""


@pytest.mark.parametrize("mode", ["read_only", "vanish"])
def test_estimator_training_goes_on_under_on_error_warn(base, mode):
    pytest.importorskip("mxnet")
    if mode == "read_only":
        logdir = os.path.join(base, "ro")
        os.mkdir(logdir)
        os.chmod(logdir, 0o555)
        p = as_nobody(base, FIT, logdir, mode)
        out, err = p.communicate(timeout=180)
    else:
        owned = os.path.join(base, "owned")
        os.mkdir(owned)
        os.chown(owned, NOBODY, NOBODY)
        logdir = os.path.join(owned, "run")
        p = as_nobody(base, FIT, logdir, mode, stdin=True)
        line = p.stdout.readline()
        while line and not line.startswith("{"):  # the estimator logs to stdout too
            line = p.stdout.readline()
        assert line and json.loads(line) == {"delete": True}, p.stderr.read()[-3000:]
        shutil.rmtree(owned)
        out, err = p.communicate("go\n", timeout=180)
    assert p.returncode == 0, err[-3000:]
    r = json.loads([x for x in out.splitlines() if x.startswith("{")][-1])
    assert (r["batches"], r["epochs"]) == (8, 2)  # 4 batches x 2 epochs: training went on
    assert len(r["warnings"]) == 1, r["warnings"]  # one warning, the rest only counted
    assert logdir in r["warnings"][0]
    if mode == "read_only":
        assert "cannot create an event file in" in r["warnings"][0]
        assert os.listdir(logdir) == []
    else:
        assert not os.path.exists(owned)
