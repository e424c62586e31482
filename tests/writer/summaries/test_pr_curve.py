"""PR curves: SummaryWriter.add_pr_curve against TensorBoard's pr_curve algorithm, read back
through TensorBoard."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.plugins.pr_curve import metadata as pr_metadata
from tensorboard.util import tensor_util

from readback import multiplexer, plugin_name, tags, tensor_events

from gluon_tb import SummaryWriter


def tb_expected(labels, predictions, num_thresholds, weights=None):
    """``tensorboard.plugins.pr_curve.summary.pb``'s numpy computation, line for line.

    ``pb`` itself imports TensorFlow (not installed) only to wrap the result.
    """
    if weights is None:
        weights = 1.0
    bucket_indices = np.int32(np.floor(predictions * (num_thresholds - 1)))
    float_labels = labels.astype(float)
    histogram_range = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=float_labels * weights)
    fp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=(1.0 - float_labels) * weights)
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return np.float32(np.stack((tp, fp, tn, fn, precision, recall)))


def curve(logdir, tag="pr"):
    """The ``[6, num_thresholds]`` array TensorBoard loads for ``tag``'s one event."""
    (ev,) = tensor_events(str(logdir), ".", tag)
    return tensor_util.make_ndarray(ev.tensor_proto)


def logged(logdir, labels, predictions, num_thresholds=127, weights=None, tag="pr"):
    """``add_pr_curve`` in a fresh writer, read back: TensorBoard's array."""
    with SummaryWriter(str(logdir)) as w:
        w.add_pr_curve(tag, labels, predictions, num_thresholds, weights=weights)
    return curve(logdir, tag)


def test_num_thresholds_without_a_step_is_warned_once_a_writer_and_written_as_given(tmp_path, caplog):
    """tensorboardX's add_pr_curve(tag, labels, predictions, 10) means step 10; ours (mxboard's order)
    reads num_thresholds=10, at step 0."""
    import logging

    labels, predictions = np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.6, 0.4])
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path)) as w:
            w.add_pr_curve("pr", labels, predictions, 10)
            w.add_pr_curve("pr", labels, predictions, 20)
            w.for_run("r").add_pr_curve("pr", labels, predictions, 30)  # a run of the same writer: not again
            w.add_pr_curve("default", labels, predictions)  # the default, or a step given: no warning
            w.add_pr_curve("stepped", labels, predictions, 5, 4)
        with SummaryWriter(str(tmp_path / "other")) as w:
            w.add_pr_curve("pr", labels, predictions, num_thresholds=3)  # a writer of its own: its own warning
    order = ("The order is mxboard's, add_pr_curve(tag, labels, predictions, num_thresholds, global_step); "
             "tensorboardX's is add_pr_curve(tag, labels, predictions, global_step, num_thresholds): "
             "pass global_step= by name")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records if "add_pr_curve" in r.getMessage()] == [
        ("gluon_tb", logging.WARNING, f"gluon_tb: add_pr_curve('pr', ...): num_thresholds=10 at step 0, written as "
                                      f"given. {order}"),
        ("gluon_tb", logging.WARNING, f"gluon_tb: add_pr_curve('pr', ...): num_thresholds=3 at step 0, written as "
                                      f"given. {order}")]

    def read(logdir, run, tag):
        return [(e.step, tensor_util.make_ndarray(e.tensor_proto).shape) for e in tensor_events(str(logdir), run, tag)]

    assert read(tmp_path, ".", "pr") == [(0, (6, 10)), (0, (6, 20))]
    assert read(tmp_path, "r", "pr") == [(0, (6, 30))]
    assert read(tmp_path, ".", "default") == [(0, (6, 127))]
    assert read(tmp_path, ".", "stepped") == [(4, (6, 5))]
    assert read(tmp_path / "other", ".", "pr") == [(0, (6, 3))]
    np.testing.assert_array_equal(curve(tmp_path / "other"), tb_expected(labels, predictions, 3))


@pytest.mark.parametrize("n", [2, 3, 11, 127, 201])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_tensorboard_algorithm(tmp_path, n, weighted):
    rng = np.random.default_rng(n)
    labels = rng.random(3000) < 0.4
    predictions = rng.random(3000).astype(np.float32)
    predictions[:20] = np.linspace(0, 1, 20, dtype=np.float32)  # include both ends and grid points
    predictions[20:20 + n] = np.arange(n, dtype=np.float32) / np.float32(n - 1)
    weights = rng.random(3000).astype(np.float32) if weighted else None
    got = logged(tmp_path, labels, predictions, n, weights)
    assert got.dtype == np.float32 and got.shape == (6, n)
    np.testing.assert_array_equal(got, tb_expected(labels, predictions, n, weights))


