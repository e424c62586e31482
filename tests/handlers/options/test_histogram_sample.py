"""``TensorBoardHandler(histogram_sample=)``: large parameters are histogrammed from an evenly
strided sample, small ones and ``None`` from every value; ``grad_health`` always sees every value.
Read back with TensorBoard's reader and compared, bucket for bucket, with a writer given the
expected sample."""
import math
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter
from gluon_tb.handlers import TensorBoardHandler

warnings.filterwarnings("ignore", message="No trainer specified")
VOCAB, DIM, N, BATCH = 300, 8, 48, 16  # the embedding has 2400 values; 3 batches an epoch


class Unsized(gluon.data.DataLoader):
    """A loader without a length: the first epoch's gradients are stashed on the device."""

    def __init__(self, loader):
        self._loader, self._worker_pool = loader, None

    def __iter__(self):
        return iter(self._loader)

    def __len__(self):
        raise TypeError("this loader has no length")


def estimator(net):
    """``net`` initialized, its Estimator (SGD) and N samples of 2 token ids in batches of BATCH."""
    net.initialize(mx.init.Xavier())
    rs = np.random.RandomState(0)
    x = rs.randint(0, VOCAB, (N, 2)).astype("float32")
    y = rs.randint(0, 4, N).astype("float32")
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                     trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})), data


def fit(logdir, sized=True, epochs=2, **kw):
    mx.random.seed(0)
    net = gluon.nn.HybridSequential(prefix="lm_")
    with net.name_scope():
        net.add(gluon.nn.Embedding(VOCAB, DIM), gluon.nn.Flatten(), gluon.nn.Dense(4))
    est, data = estimator(net)
    est.fit(data if sized else Unsized(data), epochs=epochs, event_handlers=[TensorBoardHandler(logdir, **kw)])
    return net


def buckets(logdir, tag, step, run="train_batch"):
    ev = [e for e in readback.tensor_events(str(logdir), run, tag) if e.step == step]
    assert len(ev) == 1, f"{tag} at {step}: {len(ev)} events"
    return tensor_util.make_ndarray(ev[0].tensor_proto)  # rows: left, right, count


def reference(tmp_path, values):
    d = tmp_path / "reference"
    with SummaryWriter(d) as w:
        w.add_histogram("h", values, 0)
    return buckets(d, "h", 0, run=".")


