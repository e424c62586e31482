"""``TensorBoardCallback(word_vectors=)``: a symbol's Embedding weight in the projector after a real
``Module.fit``, rows labelled with their tokens, read back with TensorBoard's projector plugin."""
import collections
import os

import mxnet as mx
import numpy as np
import pytest

from gluon_tb.handlers import TensorBoardCallback, WordVectors
from synccount import count_host_reads
from test_embedding import Projector

nlp = pytest.importorskip("gluonnlp")

DIM, CLASSES, N, BATCH = 6, 3, 48, 16
TEXT = ("the cat sat on the mat the dog sat on the log a cat and a dog the end "
        "of the story is the cat").split()
COUNTS = collections.Counter(TEXT)


def symbol(vocab_size, second=0):
    """A tiny LM-like symbol: Embedding ``embedding0`` -> FullyConnected -> softmax; with ``second``,
    another Embedding ``embedding1`` of ``second`` rows beside it."""
    data = mx.sym.var("data")
    h = mx.sym.Embedding(data, input_dim=vocab_size, output_dim=DIM, name="embedding0")
    if second:
        h = h + mx.sym.Embedding(mx.sym.clip(data, 0, second - 1), input_dim=second, output_dim=DIM,
                                 name="embedding1")
    out = mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc")
    return mx.sym.SoftmaxOutput(out, name="softmax")


class ParamsAtEpochEnd:
    """epoch_end_callback after the TensorBoardCallback: host copies of arg_params (the test oracle)."""

    def __init__(self):
        self.seen = []

    def __call__(self, epoch, sym, arg_params, aux_params):
        self.seen.append({k: v.asnumpy().copy() for k, v in arg_params.items()})


def fit(sym, vocab_size, cb, epochs=2, oracle=None):
    rs = np.random.RandomState(0)
    x = rs.randint(0, vocab_size, size=N).astype("float32")
    y = rs.randint(0, CLASSES, size=N).astype("float32")
    train = mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label")
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.fit(train, num_epoch=epochs, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Uniform(1.0), batch_end_callback=cb,
            epoch_end_callback=[cb.epoch_end] + ([oracle] if oracle else []), eval_end_callback=cb.eval_end)
    cb.close()
    return mod


def frequency_order(tokens, counts):
    """Row indices most frequent first, ties in index order, uncounted tokens last."""
    return sorted(range(len(tokens)), key=lambda i: (tokens[i] not in counts, -counts.get(tokens[i], 0), i))


def logged_steps(d, tag="word_vectors"):
    return sorted(os.listdir(os.path.join(d, "train", tag)))


# ------------------------------------------------------------ what is logged
def test_top_rows_by_count_labelled_with_their_tokens(tmp_path):
    d = str(tmp_path)
    vocab = nlp.Vocab(COUNTS)  # <unk> <pad> <bos> <eos>, then the words by count, ties by token
    oracle = ParamsAtEpochEnd()
    cb = TensorBoardCallback(d, word_vectors=WordVectors("embedding0", vocab=vocab, counts=COUNTS, top=5))
    fit(symbol(len(vocab)), len(vocab), cb, oracle=oracle)
    order = frequency_order(vocab.idx_to_token, COUNTS)[:5]
    tokens = [vocab.idx_to_token[i] for i in order]
    assert tokens[:2] == ["the", "cat"] and order[0] != 0
    p = Projector(d)
    (e,) = p.config(run="train")["embeddings"]
    assert (e["tensorName"], e["tensorPath"], e["metadataPath"]) == \
        ("word_vectors", "word_vectors/00001/tensors.bytes", "word_vectors/00001/metadata.tsv")  # epoch 1
    np.testing.assert_array_equal(p.tensor("word_vectors", run="train").reshape(5, DIM),
                                  oracle.seen[1]["embedding0_weight"][order])
    assert p.metadata("word_vectors", run="train").splitlines() == tokens
    assert logged_steps(d) == ["00001"]
    assert sorted(os.listdir(d)) == ["train", "train_batch"]


def test_a_token_list_without_counts_is_taken_in_index_order(tmp_path):
    d = str(tmp_path)
    tokens = [f"w{i}" for i in range(9)]
    oracle = ParamsAtEpochEnd()
    fit(symbol(9), 9, TensorBoardCallback(d, word_vectors=WordVectors(vocab=tokens, top=4, tag="words")),
        epochs=1, oracle=oracle)
    p = Projector(d)
    assert p.metadata("words", run="train").splitlines() == tokens[:4]
    np.testing.assert_array_equal(p.tensor("words", run="train").reshape(4, DIM),
                                  oracle.seen[0]["embedding0_weight"][:4])


def test_the_vocabularys_counter_orders_the_rows(tmp_path):
    d = str(tmp_path)
    vocab = nlp.Vocab(COUNTS)
    vocab.counter = COUNTS
    fit(symbol(len(vocab)), len(vocab), TensorBoardCallback(d, word_vectors=WordVectors(vocab=vocab, top=3)),
        epochs=1)
    assert Projector(d).metadata("word_vectors", run="train").splitlines() == \
        [vocab.idx_to_token[i] for i in frequency_order(vocab.idx_to_token, COUNTS)[:3]]


