"""``word_vectors=``: an Embedding's rows with their tokens, read back with TensorBoard's projector."""
import collections
import os
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd

import gluon_tb
import readback
import repo_paths
from gluon_tb.handlers import TensorBoardHandler, WordVectors
from synccount import count_host_reads
from test_embedding import Projector

nlp = pytest.importorskip("gluonnlp")
warnings.filterwarnings("ignore", message="No trainer specified")

DIM, CLASSES, N, BATCH = 6, 3, 48, 16
TEXT = ("the cat sat on the mat the dog sat on the log a cat and a dog the end "
        "of the story is the cat").split()
COUNTS = collections.Counter(TEXT)


def make_vocab():
    return nlp.Vocab(COUNTS)  # <unk> <pad> <bos> <eos>, then the words by count, ties by token


def make_net(vocab_size, second=0):
    """Embedding(vocab_size) -> Dense; with ``second``, another Embedding(second) beside it."""
    class Net(gluon.HybridBlock):
        def __init__(self, **kw):
            super().__init__(**kw)
            with self.name_scope():
                self.embedding = gluon.nn.Embedding(vocab_size, DIM)
                self.other = gluon.nn.Embedding(second, DIM) if second else None
                self.out = gluon.nn.Dense(CLASSES)

        def hybrid_forward(self, F, x):
            h = self.embedding(x)
            if self.other is not None:
                h = h + self.other(F.clip(x, 0, second - 1))
            return self.out(h)

    net = Net(prefix="lm_")
    net.initialize(mx.init.Uniform(1.0))
    net.hybridize()
    return net


def loader(vocab_size, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randint(0, vocab_size, size=N).astype("float32")
    y = rs.randint(0, CLASSES, size=N).astype("float32")
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)


def fit(net, handler, epochs=2, extra=()):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=mx.cpu())
    est.fit(loader(net.embedding._kwargs["input_dim"]), epochs=epochs, event_handlers=[handler, *extra])


class WeightsAtEpochEnd(EpochEnd):
    """The Embedding's weights at each epoch end, after every other handler (test oracle)."""

    priority = 10 ** 6

    def __init__(self, param):
        self.param, self.seen = param, []

    def epoch_end(self, estimator, *args, **kwargs):
        self.seen.append(self.param.data().asnumpy().copy())
        return False


def frequency_order(vocab, counts):
    """Row indices most frequent first, ties in index order, uncounted tokens last."""
    toks = vocab.idx_to_token
    return sorted(range(len(toks)), key=lambda i: (toks[i] not in counts, -counts.get(toks[i], 0), i))


# ------------------------------------------------------------ what is logged
def test_top_rows_in_frequency_order_labelled_with_their_tokens(tmp_path):
    d = str(tmp_path)
    vocab = make_vocab()
    net = make_net(len(vocab))
    fit(net, TensorBoardHandler(d, word_vectors=WordVectors(layer="embedding0", vocab=vocab, counts=COUNTS,
                                                            top=5)))
    order = frequency_order(vocab, COUNTS)[:5]
    want_tokens = [vocab.idx_to_token[i] for i in order]
    assert want_tokens[:2] == ["the", "cat"]  # 7 and 3 (ties by index: cat before dog, sat, on, a)
    p = Projector(d)
    (e,) = p.config(run="train")["embeddings"]
    assert e["tensorName"] == "word_vectors"
    assert e["tensorPath"] == "word_vectors/00001/tensors.bytes"  # the end of training: epoch index 1
    assert e["metadataPath"] == "word_vectors/00001/metadata.tsv"
    tensor = p.tensor("word_vectors", run="train")
    assert tensor.size == 5 * DIM
    np.testing.assert_array_equal(tensor.reshape(5, DIM), net.embedding.weight.data().asnumpy()[order])
    assert p.metadata("word_vectors", run="train").splitlines() == want_tokens  # one column: no header
    assert sorted(os.listdir(os.path.join(d, "train", "word_vectors"))) == ["00001"]


