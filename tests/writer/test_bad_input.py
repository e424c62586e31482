"""Bad input, row by row: accepted with a documented result, or rejected with an error that
names the argument. After every row the writer still works and nothing logged is lost."""
import math
import os

import numpy as np
import pytest
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter

ACCEPT, REJECT = "accept", "reject"
BIG = 10 * 1024 * 1024
TRACE = {"traceEvents": [{"name": "op", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]}

# (id, call, outcome, expectation): for REJECT, (exception type, word in the message);
# for ACCEPT, a check(logdir) of what TensorBoard reads back (or None: only "no error").
ROWS = [
    ("scalar-nan", lambda w: w.add_scalar("x", float("nan"), 1), ACCEPT,
     lambda d: math.isnan(readback.scalars(d, ".", "x")[0][1])),
    ("scalar-inf", lambda w: w.add_scalar("x", float("inf"), 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(1, math.inf)]),
    ("scalar-neg-inf", lambda w: w.add_scalar("x", -np.inf, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(1, -math.inf)]),
    ("scalar-bool", lambda w: w.add_scalar("x", True, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(1, 1.0)]),
    ("scalar-str", lambda w: w.add_scalar("x", "1.0", 1), REJECT, (TypeError, "value")),
    ("scalar-none", lambda w: w.add_scalar("x", None, 1), REJECT, (TypeError, "value")),
    ("scalar-list", lambda w: w.add_scalar("x", [1.0, 2.0, 3.0], 1), REJECT, (ValueError, "value")),
    ("scalar-array", lambda w: w.add_scalar("x", np.array([1.0, 2.0]), 1), REJECT, (ValueError, "value")),
    ("hist-nan-only", lambda w: w.add_histogram("h", np.full(10, np.nan), 1), ACCEPT,
     lambda d: _hist(d).shape == (0, 3)),
    ("hist-inf-only", lambda w: w.add_histogram("h", np.array([np.inf, -np.inf]), 1), ACCEPT,
     lambda d: _hist(d).shape == (0, 3)),
    ("hist-mixed-nonfinite", lambda w: w.add_histogram("h", np.array([1.0, np.nan, 2.0, np.inf]), 1),
     ACCEPT, lambda d: _hist(d)[:, 2].sum() == 2),
    ("hist-empty", lambda w: w.add_histogram("h", np.array([]), 1), REJECT, (ValueError, "values")),
    ("hist-bins-65536", lambda w: w.add_histogram("h", np.arange(10.0), 1, bins=65536), ACCEPT,
     lambda d: _hist(d)[:, 2].sum() == 10),
    ("hist-bins-too-many", lambda w: w.add_histogram("h", np.arange(10.0), 1, bins=10**8), REJECT,
     (ValueError, "bins must be at most 65,536")),
    ("hist-edges-too-many", lambda w: w.add_histogram("h", np.arange(10.0), 1, bins=np.arange(70000.0)), REJECT,
     (ValueError, "bins must be at most 65,537 edges")),
    ("hist-int", lambda w: w.add_histogram("h", np.arange(10), 1), ACCEPT,
     lambda d: _hist(d)[:, 2].sum() == 10),
    ("hist-float16", lambda w: w.add_histogram("h", np.ones(5, np.float16), 1), ACCEPT,
     lambda d: _hist(d)[:, 2].sum() == 5),
    ("hist-0d", lambda w: w.add_histogram("h", np.array(3.0), 1), ACCEPT,
     lambda d: _hist(d)[:, 2].sum() == 1),
    ("image-2-channels", lambda w: w.add_image("i", np.zeros((2, 4, 4)), 1, dataformats="CHW"), REJECT,
     (ValueError, "image")),
    ("image-2-channels-inferred", lambda w: w.add_image("i", np.zeros((2, 6, 6)), 1), REJECT,
     (ValueError, "image")),
    ("image-5-channels", lambda w: w.add_image("i", np.zeros((4, 4, 5)), 1, dataformats="HWC"), REJECT,
     (ValueError, "image")),
    ("image-zero-width", lambda w: w.add_image("i", np.zeros((3, 4, 0)), 1), REJECT, (ValueError, "image")),
    ("image-negative", lambda w: w.add_image("i", -np.ones((1, 2, 2)), 1), ACCEPT,
     lambda d: _png_pixels(d).max() == 0),
    ("image-nan", lambda w: w.add_image("i", np.full((1, 2, 2), np.nan), 1), ACCEPT,
     lambda d: _png_pixels(d).max() == 0),
    ("image-int64", lambda w: w.add_image("i", np.full((1, 2, 2), 300, np.int64), 1), ACCEPT,
     lambda d: _png_pixels(d).min() == 255),
    ("audio-beyond-1", lambda w: w.add_audio("a", np.array([2.0, -3.0, 0.5]), 8000, 1), ACCEPT, None),
    ("text-huge", lambda w: w.add_text("t", "x" * BIG, 1), ACCEPT,
     lambda d: len(tensor_util.make_ndarray(readback.tensor_events(d, ".", "t")[0].tensor_proto).item()) == BIG),
    ("text-not-str", lambda w: w.add_text("t", 42, 1), REJECT, (TypeError, "text")),
    ("tag-empty", lambda w: w.add_scalar("", 1.0), REJECT, (ValueError, "tag")),
    ("tag-not-str", lambda w: w.add_scalar(3, 1.0), REJECT, (TypeError, "tag")),
    ("tag-dotdot", lambda w: w.add_scalar("../../etc", 1.0, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "../../etc") == [(1, 1.0)]),
    ("tag-slash-space-unicode", lambda w: w.add_scalar("a/b c/ü", 1.0, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "a/b c/ü") == [(1, 1.0)]),
    ("tag-10000-chars", lambda w: w.add_scalar("t" * 10000, 1.0), REJECT, (ValueError, "tag")),
    ("step-negative", lambda w: w.add_scalar("x", 1.0, -1), REJECT, (ValueError, "global_step")),
    ("step-float", lambda w: w.add_scalar("x", 1.0, 1.5), ACCEPT,  # truncated, as mxboard did
     lambda d: readback.scalars(d, ".", "x") == [(1, 1.0)]),
    ("step-float-nan", lambda w: w.add_scalar("x", 1.0, float("nan")), REJECT, (ValueError, "global_step")),
    ("step-float-negative", lambda w: w.add_scalar("x", 1.0, -2.0), REJECT, (ValueError, "global_step")),
    ("step-str", lambda w: w.add_scalar("x", 1.0, "3"), REJECT, (TypeError, "global_step")),
    ("step-none", lambda w: w.add_scalar("x", 1.0, None), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(0, 1.0)]),
    ("step-numpy-int", lambda w: w.add_scalar("x", 1.0, np.int64(7)), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(7, 1.0)]),
    # an Event's step is an int64: a larger one would make the record undecodable, and TensorBoard's
    # loaders would drop every later event of the file
    ("step-int64-max", lambda w: w.add_scalar("x", 1.0, 2**63 - 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(2**63 - 1, 1.0)]),
    ("step-past-int64", lambda w: w.add_scalar("x", 1.0, 2**63), REJECT, (ValueError, "global_step")),
    ("step-2**70", lambda w: w.add_scalar("x", 1.0, 2**70), REJECT, (ValueError, "global_step")),
    ("step-uint64-max", lambda w: w.add_scalar("x", 1.0, np.uint64(2**64 - 1)), REJECT,
     (ValueError, "global_step")),
    ("step-float-huge", lambda w: w.add_scalar("x", 1.0, 1e30), REJECT, (ValueError, "global_step")),
    ("step-past-int64-text", lambda w: w.add_text("t", "x", 2**70), REJECT, (ValueError, "global_step")),
    ("step-past-int64-histogram", lambda w: w.add_histogram("h", np.ones(3), 2**64), REJECT,
     (ValueError, "global_step")),
    ("scalar-int-past-float64", lambda w: w.add_scalar("x", 10**400, 1), REJECT, (ValueError, "value")),
    ("scalars-int-past-float64", lambda w: w.add_scalars("m", {"a": 10**400}, 1), REJECT, (ValueError, r"tag_scalar_dict\[.a.\] must be a number within float64.s range")),
    ("scalar-big-int", lambda w: w.add_scalar("x", 2**70, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "x") == [(1, float(2**70))]),
    ("hparam-int-past-float64", lambda w: w.add_hparams({"lr": 10**400}, {"m": 1.0}), REJECT,
     (ValueError, "hparam_dict")),
    ("metric-int-past-float64", lambda w: w.add_hparams({"lr": 0.1}, {"m": 10**400}), REJECT,
     (ValueError, "metric_dict")),
    ("video-fps-past-float64", lambda w: w.add_video("v", np.zeros((2, 3, 4, 4)), 1, fps=10**400), REJECT,
     (ValueError, "fps")),
    # a lone surrogate (os.fsdecode of a file name that is not UTF-8) cannot be written
    ("tag-surrogate", lambda w: w.add_scalar("a\udc80b", 1.0, 1), REJECT, (ValueError, "tag must be encodable")),
    ("tag-surrogate-histogram", lambda w: w.add_histogram("a\udc80", np.ones(3), 1), REJECT, (ValueError, "tag")),
    ("hparam-key-surrogate", lambda w: w.add_hparams({"a\udc80": 1.0}, {"m": 1.0}), REJECT,
     (ValueError, "hparam_dict key")),
    ("hparam-value-surrogate", lambda w: w.add_hparams({"a": "b\udc80"}, {"m": 1.0}), REJECT,
     (ValueError, "hparam_dict")),
    ("named-scalar-surrogate", lambda w: w.add_scalar("m", {"a\udc80": 1.0}, 1), REJECT,
     (ValueError, "value name")),
    ("scalars-entry-named", lambda w: w.add_scalars("m", {"a": 1.0, "b": "bad"}, 1), REJECT,
     (TypeError, r"^tag_scalar_dict\['b'\] must be a number, got str 'bad'$")),
    ("named-scalar-entry-named", lambda w: w.add_scalar("m", {"a": 1.0, "b": None}, 1), REJECT,
     (TypeError, r"^value\['b'\] must be a number, got NoneType None$")),
    ("scalar-numpy-complex", lambda w: w.add_scalar("m", np.complex64(1 + 2j), 1), REJECT,
     (TypeError, r"^value must be a real number, got complex64 \(1\+2j\)$")),
    ("scalar-complex", lambda w: w.add_scalar("m", 1 + 2j, 1), REJECT,
     (TypeError, r"^value must be a real number, got complex \(1\+2j\)$")),
    ("scalar-two-numbers", lambda w: w.add_scalar("m", [1.0, 2.0], 1), REJECT,
     (TypeError, r"value must be a number, a \(name, value\) pair with a str name or a \{name: value\} dict, "
                 r"got list \[1.0, 2.0\]; several values of one tag: add_scalars, or add_histogram")),
    ("custom-scalars-surrogate", lambda w: w.add_custom_scalars({"c\udc80": {"x": ["Multiline", ["s"]]}}),
     REJECT, (ValueError, "layout category title")),
    # names that become a file or directory name: refused at the call (NUL, lone surrogate, more
    # than 255 bytes of UTF-8, os.pathconf's PC_NAME_MAX), not by the writer thread at its flush
    ("profile-session-nul", lambda w: w.add_profile(TRACE, session="a\x00b"), REJECT, (ValueError, "session")),
    ("profile-host-nul", lambda w: w.add_profile(TRACE, host="a\x00b"), REJECT, (ValueError, "host")),
    ("profile-session-surrogate", lambda w: w.add_profile(TRACE, session="a\udc80"), REJECT,
     (ValueError, "session must be encodable")),
    ("profile-host-surrogate", lambda w: w.add_profile(TRACE, host="a\udc80"), REJECT,
     (ValueError, "host must be encodable")),
    ("profile-session-4000", lambda w: w.add_profile(TRACE, session="s" * 4000), REJECT,
     (ValueError, "session must fit in one file or directory name of at most 255 bytes")),
    ("profile-host-past-255-with-extension", lambda w: w.add_profile(TRACE, host="h" * 246), REJECT,
     (ValueError, "host must fit .* 256 bytes")),
    ("profile-session-255-bytes", lambda w: w.add_profile(TRACE, session="é" * 127 + "s", host="h" * 245),
     ACCEPT, lambda d: os.path.isfile(os.path.join(d, "plugins", "profile", "é" * 127 + "s", "h" * 245 + ".xplane.pb"))),
    ("named-scalar-value-name-4000", lambda w: w.add_scalar("m", {"v" * 4000: 1.0}, 1), REJECT,
     (ValueError, "value name must fit")),
    ("named-scalar-value-name-256-bytes", lambda w: w.add_scalar("m", {"é" * 128: 1.0}, 1), REJECT,
     (ValueError, "value name must fit .* 256 bytes")),
    ("named-scalar-tag-256", lambda w: w.add_scalar("t" * 256, {"a": 1.0}, 1), REJECT,
     (ValueError, "tag must fit")),
    ("named-scalar-value-name-255", lambda w: w.add_scalar("m", {"v" * 255: 1.0}, 1), ACCEPT,
     lambda d: readback.scalars(d, "m/" + "v" * 255, "m") == [(1, 1.0)]),
    ("scalars-key-4000", lambda w: w.add_scalars("m", {"k" * 4000: 1.0}, 1), REJECT,
     (ValueError, "tag_scalar_dict key must fit")),
    ("scalars-run-256", lambda w: w.add_scalars("m", {"k" * 254: 1.0}, 1), REJECT,
     (ValueError, "main_tag must fit .* 256 bytes")),
    ("scalars-run-255", lambda w: w.add_scalars("m", {"k" * 253: 1.0}, 1), ACCEPT,
     lambda d: readback.scalars(d, "m_" + "k" * 253, "m") == [(1, 1.0)]),
    ("tag-unicode", lambda w: w.add_scalar("ü/日本", 1.0, 1), ACCEPT,
     lambda d: readback.scalars(d, ".", "ü/日本") == [(1, 1.0)]),
    ("walltime-nan", lambda w: w.add_scalar("x", 1.0, 1, walltime=float("nan")), REJECT, (ValueError, "walltime")),
    ("walltime-inf-histogram", lambda w: w.add_histogram("h", np.ones(3), 1, walltime=math.inf), REJECT,
     (ValueError, "walltime")),
    ("embedding-labels-mismatch", lambda w: w.add_embedding("e", np.zeros((3, 2)), labels=["a"]), REJECT,
     (ValueError, "labels")),
    ("embedding-images-mismatch", lambda w: w.add_embedding("e", np.zeros((3, 2)), images=np.zeros((2, 1, 4, 4))),
     REJECT, (ValueError, "images")),
    # a wrong type is a TypeError, a wrong value of the right type a ValueError (issue 26)
    ("scalars-empty-dict", lambda w: w.add_scalars("m", {}, 1), REJECT,
     (ValueError, "tag_scalar_dict must be a non-empty dict of name -> number, got dict {}")),
    ("scalars-list", lambda w: w.add_scalars("m", [("a", 1.0)], 1), REJECT, (TypeError, "tag_scalar_dict must be")),
    ("scalar-str-array", lambda w: w.add_scalar("x", np.array("1.5"), 1), REJECT,
     (TypeError, "value must be a single number, got ndarray")),
    ("scalar-array-of-2", lambda w: w.add_scalar("x", np.ones(2), 1), REJECT,
     (ValueError, "value must be a single number, got ndarray of shape \\(2,\\)")),
    ("custom-scalars-empty-tag", lambda w: w.add_custom_scalars({"c": {"x": ["Multiline", ["s", ""]]}}), REJECT,
     (ValueError, r"\[1\] must hold non-empty str tags, got str ''")),
    ("custom-scalars-int-tag", lambda w: w.add_custom_scalars({"c": {"x": ["Multiline", ["s", 3]]}}), REJECT,
     (TypeError, r"\[1\] must hold non-empty str tags, got int 3")),
    ("embedding-1-row", lambda w: w.add_embedding("e", np.ones((1, 2)), labels=["a"]), ACCEPT, None),
    ("embedding-100000-rows", lambda w: w.add_embedding("e", np.ones((100000, 2))), ACCEPT, None),
]