def test_every_k_epochs_and_at_the_end(tmp_path):
    d = str(tmp_path)
    tokens = [f"w{i}" for i in range(10)]
    oracle = ParamsAtEpochEnd()
    fit(symbol(10), 10, TensorBoardCallback(d, word_vectors=WordVectors(vocab=tokens, every=2)), epochs=5,
        oracle=oracle)
    assert logged_steps(d) == ["00001", "00003", "00004"]  # epochs 1 and 3 (every 2), and the end (4)
    p = Projector(d)
    assert [e["tensorName"] for e in p.config(run="train")["embeddings"]] == \
        ["word_vectors@1", "word_vectors@3", "word_vectors@4"]
    for step in (1, 3, 4):
        np.testing.assert_array_equal(p.tensor(f"word_vectors@{step}", run="train").reshape(10, DIM),
                                      oracle.seen[step]["embedding0_weight"])
    assert not np.array_equal(oracle.seen[1]["embedding0_weight"], oracle.seen[4]["embedding0_weight"])


def test_every_epoch_logs_the_last_once(tmp_path):
    d = str(tmp_path)
    fit(symbol(5), 5, TensorBoardCallback(d, word_vectors=WordVectors(every=1)), epochs=2)
    assert logged_steps(d) == ["00000", "00001"]
    with open(os.path.join(d, "train", "projector_config.pbtxt")) as f:
        assert f.read().count("embeddings {") == 2


def test_true_is_the_first_embedding_labelled_by_row_index(tmp_path):
    d = str(tmp_path)
    mod = fit(symbol(7, second=4), 7, TensorBoardCallback(d, word_vectors=True), epochs=1)
    p = Projector(d)
    np.testing.assert_array_equal(p.tensor("word_vectors", run="train").reshape(7, DIM),
                                  mod.get_params()[0]["embedding0_weight"].asnumpy())
    assert p.metadata("word_vectors", run="train").splitlines() == [str(i) for i in range(7)]


def test_layer_names_the_embedding_operator(tmp_path):
    d = str(tmp_path)
    mod = fit(symbol(7, second=4), 7, TensorBoardCallback(d, word_vectors=WordVectors("embedding1")), epochs=1)
    np.testing.assert_array_equal(Projector(d).tensor("word_vectors", run="train").reshape(4, DIM),
                                  mod.get_params()[0]["embedding1_weight"].asnumpy())


def test_a_resumed_fit_logs_at_its_own_epochs(tmp_path):
    d = str(tmp_path)
    cb = TensorBoardCallback(d, word_vectors=WordVectors(every=2))
    rs = np.random.RandomState(0)
    train = mx.io.NDArrayIter(rs.randint(0, 5, N).astype("float32"), rs.randint(0, CLASSES, N).astype("float32"),
                              BATCH, label_name="softmax_label")
    mx.mod.Module(symbol(5), context=mx.cpu()).fit(
        train, begin_epoch=2, num_epoch=5, optimizer="sgd", initializer=mx.init.Uniform(1.0), batch_end_callback=cb,
        epoch_end_callback=cb.epoch_end)
    cb.close()
    assert logged_steps(d) == ["00003", "00004"]  # epoch 3 (every 2) and the end (4)


def test_no_host_read_by_gluon_tb(tmp_path):
    vocab = nlp.Vocab(COUNTS)
    cb = TensorBoardCallback(str(tmp_path), word_vectors=WordVectors(vocab=vocab, counts=COUNTS, top=4, every=1))
    with count_host_reads() as c:
        fit(symbol(len(vocab)), len(vocab), cb)
    assert c.calls == [], str(c)
    assert logged_steps(str(tmp_path)) == ["00000", "00001"]


# ------------------------------------------------------------ errors
@pytest.mark.parametrize("wv, words", [
    (WordVectors("fc"), ["word_vectors", "layer", "Embedding of the symbol (embedding0, embedding1)",
                         "got 'fc' (a FullyConnected)"]),
    (WordVectors("nope"), ["layer", "got 'nope' (not a layer of the symbol)"]),
    (WordVectors(vocab=["a", "b", "c"]), ["vocab", "one token per Embedding row", "(7 rows)", "got 3 tokens"]),
])
def test_a_mismatch_with_the_symbol_raises_at_the_first_batch(tmp_path, wv, words):
    d = str(tmp_path)
    cb = TensorBoardCallback(d, word_vectors=wv, on_error="warn")  # not a writer error: raised all the same
    with pytest.raises(ValueError) as e:
        fit(symbol(7, second=4), 7, cb)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert not os.path.exists(os.path.join(d, "train"))  # nothing was written


def test_a_symbol_without_embedding(tmp_path):
    sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=CLASSES, name="fc"),
                               name="softmax")
    with pytest.raises(ValueError, match=r"word_vectors needs an Embedding layer, and the symbol has none "
                                         r"\(its layers are fc, softmax\)"):
        fit(sym, 5, TensorBoardCallback(str(tmp_path), word_vectors=True))


def test_word_vectors_argument_type():
    with pytest.raises(TypeError, match=r"word_vectors must be None, a bool or a WordVectors\(\.\.\.\), got str 'yes'"):
        TensorBoardCallback("x", word_vectors="yes")
