"""Images: SummaryWriter.add_image(s), read back through TensorBoard; tile_images (the
grids' layout) and the public make_image_grid (mxboard's contract)."""
from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

import readback
from gluon_tb import SummaryWriter, make_image_grid
# what add_image(s) run on the caller's thread: for the queued payload, the caller's cost and
# the one argument check add_image does not reach
from gluon_tb.writer._summaries.image import capture_images
from gluon_tb.writer._summaries.pixels import tile_images, to_uint8


def read_png(logdir, tag="img"):
    """``[(width, height, pixels as H×W[×C] uint8)]`` of one tag, as TensorBoard loads it."""
    assert readback.plugin_name(str(logdir), ".", tag) == "images"
    out = []
    for e in readback.tensor_events(str(logdir), ".", tag):
        w, h, png = e.tensor_proto.string_val
        img = Image.open(io.BytesIO(png))
        assert img.format == "PNG"
        out.append((int(w), int(h), np.asarray(img)))
    return out


def roundtrip(tmp_path, x, method="add_image", **kwargs):
    """Log ``x`` with ``SummaryWriter.<method>`` and read it back: the pixels TensorBoard shows."""
    with SummaryWriter(str(tmp_path)) as sw:
        getattr(sw, method)("img", x, **kwargs)
    return pixels(tmp_path)


def pixels(tmp_path):
    [(w, h, px)] = read_png(tmp_path)
    assert px.shape[:2] == (h, w)
    return px


def hwc_of(px):
    return px[:, :, None] if px.ndim == 2 else px


# ---------------------------------------------------------------- exact pixels
def test_uint8_rgb_chw_exact(tmp_path):
    x = np.random.default_rng(0).integers(0, 256, (3, 5, 7), dtype=np.uint8)
    px = roundtrip(tmp_path, x)
    np.testing.assert_array_equal(px, x.transpose(1, 2, 0))


@pytest.mark.parametrize("shape,fmt,to_hwc", [
    ((5, 7), None, lambda a: a[:, :, None]),
    ((1, 5, 7), None, lambda a: a.transpose(1, 2, 0)),
    ((4, 5, 7), None, lambda a: a.transpose(1, 2, 0)),
    ((5, 7, 3), None, lambda a: a),
    ((5, 7, 4), "HWC", lambda a: a),
    ((3, 5, 3), "HWC", lambda a: a),  # would be inferred as CHW
])
def test_layouts(tmp_path, shape, fmt, to_hwc):
    x = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    px = roundtrip(tmp_path, x, dataformats=fmt)
    np.testing.assert_array_equal(hwc_of(px), to_hwc(x))


def test_float_scaled_rounded_and_colorspace(tmp_path):
    x = np.arange(256, dtype=np.float64).reshape(1, 16, 16) / 255.0
    with SummaryWriter(str(tmp_path)) as sw:
        sw.add_image("img", x)
    [(w, h, px)] = read_png(tmp_path)
    assert (w, h) == (16, 16)
    np.testing.assert_array_equal(px, np.arange(256, dtype=np.uint8).reshape(16, 16))
    [(_, raw)] = readback.summary_values(str(tmp_path))  # as written: the loader drops colorspace
    assert raw.image.colorspace == 1


@pytest.mark.parametrize("big", [1e300, 1e40])
@pytest.mark.parametrize("method", ["add_image", "add_images"])
def test_float64_values_float32_cannot_hold_are_rescaled_right(tmp_path, big, method):
    """The kernels rescale in float32: float64 values past its range (1e40 became inf, 1e300 all
    zeros: the warning said "rescaled" and the pixels were wrong) are mapped in float64 first."""
    x = np.array([[0.0, big], [-big, 0.5]], np.float64)
    px = roundtrip(tmp_path, x if method == "add_image" else x[None], method)  # warned once per tag
    assert px.reshape(-1).tolist() == [128, 255, 0, 128]