def stride(n, limit, last):
    k = -(-n // limit)
    while math.gcd(k, last) != 1:
        k += 1
    return k


@pytest.mark.parametrize("sized", [True, False], ids=["len", "no-len"])
def test_a_large_parameter_is_histogrammed_from_an_even_sample(tmp_path, sized):
    net = fit(tmp_path / "run", sized=sized, histogram_sample=1000)
    emb, dense = "lm_embedding0_weight", "lm_dense0_weight"
    k = stride(VOCAB * DIM, 1000, DIM)
    assert k == 3
    last = 2 * (N // BATCH) - 1
    weights = net.collect_params()[emb].data().asnumpy()
    got = buckets(tmp_path / "run", f"weights/{emb}", last)
    assert got[:, 2].sum() == len(range(0, VOCAB * DIM, k)) == 800
    np.testing.assert_array_equal(got, reference(tmp_path, weights.ravel()[::k]))
    for step in (N // BATCH - 1, last):  # the first epoch (stashed when the length is unknown) too
        assert buckets(tmp_path / "run", f"gradients/{emb}", step)[:, 2].sum() == 800
    dense_values = net.collect_params()[dense].data().size  # 64: below the sample size, every value
    assert buckets(tmp_path / "run", f"weights/{dense}", last)[:, 2].sum() == dense_values


def test_none_and_a_large_sample_take_every_value(tmp_path):
    fit(tmp_path / "all", epochs=1, histogram_sample=None)
    fit(tmp_path / "big", epochs=1, histogram_sample=VOCAB * DIM)
    tag, step = "weights/lm_embedding0_weight", N // BATCH - 1
    assert buckets(tmp_path / "all", tag, step)[:, 2].sum() == VOCAB * DIM
    np.testing.assert_array_equal(buckets(tmp_path / "all", tag, step), buckets(tmp_path / "big", tag, step))


def test_grad_health_sees_every_value_whatever_the_sample(tmp_path):
    fit(tmp_path / "sampled", epochs=1, histogram_sample=100, grad_health=True)
    fit(tmp_path / "all", epochs=1, histogram_sample=None, grad_health=True)
    tag = "grad_norm/lm_embedding0_weight"
    sampled, every = readback.scalars(str(tmp_path / "sampled"), "train_batch", tag), \
        readback.scalars(str(tmp_path / "all"), "train_batch", tag)
    assert sampled and [s for s, _ in sampled] == [s for s, _ in every]
    np.testing.assert_allclose([v for _, v in sampled], [v for _, v in every], rtol=1e-6)


def test_the_stride_never_takes_a_single_column(tmp_path):
    from gluon_tb.handlers._options.param_histograms import sampled

    a = mx.nd.arange(128 * 40).reshape((40, 128))
    s = sampled(a, 40)  # 5120 / 40 = 128: a stride of 128 would take column 0 only
    cols = set((s.asnumpy().astype(int) % 128).tolist())
    assert s.size <= 40 and len(cols) == s.size
    assert sampled(a, 5120) is a and sampled(a, None) is a


@pytest.mark.parametrize("value, exc", [(0, ValueError), (-5, ValueError), (1.5, TypeError), ("1M", TypeError),
                                        (True, TypeError)])
def test_bad_histogram_sample_names_the_argument(tmp_path, value, exc):
    with pytest.raises(exc, match="histogram_sample"):
        TensorBoardHandler(tmp_path, histogram_sample=value)


@pytest.mark.parametrize("period", ["epoch", 2])
def test_module_callback_samples_the_same_way(tmp_path, period):
    from gluon_tb.handlers import TensorBoardCallback

    data = mx.sym.var("data")
    emb = mx.sym.Embedding(data, input_dim=VOCAB, output_dim=DIM, name="emb")
    out = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.flatten(emb), num_hidden=4, name="fc"),
                               name="softmax")
    rs = np.random.RandomState(0)
    it = mx.io.NDArrayIter(rs.randint(0, VOCAB, (N, 2)).astype("float32"),
                           rs.randint(0, 4, N).astype("float32"), batch_size=BATCH)
    mod = mx.mod.Module(out, context=mx.cpu())
    d = tmp_path / "module"
    with TensorBoardCallback(d, histogram_sample=1000, histogram_period=period, graph=False) as cb:
        mod.fit(it, num_epoch=2, batch_end_callback=cb, epoch_end_callback=cb.epoch_end,
                optimizer_params={"learning_rate": 0.1})
    last = 2 * (N // BATCH) - 1 if period == "epoch" else 4
    weights = mod.get_params()[0]["emb_weight"].asnumpy()
    got = buckets(d, "weights/emb_weight", last)
    assert got[:, 2].sum() == 800
    if period == "epoch":  # the final weights (at batch 4 they were those after its update)
        np.testing.assert_array_equal(got, reference(tmp_path, weights.ravel()[::3]))
    assert buckets(d, "weights/fc_weight", last)[:, 2].sum() == 4 * 2 * DIM  # small: every value


def test_the_sampler_takes_one_operation_for_an_array_it_has_seen():
    from mxnet_calls import MXNetCalls

    from gluon_tb.handlers._options.param_histograms import Sampler, sampled

    a = mx.nd.array(np.arange(VOCAB * DIM, dtype=np.float32).reshape(VOCAB, DIM))
    small = mx.nd.ones((4, 4))
    sample = Sampler(1000)
    part, shape = sample(a, (VOCAB, DIM))
    assert shape == (800,)
    np.testing.assert_array_equal(part.asnumpy(), sampled(a, 1000).asnumpy())
    a[:] = a * 2  # new values in the same array, as an update writes them
    with MXNetCalls() as calls:
        part, shape = sample(a, (VOCAB, DIM))
        whole, whole_shape = sample(small, (4, 4))
    assert calls.names == ["_imperative_invoke"]  # the slice: no view made, no shape read
    np.testing.assert_array_equal(part.asnumpy(), 2 * np.arange(VOCAB * DIM, dtype=np.float32)[::3])
    assert whole is small and whole_shape == (4, 4)
    sample.forget()
    part, _ = sample(a, (VOCAB, DIM))
    np.testing.assert_array_equal(part.asnumpy(), 2 * np.arange(VOCAB * DIM, dtype=np.float32)[::3])


def test_batch_schedules_queue_histograms_lazily_and_epoch_ends_at_once(tmp_path, monkeypatch):
    """On a batch schedule a group is queued with ``wake=False`` (read a little later, when MXNet
    has copied it); once an epoch it wakes the writer at once, while validation and the epoch's
    end run. The samples go as they are (``private``); both runs write every group."""
    from gluon_tb.writer._io import pipeline

    seen = []
    real = pipeline.Pipeline.put

    def put(self, item, wake=True):
        if item.tag.startswith(("gradients/", "weights/")):
            seen.append((item.tag.split("/")[0], wake))
        return real(self, item, wake)

    monkeypatch.setattr(pipeline.Pipeline, "put", put)
    fit(tmp_path / "batch", epochs=1, histogram_period=2, histogram_sample=1000)
    assert seen and {w for _, w in seen} == {False}
    per_batch = len(seen)
    seen.clear()
    fit(tmp_path / "epoch", epochs=1, histogram_sample=1000)
    assert seen == [("gradients", True), ("weights", True)]
    tag = "weights/lm_embedding0_weight"
    assert len(readback.tensor_events(str(tmp_path / "batch"), "train_batch", tag)) == per_batch // 2
    assert buckets(tmp_path / "epoch", tag, N // BATCH - 1)[:, 2].sum() == 800


@pytest.mark.parametrize("kw", [{}, {"histogram_period": 1, "grad_health": True}], ids=["defaults", "every-batch-health"])
def test_a_row_sparse_parameter_gives_its_gradients_not_its_weights(tmp_path, kw, caplog):
    """gluon.contrib.nn.SparseEmbedding (gluon-nlp's large language models): the handler's defaults
    killed fit at the first epoch's end (Parameter.list_data refuses row_sparse storage). Its
    gradients are histogrammed (dense: the rows the batch did not touch are 0), its weights are not,
    with one warning; the other parameters as ever."""
    mx.random.seed(0)
    net = gluon.nn.Sequential(prefix="sp_")
    with net.name_scope():
        net.add(gluon.contrib.nn.SparseEmbedding(VOCAB, DIM), gluon.nn.Dense(4, flatten=True))
    est, data = estimator(net)
    grads = []

    class Grads(gluon.contrib.estimator.BatchEnd):
        priority = -3000  # before the update handler: the batch's own gradient

        def batch_end(self, estimator, *args, **kwargs):
            grads.append(net.collect_params()["sp_sparseembedding0_weight"].grad().tostype("default").asnumpy())

    with caplog.at_level("WARNING", logger="gluon_tb"):
        est.fit(data, epochs=2, event_handlers=[TensorBoardHandler(str(tmp_path / "run"), graph=False, **kw), Grads()])
    emb, dense = "sp_sparseembedding0_weight", "sp_dense0_weight"
    last = 2 * (N // BATCH) - 1
    tags = {t for r, t in readback.tags(str(tmp_path / "run")) if r == "train_batch" and "/" in t}
    assert f"gradients/{emb}" in tags and f"weights/{emb}" not in tags and f"weights/{dense}" in tags
    assert [r.getMessage() for r in caplog.records if "row_sparse" in r.getMessage()] == [
        f"gluon_tb: the weights of row_sparse parameters ({emb}) are not histogrammed (nor judged by grad_health): "
        "the parameter holds only the rows the last batch pulled, and reading every row would pull the whole "
        "weight; their gradients are"]
    got = buckets(tmp_path / "run", f"gradients/{emb}", last)
    np.testing.assert_array_equal(got, reference(tmp_path, grads[last].ravel()))