def test_metadata_is_pr_curve_plugin_data(tmp_path):
    logged(tmp_path, np.array([1, 0, 1]), np.array([0.9, 0.2, 0.4]), num_thresholds=33, tag="m")
    metadata = multiplexer(str(tmp_path)).SummaryMetadata(".", "m")
    assert metadata.plugin_data.plugin_name == "pr_curves"
    assert metadata.display_name == "m"
    content = pr_metadata.parse_plugin_metadata(metadata.plugin_data.content)
    assert (content.version, content.num_thresholds) == (0, 33)


def test_scalar_weight_and_shapes(tmp_path):
    labels = np.array([[True, False], [True, True]])
    preds = np.array([[0.8, 0.3], [0.1, 1.0]])
    got = logged(tmp_path, labels, preds, 5, 2.0)
    np.testing.assert_array_equal(got, tb_expected(labels.ravel(), preds.ravel(), 5, 2.0))


def test_weights_broadcast_to_labels_as_mxboards_do(tmp_path):
    """mxboard's weights: 'broadcastable to labels': a 0-d array, one per column; a shape that does
    not broadcast is a ValueError naming weights and labels' shape."""
    labels = np.array([[True, False], [True, True], [False, False]])
    preds = np.array([[0.8, 0.3], [0.1, 1.0], [0.5, 0.6]])
    got = logged(tmp_path / "a", labels, preds, 5, np.array(2.0))
    np.testing.assert_array_equal(got, tb_expected(labels.ravel(), preds.ravel(), 5, 2.0))
    per_column = np.array([1.0, 3.0])
    got = logged(tmp_path / "b", labels, preds, 5, per_column)
    np.testing.assert_array_equal(got, tb_expected(labels.ravel(), preds.ravel(), 5,
                                                   np.broadcast_to(per_column, labels.shape).ravel()))
    same_size = np.arange(6.0).reshape(2, 3)  # as many as labels, in another shape: one per value, in order
    want = tb_expected(labels.ravel(), preds.ravel(), 5, same_size.ravel())
    np.testing.assert_array_equal(logged(tmp_path / "d", labels, preds, 5, same_size), want)
    np.testing.assert_array_equal(pr_mod.pr_curve_data(labels, preds, 5, same_size), want)  # numpy's path
    with SummaryWriter(str(tmp_path / "c")) as w:
        with pytest.raises(ValueError, match=r"weights must be a number or an array broadcastable to labels "
                                             r"\(3, 2\) \(as mxboard's\), got ndarray of shape \(3,\)"):
            w.add_pr_curve("p", labels, preds, 5, weights=np.ones(3))


def test_readback(tmp_path):
    rng = np.random.default_rng(0)
    labels, preds = rng.random(500) < 0.5, rng.random(500)
    with SummaryWriter(str(tmp_path)) as w:
        for s in (0, 1):
            w.add_pr_curve("curve", labels, preds, global_step=s)
    assert tags(str(tmp_path)) == {(".", "curve")}
    assert plugin_name(str(tmp_path), ".", "curve") == "pr_curves"
    events = tensor_events(str(tmp_path), ".", "curve")
    assert [e.step for e in events] == [0, 1]
    np.testing.assert_array_equal(tensor_util.make_ndarray(events[0].tensor_proto),
                                  tb_expected(labels, preds, 127))


def test_caller_copy_is_private(tmp_path):
    labels, preds = np.array([1, 0]), np.array([0.7, 0.2])
    with SummaryWriter(str(tmp_path)) as w:
        w.add_pr_curve("p", labels, preds, 3)
        preds[:] = 0.0
    np.testing.assert_array_equal(curve(tmp_path, "p"),
                                  tb_expected(np.array([1, 0]), np.array([0.7, 0.2]), 3))


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(labels=[1, 0], predictions=[0.5]), ValueError, "same number of elements"),
    (dict(labels=[1, 0], predictions=[0.5, 1.5]), ValueError, "predictions must be in"),
    (dict(labels=[1, 0], predictions=[0.5, np.nan]), ValueError, "predictions must be in"),
    (dict(labels=[1, 0], predictions=[0.5, -0.1]), ValueError, "predictions"),
    (dict(labels=[1, 2], predictions=[0.5, 0.1]), ValueError, "labels must be bool or 0/1"),
    (dict(labels=["a", "b"], predictions=[0.5, 0.1]), TypeError, "labels"),
    (dict(labels=[1, 0], predictions=[1, 0]), TypeError, "predictions must be a float"),
    (dict(labels=[1, 0], predictions=[0.5, 0.1], num_thresholds=1), ValueError, "num_thresholds"),
    (dict(labels=[1, 0], predictions=[0.5, 0.1], num_thresholds=2.0), TypeError, "num_thresholds"),
    (dict(labels=[1, 0], predictions=[0.5, 0.1], num_thresholds=True), TypeError, "num_thresholds"),
    (dict(labels=[1, 0], predictions=[0.5, 0.1], weights=[1.0, 2.0, 3.0]), ValueError, "weights"),
    (dict(labels=[1, 0], predictions=[0.5, 0.1], weights="x"), TypeError, "weights"),
    (dict(labels=None, predictions=[0.5, 0.1]), TypeError, "labels"),
    (dict(labels=[], predictions=[]), ValueError, "predictions must be non-empty"),
])
def test_validation(tmp_path, kwargs, exc, words):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=words):
        w.add_pr_curve("pr", **kwargs)