def test_projector_config_pbtxt_names_the_tensor_and_its_metadata(tmp_path):
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    d = str(tmp_path)
    vocab = make_vocab()
    fit(make_net(len(vocab)), TensorBoardHandler(d, word_vectors=WordVectors(vocab=vocab, tag="words")), epochs=1)
    with open(os.path.join(d, "train", "projector_config.pbtxt")) as f:
        cfg = text_format.Parse(f.read(), ProjectorConfig())
    (e,) = cfg.embeddings
    assert (e.tensor_name, e.tensor_path, e.metadata_path) == \
        ("words", "words/00000/tensors.bytes", "words/00000/metadata.tsv")
    assert list(e.tensor_shape) == [len(vocab), DIM]
    assert readback.projector_tensors(os.path.join(d, "train"))["words"].shape == (len(vocab), DIM)
    # no counts known: every row, in index order, special tokens included
    assert Projector(d).metadata("words", run="train").splitlines() == vocab.idx_to_token


def test_vocab_counter_attribute_is_used(tmp_path):
    d = str(tmp_path)
    vocab = make_vocab()
    vocab.counter = COUNTS  # a vocabulary that keeps its counts
    net = make_net(len(vocab))
    fit(net, TensorBoardHandler(d, word_vectors=WordVectors(vocab=vocab, top=3)), epochs=1)
    order = frequency_order(vocab, COUNTS)[:3]
    assert Projector(d).metadata("word_vectors", run="train").splitlines() == \
        [vocab.idx_to_token[i] for i in order]


def test_every_k_epochs_and_at_the_end(tmp_path):
    d = str(tmp_path)
    tokens = [f"w{i}" for i in range(10)]
    net = make_net(len(tokens))
    oracle = WeightsAtEpochEnd(net.embedding.weight)
    fit(net, TensorBoardHandler(d, word_vectors=WordVectors(vocab=tokens, top=4, every=2)), epochs=5,
        extra=[oracle])
    steps = sorted(os.listdir(os.path.join(d, "train", "word_vectors")))
    assert steps == ["00001", "00003", "00004"]  # epochs 1 and 3 (every 2), and the end (4)
    p = Projector(d)
    names = [e["tensorName"] for e in p.config(run="train")["embeddings"]]
    assert names == ["word_vectors@1", "word_vectors@3", "word_vectors@4"]
    for step in (1, 3, 4):
        name = f"word_vectors@{step}"
        np.testing.assert_array_equal(p.tensor(name, run="train").reshape(4, DIM), oracle.seen[step][:4])
        assert p.metadata(name, run="train").splitlines() == tokens[:4]  # a list: taken in order
    assert not np.array_equal(oracle.seen[1], oracle.seen[4])  # the weights did change


def test_every_epoch_does_not_log_the_last_twice(tmp_path):
    d = str(tmp_path)
    fit(make_net(5), TensorBoardHandler(d, word_vectors=WordVectors(every=1)), epochs=2)
    assert sorted(os.listdir(os.path.join(d, "train", "word_vectors"))) == ["00000", "00001"]
    with open(os.path.join(d, "train", "projector_config.pbtxt")) as f:
        assert f.read().count("embeddings {") == 2


def test_true_takes_the_first_embedding_labelled_by_row_index(tmp_path):
    d = str(tmp_path)
    net = make_net(7, second=4)
    fit(net, TensorBoardHandler(d, word_vectors=True), epochs=1)
    p = Projector(d)
    np.testing.assert_array_equal(p.tensor("word_vectors", run="train").reshape(7, DIM),
                                  net.embedding.weight.data().asnumpy())
    assert p.metadata("word_vectors", run="train").splitlines() == [str(i) for i in range(7)]


@pytest.mark.parametrize("layer", ["embedding1", "lm_embedding1", "lm_embedding1_"])
def test_layer_by_block_name_or_parameter_prefix(tmp_path, layer):
    d = str(tmp_path)
    net = make_net(7, second=4)
    fit(net, TensorBoardHandler(d, word_vectors=WordVectors(layer)), epochs=1)
    np.testing.assert_array_equal(Projector(d).tensor("word_vectors", run="train").reshape(4, DIM),
                                  net.other.weight.data().asnumpy())


def test_exported_from_the_package():
    assert gluon_tb.WordVectors is WordVectors and "WordVectors" in gluon_tb.__all__


# ------------------------------------------------------------ no host reads
@pytest.mark.parametrize("option", [True, "top"])
def test_no_host_read_by_gluon_tb(tmp_path, option):
    vocab = make_vocab()
    net = make_net(len(vocab))
    wv = True if option is True else WordVectors(vocab=vocab, counts=COUNTS, top=4, every=1)
    handler = TensorBoardHandler(str(tmp_path), word_vectors=wv)
    with count_host_reads() as c:
        fit(net, handler, epochs=2)
    assert c.calls == [], str(c)
    assert os.path.isdir(os.path.join(str(tmp_path), "train", "word_vectors", "00001"))