def _hist(d):
    return tensor_util.make_ndarray(readback.tensor_events(d, ".", "h")[0].tensor_proto)


def _png_pixels(d):
    import io

    from PIL import Image

    (ev,) = readback.tensor_events(d, ".", "i")
    return np.asarray(Image.open(io.BytesIO(tensor_util.make_ndarray(ev.tensor_proto)[2])))


@pytest.mark.parametrize("rid,call,outcome,expect", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_row(tmp_path, rid, call, outcome, expect):
    d = str(tmp_path)
    w = SummaryWriter(d)
    w.add_scalar("sentinel", 1.0, 0)
    if outcome == REJECT:
        exc, word = expect
        with pytest.raises(exc, match=word):
            call(w)
    else:
        call(w)
    w.add_scalar("sentinel", 2.0, 1)  # the writer still works
    w.close()
    assert readback.scalars(d, ".", "sentinel") == [(0, 1.0), (1, 2.0)]  # nothing lost
    if outcome == ACCEPT and expect is not None:
        assert expect(d)


def test_a_purge_step_past_int64_is_refused(tmp_path):
    with pytest.raises(ValueError, match="purge_step"):
        SummaryWriter(str(tmp_path), purge_step=2**63)
    assert readback.event_files(str(tmp_path)) == []


def test_the_name_limit_is_the_file_systems():
    from gluon_tb.writer._common.checks import NAME_MAX

    assert NAME_MAX <= os.pathconf(os.path.dirname(os.path.abspath(__file__)), "PC_NAME_MAX")


@pytest.mark.parametrize("kwargs,word", [
    ({"logdir": "r" * 256}, "logdir must fit .* 256 bytes"),
    ({"logdir": "a/" + "é" * 128 + "/b"}, "logdir must fit .* 256 bytes"),
    ({"logdir": "a\x00b"}, "logdir must not contain a NUL"),
    ({"filename_suffix": "x" * 250}, "filename_suffix must fit"),
    ({"filename_suffix": "a\x00"}, "filename_suffix must not contain"),
])
def test_a_run_directory_or_file_name_that_cannot_be_made_is_refused_at_construction(tmp_path, kwargs, word):
    kwargs = dict(kwargs)
    kwargs["logdir"] = os.path.join(str(tmp_path), kwargs.get("logdir", "run"))
    with pytest.raises(ValueError, match=word):
        SummaryWriter(**kwargs)
    assert os.listdir(str(tmp_path)) == []  # nothing made


def test_a_run_directory_name_of_255_bytes_is_written(tmp_path):
    d = os.path.join(str(tmp_path), "é" * 127 + "r")
    with SummaryWriter(d) as w:
        w.add_scalar("x", 1.0, 3)
    assert readback.scalars(d, ".", "x") == [(3, 1.0)]


def test_add_scalars_with_one_bad_key_queues_none_of_them(tmp_path):
    d = str(tmp_path)
    w = SummaryWriter(d)
    with pytest.raises(ValueError, match="tag_scalar_dict key must fit"):
        w.add_scalars("m", {"a": 1.0, "k" * 300: 2.0}, 1)
    with pytest.raises(ValueError, match="value name must fit"):
        w.add_scalar("n", {"a": 1.0, "v" * 300: 2.0}, 1)
    with pytest.raises(TypeError, match=r"tag_scalar_dict\[.b.\] must be a number"):
        w.add_scalars("m", {"a": 1.0, "b": "two"}, 1)
    w.add_scalar("sentinel", 1.0, 0)
    w.close()
    assert readback.tags(d) == {(".", "sentinel")}  # no run m_a, no run n/a