mx = pytest.importorskip("mxnet")


def test_ndarray_inputs_and_worker_side_checks(tmp_path):
    rng = np.random.default_rng(5)
    labels, preds = (rng.random(400) < 0.3).astype(np.float32), rng.random(400).astype(np.float32)
    nd_labels, nd_preds = mx.nd.array(labels), mx.nd.array(preds)
    with SummaryWriter(str(tmp_path / "ok")) as w:
        w.add_pr_curve("nd", nd_labels, nd_preds, 50, weights=mx.nd.ones((400,)))
        nd_preds[:] = 0  # after the queued copy
    got = curve(tmp_path / "ok", "nd")
    np.testing.assert_array_equal(got, tb_expected(labels, preds, 50, np.ones(400, np.float32)))
    with SummaryWriter(str(tmp_path / "bad")) as w:
        w.add_pr_curve("bad", mx.nd.array([1, 0]), mx.nd.array([0.5, 2.0]), 5)  # checked by the writer thread
        with pytest.raises(ValueError, match="predictions must be in"):
            w.flush()


# ------------------------------------------------------------ the C kernel against numpy
from gluon_tb.writer._summaries import pr_curve as pr_mod  # noqa: E402

needs_kernel = pytest.mark.skipif(pr_mod._fast is None, reason="the C kernel is not built")


@needs_kernel
@pytest.mark.parametrize("label_dtype", [bool, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float32,
                                         np.float64])
@pytest.mark.parametrize("pred_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weights", [None, 0.25, "array"])
def test_the_kernel_counts_what_numpy_counts(label_dtype, pred_dtype, weights):
    rng = np.random.default_rng(7)
    n = 5000
    labels = (rng.random(n) < 0.4).astype(label_dtype)
    preds = rng.random(n).astype(pred_dtype)
    w = rng.random(n).astype(np.float32) if weights == "array" else weights
    for k in (2, 50, 127, 200):
        # the thresholds themselves, where rounding decides the bucket (in the predictions' dtype)
        preds[:k] = np.arange(k, dtype=pred_dtype) / pred_dtype(k - 1)
        fast = pr_mod._fast_buckets(labels, preds, k, w)
        assert fast is not None
        np.testing.assert_array_equal(pr_mod._curves(*fast), pr_mod.pr_curve_data(labels, preds, k, w))
        np.testing.assert_array_equal(pr_mod._curves(*fast), tb_expected(labels, preds, k, w))
        # the same values computed while the record is framed (a Chain's fill piece), byte for byte
        piece = pr_mod._curve_piece(labels, preds, k, w)
        assert (piece is None) == (not pr_mod.CHAINS)
        if piece is not None:
            assert piece.nbytes == 24 * k
            assert bytes(piece) == pr_mod._curves(*fast).astype("<f4").tobytes()


@needs_kernel
@pytest.mark.parametrize("weights", [-1.0, "signed", 0.0])
def test_the_curve_made_while_framed_keeps_the_signs_of_zeros(weights):
    """Negative and zero weights make -0.0 sums; the piece writes the bytes numpy's cast makes."""
    if not pr_mod.CHAINS:
        pytest.skip("Chains are not framed here")
    rng = np.random.default_rng(11)
    labels, preds = rng.random(300) < 0.5, rng.random(300)
    w = rng.standard_normal(300) if weights == "signed" else weights
    fast = pr_mod._fast_buckets(labels, preds, 33, w)
    assert bytes(pr_mod._curve_piece(labels, preds, 33, w)) == pr_mod._curves(*fast).astype("<f4").tobytes()