# ------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(layer=3), TypeError, ["layer", "nn.Embedding", "int 3"]),
    (dict(layer=""), ValueError, ["layer", "str ''"]),  # a str, but empty: a wrong value
    (dict(vocab="the cat"), TypeError, ["vocab", "gluonnlp.Vocab", "str 'the cat'"]),
    (dict(vocab=["a", 2]), TypeError, ["vocab", "str tokens", "int 2", "index 1"]),
    (dict(vocab=[]), ValueError, ["vocab", "at least one token"]),
    (dict(vocab=["a"], counts=["a"]), TypeError, ["counts", "mapping", "list ['a']"]),
    (dict(counts={"a": 1}), ValueError, ["counts", "vocab"]),
    (dict(top=0), ValueError, ["top", "positive int", "0"]),
    (dict(top="5"), TypeError, ["top", "positive int", "str '5'"]),
    (dict(every=0), ValueError, ["every", "positive int", "0"]),
    (dict(every=1.5), TypeError, ["every", "positive int", "float 1.5"]),
    (dict(tag=""), ValueError, ["tag", "non-empty str", "str ''"]),
    (dict(tag=5), TypeError, ["tag", "non-empty str", "int 5"]),
])
def test_option_errors_name_the_argument(kwargs, exc, words):
    with pytest.raises(exc) as e:
        WordVectors(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_word_vectors_argument_type():
    with pytest.raises(TypeError, match=r"word_vectors must be None, a bool or a WordVectors\(\.\.\.\), got str 'yes'"):
        TensorBoardHandler("x", word_vectors="yes")


def test_count_that_is_not_a_number():
    wv = WordVectors(vocab=["a", "b"], counts={"a": "many"})
    with pytest.raises(TypeError, match=r"counts must map each token to a number, got str 'many' for 'a'"):
        wv.order(2)


@pytest.mark.parametrize("wv, words", [
    (WordVectors(vocab=["a", "b", "c"]), ["vocab", "one token per Embedding row", "(5 rows)", "got 3 tokens"]),
    (WordVectors("dense0"), ["layer", "nn.Embedding", "'lm_embedding0'", "got 'dense0'"]),
])
def test_mismatch_with_the_network_raises_before_training(tmp_path, wv, words):
    d = str(tmp_path)
    with pytest.raises(ValueError) as e:
        fit(make_net(5), TensorBoardHandler(d, word_vectors=wv))
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert not os.path.exists(os.path.join(d, "train"))  # nothing was written


def test_a_network_without_embedding(tmp_path):
    net = gluon.nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(gluon.nn.Dense(CLASSES))
    net.initialize()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd"), context=mx.cpu())
    with pytest.raises(ValueError, match="word_vectors needs an nn.Embedding block, and the network 'mlp' has none"):
        est.fit(loader(5), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path), word_vectors=True)])


def test_word_embeddings_example_runs_offline(tmp_path):
    pytest.importorskip("gluonnlp")
    import importlib.util

    path = os.path.join(repo_paths.EXAMPLES, "word_embeddings_gluonnlp.py")
    spec = importlib.util.spec_from_file_location("word_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = str(tmp_path)
    mod.main(["--logdir", d, "--epochs", "1", "--max-tokens", "3000", "--words", "50"])
    assert {("train", "epoch_perplexity"), ("validation", "epoch_perplexity")} <= readback.tags(d)
    labels = open(os.path.join(d, "train", "word_vectors", "00000", "metadata.tsv")).read().splitlines()
    # word_vectors=WordVectors(vocab, counts, top=50): the 50 most frequent words, most frequent first
    counts = mod.nlp.data.count_tokens(mod.WORD.findall(mod.docstrings().lower())[:3000])
    vocab = mod.nlp.Vocab(counts, max_size=5000, min_freq=2)
    toks = vocab.idx_to_token
    order = sorted(range(len(toks)), key=lambda i: (toks[i] not in counts, -counts.get(toks[i], 0), i))
    assert labels == [toks[i] for i in order[:50]] and "the" in labels

