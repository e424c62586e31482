"""The host-read counter itself: it must see gluon_tb's reads and only those."""
import os
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet.ndarray import NDArray

from synccount import METHODS, _GLUON_TB, count_host_reads


def _as_gluon_tb(src: str, **names):
    """Run ``src`` as if it were code in a file under gluon_tb/ (a frame the counter must blame)."""
    exec(compile(src, os.path.join(_GLUON_TB, "handlers", "_fake.py"), "exec"), dict(names))


def test_counts_each_method_once_from_a_gluon_tb_frame():
    x = mx.nd.ones((1,))
    with count_host_reads() as c:
        _as_gluon_tb("x.asnumpy()\nx.asscalar()\nbool(x)\nx.wait_to_read()\n", x=x)
    assert [r.method for r in c.calls] == ["asnumpy", "asscalar", "__bool__", "wait_to_read"]
    assert all(r.where.startswith(os.path.join("gluon_tb", "handlers", "_fake.py") + ":") for r in c.calls)
    assert [r.where.split(":")[1].split()[0] for r in c.calls] == ["1", "2", "3", "4"]


def _update(m):
    m.update([mx.nd.array([0, 1])], [mx.nd.array([[1, 0], [0, 1]])])


def test_a_read_inside_mxnet_is_blamed_on_the_first_frame_outside_mxnet():
    m = mx.metric.Accuracy()
    with count_host_reads() as c:
        _update(m)                                    # like Module.fit: the caller is not gluon_tb
    assert c.calls == [] and c.other >= 1
    with count_host_reads() as c:
        _as_gluon_tb("m.update([mx.nd.array([0, 1])], [mx.nd.array([[1, 0], [0, 1]])])", m=m, mx=mx)
    assert c.calls and {(r.method, r.where.split(" ")[0]) for r in c.calls} == {
        ("asnumpy", os.path.join("gluon_tb", "handlers", "_fake.py") + ":1")}


def test_ignores_the_test_and_other_threads():
    x = mx.nd.ones((1,))
    with count_host_reads() as c:
        x.asnumpy()                                   # the test's own read
        t = threading.Thread(target=_as_gluon_tb, args=("x.asnumpy()",), kwargs={"x": x})
        t.start()
        t.join()                                      # a gluon_tb read on another thread
    assert c.calls == []
    assert c.other == 1


def test_restores_the_methods():
    before = {n: NDArray.__dict__[n] for n in METHODS}
    with pytest.raises(RuntimeError):
        with count_host_reads():
            raise RuntimeError("boom")
    assert {n: NDArray.__dict__[n] for n in METHODS} == before


def test_a_numpy_or_stdlib_function_reading_for_gluon_tb_is_blamed_on_gluon_tb():
    import sysconfig

    x = mx.nd.ones((1,))
    for lib in (os.path.dirname(np.__file__), sysconfig.get_paths()["stdlib"]):
        ns = {}
        exec(compile("def read(a):\n    return a.asnumpy()\n", os.path.join(lib, "_fake.py"), "exec"), ns)
        with count_host_reads() as c:
            ns["read"](x)                              # the test calls the library: not counted
            _as_gluon_tb("read(x)", read=ns["read"], x=x)  # gluon_tb calls it: counted
        assert [(r.method, r.where.split(" ")[0]) for r in c.calls] == [
            ("asnumpy", os.path.join("gluon_tb", "handlers", "_fake.py") + ":1")]
        assert c.other == 1