@needs_kernel
@pytest.mark.parametrize("labels,preds,message", [
    ([1, 0, 1], np.array([0.5, 1.5, 2.0], np.float32), "predictions must be in [0, 1], got a value 1.5"),
    ([1, 0, 1], np.array([0.5, np.nan, 0.1]), "predictions must be in [0, 1], got a value nan"),
    ([1, 2, 3], np.array([0.5, 0.2, 0.1]), "labels must be bool or 0/1, got a value 2"),
    (np.array([0.0, 0.5]), np.array([0.5, 0.2], np.float32), "labels must be bool or 0/1, got a value 0.5"),
])
def test_the_kernel_rejects_what_numpy_rejects_with_the_same_words(labels, preds, message):
    labels = np.asarray(labels)
    with pytest.raises(ValueError) as fast:
        pr_mod._fast_buckets(labels, preds, 11, None)
    with pytest.raises(ValueError) as slow:
        pr_mod._check_predictions(preds)
        pr_mod._check_labels(labels)
    assert str(fast.value) == str(slow.value) == message


def test_float16_predictions_are_counted_by_numpy(tmp_path):
    """float16 arithmetic is numpy's own: the kernel leaves it alone, and the curve is TensorBoard's."""
    rng = np.random.default_rng(3)
    labels, preds = rng.random(500) < 0.5, rng.random(500).astype(np.float16)
    assert pr_mod._fast_buckets(labels, preds, 21, None) is None
    np.testing.assert_array_equal(logged(tmp_path, labels, preds, 21), tb_expected(labels, preds, 21))


@pytest.mark.parametrize("n", [2, 127, 1000])
def test_curves_written_in_place_equal_the_stacked_float32_cast(n):
    """``_curves`` fills its float32 rows with ufuncs (no copy that drops the GIL): the same
    values, bit for bit, as stacking the float64 curves and casting them with ``astype``."""
    rng = np.random.default_rng(n)
    for scale in (1.0, 1e-3, 1e9):
        tpb, fpb = rng.random(n) * scale, np.round(rng.random(n) * 100)
        tpb[: n // 3] = 0
        tp, fp = np.cumsum(tpb[::-1])[::-1], np.cumsum(fpb[::-1])[::-1]
        tn, fn = fp[0] - fp, tp[0] - tp
        precision = tp / np.maximum(pr_mod._MINIMUM_COUNT, tp + fp)
        recall = tp / np.maximum(pr_mod._MINIMUM_COUNT, tp + fn)
        expected = np.stack((tp, fp, tn, fn, precision, recall)).astype(np.float32)
        got = pr_mod._curves(tpb, fpb)
        assert got.dtype == np.float32 and got.tobytes() == expected.tobytes()


@needs_kernel
def test_the_kernels_refuse_inputs_they_do_not_read_naming_themselves():
    preds, labels = np.array([0.5, 0.25], np.float32), np.array([1, 0])
    with pytest.raises(ValueError, match="pr_curve_piece: num_thresholds must be at least 2, got 1"):
        pr_mod._fast.pr_curve_piece(preds, labels, 1.0, 1)
    with pytest.raises(ValueError, match="pr_curve_piece: labels or weights has the wrong type or size"):
        pr_mod._fast.pr_curve_piece(preds, np.array([1, 0, 1]), 1.0, 5)
    with pytest.raises(ValueError, match="pr_counts: labels or weights has the wrong type or size"):
        pr_mod._fast.pr_counts(preds, labels, np.ones(3), np.zeros(5), np.zeros(5))
    with pytest.raises(ValueError, match="pr_counts: tp or fp has the wrong type or size"):
        pr_mod._fast.pr_counts(preds, labels, 1.0, np.zeros(5), np.zeros(4))
    with pytest.raises(TypeError, match="x must be float32 or float64"):
        pr_mod._fast.pr_curve_piece(labels, labels, 1.0, 5)


@pytest.mark.parametrize("weights", [np.array([-1.0, 1.0]), -0.5, float("nan"), np.array([1, -2]),
                                     np.array([np.inf, 1.0])])
def test_weights_that_are_not_sample_counts_are_refused(tmp_path, weights):
    """A negative weight gave TensorBoard true_positives of -1 and a precision of -1e7."""
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
            w.add_pr_curve("p", np.array([0, 1]), np.array([0.2, 0.9]), weights=weights)
        w.add_pr_curve("p", np.array([0, 1]), np.array([0.2, 0.9]), global_step=1)  # still working


def test_ndarray_weights_are_checked_on_the_writer_thread(tmp_path):
    import mxnet as mx

    w = SummaryWriter(str(tmp_path))
    w.add_pr_curve("p", mx.nd.array([0, 1]), mx.nd.array([0.2, 0.9]), weights=mx.nd.array([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0"):
        w.flush()
    w.add_pr_curve("p", np.array([0, 1]), np.array([0.2, 0.9]), global_step=2)
    w.close()
    assert [e.step for e in tensor_events(str(tmp_path), ".", "p")] == [2]
