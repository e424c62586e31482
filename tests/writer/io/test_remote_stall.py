"""A store that accepts connections and never answers: ``close()`` and the end of a handler's
``fit`` return within ``close_timeout`` (+ a little), naming what was not uploaded."""
import logging
import socket
import threading
import time

import pytest

from gluon_tb import RemoteOptions, RemoteWriteError, SummaryWriter

pytest.importorskip("fsspec")
pytest.importorskip("s3fs")
import fsspec  # noqa: E402

SLACK = 3.0  # seconds past close_timeout: thread wake-ups, building the message


@pytest.fixture
def silent_endpoint(monkeypatch):
    """http://127.0.0.1:<port>: the kernel accepts every connection (backlog), nobody reads or answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1", "NO_PROXY": "127.0.0.1,localhost",
                 "no_proxy": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    # the README's short timeouts: botocore's own give up after 2 + 5 s per try, one try
    monkeypatch.setitem(fsspec.config.conf, "s3", {
        "endpoint_url": f"http://127.0.0.1:{port}", "skip_instance_cache": True,
        "config_kwargs": {"connect_timeout": 2, "read_timeout": 5, "retries": {"max_attempts": 1}}})
    yield port
    sock.close()


def _close_in_thread(w, **kw):
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            w.close(**kw)
        except BaseException as e:  # noqa: BLE001
            out["error"] = e
        out["secs"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_close_returns_within_close_timeout_and_names_what_was_lost(silent_endpoint, caplog):
    w = SummaryWriter("s3://bucket/run", flush_secs=1, remote=RemoteOptions(close_timeout=4))
    assert w.close_timeout == 4
    for i in range(5):
        w.add_scalar("loss", float(i), i)
    w.add_scalar("acc", {"val": 0.5}, 0)  # a second run, s3://bucket/run/acc/val
    time.sleep(1.5)  # the writer thread is now waiting on the store
    t, out = _close_in_thread(w)
    t.join(4 + SLACK + 5)
    assert not t.is_alive(), "close() did not return"
    assert out["secs"] < 4 + SLACK
    err = out["error"]
    assert isinstance(err, RemoteWriteError)
    assert "5 events of s3://bucket/run" in str(err) and "1 events of s3://bucket/run/acc/val" in str(err)
    assert "given up on" in str(err) and err.lost_records == 6
    assert any("given up on" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    w.close()  # a second close returns at once
    t0 = time.monotonic()
    w._close_at_exit()  # and so does the exit hook: it was given up on already
    assert time.monotonic() - t0 < 0.5


def test_close_with_the_default_options_is_bounded_too(silent_endpoint, monkeypatch):
    monkeypatch.setenv("GLUON_TB_CLOSE_TIMEOUT", "3")
    w = SummaryWriter("s3://bucket/run2")
    w.add_scalar("x", 1.0, 1)
    t, out = _close_in_thread(w)
    t.join(3 + SLACK + 5)
    assert not t.is_alive() and out["secs"] < 3 + SLACK
    assert isinstance(out["error"], RemoteWriteError) and "1 events of s3://bucket/run2" in str(out["error"])


def test_the_end_of_fit_is_bounded_for_every_run_together(silent_endpoint, monkeypatch, caplog):
    mx = pytest.importorskip("mxnet")
    from mxnet import gluon
    from mxnet.gluon.contrib.estimator import Estimator

    from gluon_tb.handlers import TensorBoardHandler

    monkeypatch.setenv("GLUON_TB_CLOSE_TIMEOUT", "4")
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    x = mx.nd.ones((32, 3))
    y = mx.nd.zeros((32,))
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=8)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    handler = TensorBoardHandler("s3://bucket/fit", on_error="warn")
    t0 = time.monotonic()
    done = {}

    def run():
        est.fit(data, val_data=data, epochs=2, event_handlers=[handler])
        done["secs"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "fit did not return"
    # two runs (train, validation), one shared deadline: about one close_timeout, not two
    assert done["secs"] < 4 + SLACK + 5  # + the fit itself (a few seconds on a busy machine)
    lost = [r.getMessage() for r in caplog.records if "given up on" in r.getMessage()]
    assert any("s3://bucket/fit/train" in m for m in lost), lost
