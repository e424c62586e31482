"""One graph per run: a resumed ``Module.fit`` in a new process does not log the graph
again, and a ``BucketingModule`` gets its default bucket's graph, not the first batch's bucket's.

TensorBoard's reader keeps one graph per run; a second one is a warning ("more than one graph
event per run") and replaces the first.
"""
import logging
import os

import mxnet as mx
import numpy as np

import readback
import test_module_resume as resume
from gluon_tb.handlers import TensorBoardCallback

CLASSES, BATCH = 3, 4


def graph_events(run_dir):
    return [e for f in readback.event_files(run_dir) for e in readback.raw_events(f) if e.HasField("graph_def")]


def test_a_resumed_process_leaves_the_graph_to_the_first(tmp_path, caplog):
    d, prefix = str(tmp_path / "logs"), str(tmp_path / "m")
    first = resume.run_script(d, prefix, 0, 3)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(graph_events(os.path.join(d, "train"))) == 1
    second = resume.run_script(d, prefix, 2, 4)  # fit.py --load-epoch 2
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(readback.event_files(os.path.join(d, "train"))) == 2
    assert len(graph_events(os.path.join(d, "train"))) == 1
    with caplog.at_level(logging.WARNING):
        graph = readback.multiplexer(d).Graph("train")
    assert "more than one graph event" not in caplog.text
    assert {"fc1/weight", "fc2/bias"} <= {n.name for n in graph.node}


class Buckets(mx.io.DataIter):
    """Batches of sequences of length ``key`` (the bucket key), as MXNet's bucketing examples make them:
    the first batch is of bucket 3, the default bucket is 6."""

    default_bucket_key = 6

    def __init__(self, keys=(3, 6, 3, 6)):
        super().__init__(BATCH)
        self._keys, self._i = list(keys), 0
        self.provide_data = [mx.io.DataDesc("data", (BATCH, self.default_bucket_key))]
        self.provide_label = [mx.io.DataDesc("softmax_label", (BATCH,))]

    def reset(self):
        self._i = 0

    def next(self):
        if self._i == len(self._keys):
            raise StopIteration
        key = self._keys[self._i]
        self._i += 1
        rs = np.random.RandomState(self._i)
        return mx.io.DataBatch([mx.nd.array(rs.rand(BATCH, key))], [mx.nd.array(rs.randint(0, CLASSES, BATCH))],
                               bucket_key=key, provide_data=[mx.io.DataDesc("data", (BATCH, key))],
                               provide_label=self.provide_label)


def sym_gen(key):
    data = mx.sym.var("data")
    pooled = mx.sym.sum(data, axis=1, keepdims=True, name=f"pool_len{key}")  # one node per bucket
    out = mx.sym.FullyConnected(pooled, num_hidden=CLASSES, name="fc")
    return mx.sym.SoftmaxOutput(out, name="softmax"), ("data",), ("softmax_label",)


def test_a_bucketing_module_gets_its_default_buckets_graph(tmp_path):
    d = str(tmp_path)
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=Buckets.default_bucket_key, context=mx.cpu())
    seen = []
    with TensorBoardCallback(d) as cb:
        mod.fit(Buckets(), num_epoch=1, optimizer="sgd", initializer=mx.init.Xavier(),
                batch_end_callback=[lambda p: seen.append(p.locals["data_batch"].bucket_key), cb],
                epoch_end_callback=cb.epoch_end)
    assert seen[0] == 3  # the first batch is not of the default bucket
    assert len(graph_events(os.path.join(d, "train"))) == 1
    names = {n.name for n in readback.multiplexer(d).Graph("train").node}
    assert "pool_len6" in names and "pool_len3" not in names


def test_a_continued_training_in_a_new_log_directory_logs_the_graph(tmp_path):
    """A trainer that already made updates continues its steps, but into a log directory nobody
    wrote: the graph is this run's first, and is logged (benchmarks' paired fits found it missing)."""
    import warnings

    from gluon_tb.handlers import TensorBoardHandler
    from estimator_setup import loader, make_est, make_net

    warnings.filterwarnings("ignore", message="No trainer specified")
    est = make_est(make_net())
    est.fit(loader(), epochs=1)  # no handler: the trainer's updates make the next fit a continuation
    h = TensorBoardHandler(str(tmp_path / "fresh"))
    est.fit(loader(), epochs=1, event_handlers=[h])
    assert h.resumed_from  # it did continue the steps
    assert len(graph_events(str(tmp_path / "fresh" / "train"))) == 1