def test_batch_grid_exact(tmp_path):
    x = np.random.default_rng(2).integers(0, 256, (5, 3, 4, 6), dtype=np.uint8)
    px = roundtrip(tmp_path, x, "add_images")
    np.testing.assert_array_equal(px, tile_images(x))
    assert px.shape == (2 * (4 + 2) + 2, 3 * (6 + 2) + 2, 3)  # 3 per row, 2 rows
    np.testing.assert_array_equal(px[2:6, 10:16], x[1].transpose(1, 2, 0))


def test_batch_nhwc_nhw_and_max_images(tmp_path):
    x = np.random.default_rng(3).integers(0, 256, (9, 5, 6, 3), dtype=np.uint8)
    px = roundtrip(tmp_path / "a", x, "add_images", max_images=4)
    np.testing.assert_array_equal(px, tile_images(x[:4].transpose(0, 3, 1, 2)))
    g = np.random.default_rng(4).integers(0, 256, (4, 5, 5), dtype=np.uint8)
    px = roundtrip(tmp_path / "b", g, "add_images")  # 3-D batch: NHW
    np.testing.assert_array_equal(px, tile_images(g[:, None])[:, :, 0])


def test_image_4d_is_a_grid_like_mxboard(tmp_path):
    x = np.random.default_rng(5).random((4, 3, 4, 4)).astype(np.float32)
    px = roundtrip(tmp_path / "a", x)
    assert px.shape == (8, 26, 3)  # mxboard's add_image: up to 8 per row, padding 2
    np.testing.assert_array_equal(px, make_image_grid(to_uint8(x)).transpose(1, 2, 0))
    u = np.random.default_rng(5).integers(0, 256, (10, 3, 4, 4), dtype=np.uint8)
    px = roundtrip(tmp_path / "b", u)
    np.testing.assert_array_equal(px, make_image_grid(u).transpose(1, 2, 0))  # 8 + 2
    assert roundtrip(tmp_path / "c", u, "add_images").shape == (20, 26, 3)  # add_images: 4 per row, 3 rows


# ---------------------------------------------------------------- copies, not views
def test_numpy_is_copied_at_capture(tmp_path):
    x = np.full((3, 4, 4), 7, np.uint8)
    with SummaryWriter(str(tmp_path)) as sw:
        sw.add_image("img", x)
        x[:] = 200
    np.testing.assert_array_equal(pixels(tmp_path), 7)


class FakeND:
    """Looks like an MXNet NDArray to ``is_ndarray``; asnumpy must not be called at capture."""

    __module__ = "mxnet.ndarray.fake"

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.synced = a, a.shape, a.dtype, False

    def copy(self):
        return FakeND(self.a.copy())

    def __getitem__(self, k):
        return FakeND(self.a[k])

    def asnumpy(self):
        self.synced = True
        return self.a


def test_ndarray_copied_without_sync(tmp_path):
    nd = FakeND(np.full((6, 3, 2, 2), 9, np.uint8))
    p = capture_images(nd, max_images=2)  # what add_images queues: an NDArray copy of 2 images
    assert not nd.synced and isinstance(p.array, FakeND) and p.array.shape[0] == 2
    with SummaryWriter(str(tmp_path)) as sw:
        sw.add_images("img", nd, max_images=2)
        assert not nd.synced
        nd.a[:] = 0
    np.testing.assert_array_equal(pixels(tmp_path)[2:4, 2:4], 9)


def test_real_mxnet_ndarray(tmp_path):
    mx = pytest.importorskip("mxnet")
    x = mx.nd.array(np.arange(48).reshape(3, 4, 4) / 47.0)
    with SummaryWriter(str(tmp_path)) as sw:
        sw.add_image("img", x)
        x[:] = 0
    px = pixels(tmp_path)
    expected = np.floor((np.arange(16) / 47).astype(np.float32) * np.float32(255) + np.float32(0.5))
    np.testing.assert_array_equal(px[:, :, 0].ravel(), expected)
    assert tile_images(mx.nd.zeros((2, 1, 3, 3))).shape == (7, 12, 1)


def test_caller_cost_is_a_copy():
    """add_images(64×3×32×32 float32) must cost the caller <= 1/20 of tensorboardX (~10 ms).

    Timed on capture_images, the part of add_images that runs on the caller's thread:
    timing add_images itself would also time the writer thread, which wakes for each
    call and PNG-encodes the earlier ones on the same CPUs.
    """
    x = np.random.default_rng(0).random((64, 3, 32, 32), dtype=np.float32)
    capture_images(x)
    ts = []
    for _ in range(50):
        t = time.perf_counter()
        capture_images(x)
        ts.append(time.perf_counter() - t)
    assert np.median(ts) < 0.5e-3


# ---------------------------------------------------------------- tile_images (add_image's grids)
def test_tile_images_layout():
    x = np.arange(1, 7, dtype=np.float32).reshape(6, 1, 1, 1) * np.ones((6, 1, 2, 3), np.float32)
    g = tile_images(x, padding=1, pad_value=-1)
    assert g.shape == (2 * 3 + 1, 3 * 4 + 1, 1) and g.dtype == np.float32
    assert g[1, 1, 0] == 1 and g[1, 5, 0] == 2 and g[4, 1, 0] == 4 and g[4, 9, 0] == 6
    assert g[0, 0, 0] == -1 and g[3, 1, 0] == -1
    assert tile_images(x, nrow=6, padding=0).shape == (2, 18, 1)
    assert tile_images(x, nrow=100, padding=0).shape == (2, 18, 1)
    assert tile_images(x[:1]).shape == (2, 3, 1)  # one image: no padding
    assert tile_images(np.zeros((6, 3, 4, 4), np.uint8)).shape == (14, 20, 3)
    assert tile_images(np.zeros((64, 3, 32, 32), np.uint8)).shape == (274, 274, 3)


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(images=np.zeros((2, 2, 2))), ValueError, "images"),
    (dict(images=np.zeros((0, 1, 2, 2))), ValueError, "images"),
    (dict(images=np.zeros((2, 1, 2, 2)), nrow=0), ValueError, "nrow"),
    (dict(images=np.zeros((2, 1, 2, 2)), padding=-1), ValueError, "padding"),
    (dict(images=np.zeros((2, 1, 2, 2)), nrow=2.0), TypeError, "nrow must be a positive int or None, got float 2.0"),
    (dict(images=np.zeros((2, 1, 2, 2)), padding="2"), TypeError, "padding must be a non-negative int, got str '2'"),
    (dict(images="x"), TypeError, "images"),
])
def test_tile_images_errors(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        tile_images(**kwargs)


# ---------------------------------------------------------------- make_image_grid: mxboard's
def test_make_image_grid_is_mxboards_chw_8_per_row():
    x = np.arange(1, 11, dtype=np.uint8).reshape(10, 1, 1, 1) * np.ones((10, 3, 4, 5), np.uint8)
    g = make_image_grid(x)  # mxboard: nrow=8, padding=2, pad_value=0
    assert g.shape == (3, 2 * (4 + 2) + 2, 8 * (5 + 2) + 2) and g.dtype == np.uint8
    for k in range(10):
        y, c = divmod(k, 8)
        top, left = 2 + y * 6, 2 + c * 7
        assert (g[:, top:top + 4, left:left + 5] == k + 1).all(), k
    assert g[:, 8:, 2 + 2 * 7:].max() == 0  # the rest of the last row is padding
    assert g[:, :2].max() == 0 and g[:, :, :2].max() == 0 and g[:, 6:8].max() == 0
    assert make_image_grid(x, nrow=3, padding=0).shape == (3, 4 * 4, 3 * 5)
    assert make_image_grid(x, nrow=100, padding=1).shape == (3, 4 + 2, 10 * 6 + 1)
    assert make_image_grid(x[:3], nrow=2, square_image=True).shape == (3, 2 * 6 + 2, 2 * 7 + 2)
    assert (make_image_grid(x[:2], pad_value=9)[:, 0] == 9).all()


def test_make_image_grid_takes_hw_chw_and_gray_as_mxboard():
    rng = np.random.default_rng(6)
    hw = rng.random((4, 5), dtype=np.float32)
    for one in (hw, hw[None], hw[None, None]):  # HW, 1HW, 11HW: one image, gray made RGB, no padding
        g = make_image_grid(one)
        assert g.shape == (3, 4, 5) and g.dtype == np.float32
        for ch in g:
            np.testing.assert_array_equal(ch, hw)
    rgb = rng.random((3, 4, 5), dtype=np.float32)
    np.testing.assert_array_equal(make_image_grid(rgb), rgb)
    batch = make_image_grid(rng.random((2, 1, 4, 5), dtype=np.float32), padding=0)
    assert batch.shape == (3, 4, 10) and (batch[0] == batch[2]).all()
    listed = make_image_grid([rgb, rgb], padding=0)  # a list of images, as mxboard documented
    np.testing.assert_array_equal(listed, np.concatenate([rgb, rgb], axis=2))
    assert make_image_grid(rng.random((2, 4, 4, 5)), padding=0).shape == (4, 4, 10)  # RGBA


def test_make_image_grid_normalize():
    x = np.array([[[[0.0, 2.0]]], [[[4.0, 8.0]]]], np.float32)  # 2 gray 1x2 images
    np.testing.assert_allclose(make_image_grid(x, normalize=True, padding=0)[0], [[0, .25, .5, 1]])
    np.testing.assert_allclose(make_image_grid(x, normalize=True, scale_each=True, padding=0)[0],
                               [[0, 1, 0, 1]])
    np.testing.assert_allclose(make_image_grid(x, normalize=True, norm_range=(1, 5), padding=0)[0],
                               [[0, .25, .75, 1]])
    flat = make_image_grid(np.full((2, 2), 7, np.uint8), normalize=True)
    assert flat.dtype == np.float32 and (flat == 0).all()  # mxboard: NaN
    assert make_image_grid(x)[0, 0, 2] == 0.0  # normalize=False leaves the values alone


def test_make_image_grid_ndarray_in_ndarray_out():
    mx = pytest.importorskip("mxnet")
    x = mx.nd.ones((3, 1, 2, 2), dtype="uint8")
    g = make_image_grid(x, nrow=2)
    assert isinstance(g, mx.nd.NDArray) and g.context == x.context and g.dtype == np.uint8
    assert g.shape == (3, 2 * 4 + 2, 2 * 4 + 2) and int(g.sum().asscalar()) == 3 * 3 * 4


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(tensor=np.zeros(5)), ValueError, ["tensor", "2-D (HW), 3-D (CHW) or 4-D (NCHW)", "(5,)"]),
    (dict(tensor=np.zeros((2, 8, 8, 3))), ValueError, ["tensor", "1, 3 or 4 channels", "(2, 8, 8, 3)"]),
    (dict(tensor=np.zeros((0, 3, 2, 2))), ValueError, ["tensor", "at least one image"]),
    (dict(tensor=[np.zeros((2, 2)), np.zeros((3, 3))]), ValueError, ["tensor", "one shape"]),
    (dict(tensor="x"), TypeError, ["tensor", "str"]),
    (dict(tensor=np.zeros((2, 2)), nrow=0), ValueError, ["nrow", ">= 1", "0"]),
    (dict(tensor=np.zeros((2, 2)), nrow=2.0), TypeError, ["nrow", "float"]),
    (dict(tensor=np.zeros((2, 2)), padding=-1), ValueError, ["padding", "-1"]),
    (dict(tensor=np.zeros((2, 2)), normalize="yes"), TypeError, ["normalize", "True or False"]),
    (dict(tensor=np.zeros((2, 2)), normalize=True, norm_range=5), TypeError, ["norm_range", "(min, max)"]),
    (dict(tensor=np.zeros((2, 2)), normalize=True, norm_range=(2, 1)), ValueError, ["norm_range", "(2, 1)"]),
    (dict(tensor=np.zeros((2, 2)), normalize=True, norm_range=(0, 1, 2)), ValueError, ["norm_range", "(0, 1, 2)"]),
    (dict(tensor=np.zeros((2, 2)), normalize=True, norm_range=(0, "1")), TypeError, ["norm_range", "(0, '1')"]),
    (dict(tensor=np.zeros((2, 2)), pad_value="0"), TypeError, ["pad_value", "str"]),
    (dict(tensor=np.zeros((2, 1, 2, 2), np.uint8), pad_value=-1), ValueError, ["pad_value", "uint8", "-1"]),
])
def test_make_image_grid_errors_name_the_argument(kwargs, exc, words):
    with pytest.raises(exc) as e:
        make_image_grid(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ---------------------------------------------------------------- bad and odd inputs
# (input, SummaryWriter method, kwargs, expected pixels or (exception type, words in the message))
BAD = [
    ("2 channels", np.zeros((2, 5, 6)), "add_image", {}, (ValueError, ["image", "1, 3 or 4 channels", "(2, 5, 6)"])),
    ("5 channels", np.zeros((6, 7, 5)), "add_image", {}, (ValueError, ["image", "1, 3 or 4 channels", "(6, 7, 5)"])),
    ("2 ch CHW", np.zeros((2, 4, 4)), "add_image", {"dataformats": "CHW"}, (ValueError, ["image", "got 2 channels"])),
    ("batch 5 ch", np.zeros((2, 5, 6, 6)), "add_images", {}, (ValueError, ["images", "(2, 5, 6, 6)"])),
    ("2 ch NHWC", np.zeros((2, 4, 4, 2)), "add_images", {"dataformats": "NHWC"}, (ValueError, ["images", "2 channels"])),
    ("zero width", np.zeros((3, 4, 0)), "add_image", {}, (ValueError, ["image", "width", "(3, 4, 0)"])),
    ("zero height", np.zeros((0, 4)), "add_image", {}, (ValueError, ["image", "height"])),
    ("no images", np.zeros((0, 3, 4, 4)), "add_images", {}, (ValueError, ["images", "at least one"])),
    ("1-D", np.zeros(5), "add_image", {}, (ValueError, ["image", "(5,)"])),
    ("5-D", np.zeros((1, 1, 1, 1, 1)), "add_images", {}, (ValueError, ["images"])),
    ("2-D batch", np.zeros((4, 4)), "add_images", {}, (ValueError, ["images"])),
    ("not an array", "cat.png", "add_image", {}, (TypeError, ["image", "str"])),
    ("None", None, "add_images", {}, (TypeError, ["images", "None"])),
    ("complex", np.zeros((3, 2, 2), complex), "add_image", {}, (TypeError, ["image", "complex"])),
    ("bad fmt", np.zeros((3, 2, 2)), "add_image", {"dataformats": "CWH"}, (ValueError, ["dataformats", "CWH"])),
    ("fmt ndim", np.zeros((3, 2, 2)), "add_image", {"dataformats": "HW"}, (ValueError, ["image", "2-D"])),
    ("fmt type", np.zeros((3, 2, 2)), "add_image", {"dataformats": 3}, (TypeError, ["dataformats"])),
    ("single fmt batch", np.zeros((3, 2, 2)), "add_images", {"dataformats": "CHW"}, (ValueError, ["dataformats"])),
    ("max_images 0", np.zeros((3, 1, 2, 2)), "add_images", {"max_images": 0}, (ValueError, ["max_images"])),
    ("max_images float", np.zeros((3, 1, 2, 2)), "add_images", {"max_images": 1.5}, (TypeError, ["max_images"])),
    # documented value results (1×1×4 gray image)
    ("NaN -> 0", np.array([[[np.nan, 0.5, 1.0, 0.0]]]), "add_image", {}, [0, 128, 255, 0]),
    ("floats outside [0,1] rescaled", np.array([[[-0.5, -np.inf, 1.5, np.inf]]], np.float32), "add_image", {}, [0, 0, 255, 255]),
    ("int64 0..255 as is, clipped", np.array([[[-7, 3, 255, 4000]]], np.int64), "add_image", {}, [0, 3, 255, 255]),
    ("uint16 clipped", np.array([[[1, 256, 300, 0]]], np.uint16), "add_image", {}, [1, 255, 255, 0]),
    ("bool", np.array([[[True, False, True, False]]]), "add_image", {}, [255, 0, 255, 0]),
    ("float16", np.array([[[0.0, 0.25, 0.75, 1.0]]], np.float16), "add_image", {}, [0, 64, 191, 255]),
    ("nested list, rescaled by [0, 2]", [[[0.0, 1.0, 0.5, 2.0]]], "add_image", {}, [0, 128, 64, 255]),
    ("constant outside [0,1] clipped", np.full((1, 1, 4), 7.0), "add_image", {}, [255, 255, 255, 255]),
]


@pytest.mark.parametrize("name,x,method,kwargs,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_and_odd_inputs(tmp_path, name, x, method, kwargs, expected):
    if isinstance(expected, tuple):
        exc, words = expected
        with SummaryWriter(str(tmp_path)) as sw, pytest.raises(exc) as info:
            getattr(sw, method)("img", x, **kwargs)
        assert type(info.value) is exc
        for word in words:
            assert word in str(info.value)
    else:
        px = roundtrip(tmp_path, x, method, **kwargs)
        np.testing.assert_array_equal(px.ravel(), np.array(expected, np.uint8))


# ------------------------------------------------------------ the one float rule, and its warning
def test_floats_in_0_1_are_kept_and_no_warning(tmp_path, recwarn):
    x = np.array([[[0.0, 0.2, 0.4, 0.6]]], np.float32)  # a dark image stays dark
    px = roundtrip(tmp_path, x)
    np.testing.assert_array_equal(px.ravel(), [0, 51, 102, 153])
    assert not [w for w in recwarn if "gluon_tb" in str(w.message)]


@pytest.mark.parametrize("x, expected", [
    (np.array([[[0.0, 51.0, 127.5, 255.0]]], np.float32), [0, 51, 128, 255]),  # 0..255 floats: not 98% white
    (np.array([[[-2.0, -1.0, 0.0, 2.0]]], np.float32), [0, 64, 128, 255]),  # normalised: not black and white
])
def test_floats_outside_0_1_are_rescaled_with_one_warning_per_tag(tmp_path, x, expected):
    tag = f"rescaled_{x.min():g}"
    with SummaryWriter(str(tmp_path)) as sw, pytest.warns(UserWarning) as got:
        sw.add_image(tag, x, 0)
        sw.add_image(tag, x * 2, 1)  # the same tag again: no second warning
        sw.add_image(tag + "_other", x, 0)
        sw.flush()
    ours = [str(w.message) for w in got if "gluon_tb" in str(w.message)]
    assert len(ours) == 2 and f"image {tag!r}" in ours[0] and "rescaled by their min and max" in ours[0]
    assert f"[{x.min():g}, {x.max():g}]" in ours[0]
    got_px = read_png(tmp_path, tag)
    assert len(got_px) == 2
    for _, _, px in got_px:  # both steps rescaled alike: by the values' own range
        np.testing.assert_array_equal(px.ravel(), expected)
