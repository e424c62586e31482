"""The C kernel ``_fastpng`` writes the PNG Pillow writes: the same pixels always, and on the same
zlib the same bytes (its filter choice, zlib settings and IDAT chunking are Pillow's), so moving the
encoding off Pillow (one release of the GIL instead of two per 64 KiB) changes nothing on disk."""
import io
import shutil
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image, features

from gluon_tb.writer._summaries import pixels

fast = pixels._fastpng
needs_kernel = pytest.mark.skipif(fast is None, reason="the optional PNG kernel is not built")


def pillow_png(hwc, level=pixels.PNG_COMPRESS_LEVEL):
    buf = io.BytesIO()
    Image.fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc).save(buf, format="PNG", compress_level=level)
    return buf.getvalue()


def decoded(png):
    im = Image.open(io.BytesIO(png))
    im.load()
    a = np.asarray(im)
    return a[:, :, None] if a.ndim == 2 else a


def same_zlib():
    """Pillow's zlib is the one the kernel runs on: then the deflated bytes must agree."""
    return features.version("zlib") == fast.zlib_version()


def chunks(png):
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, out = 8, []
    while at < len(png):
        n, kind = struct.unpack(">I4s", png[at:at + 8])
        data = png[at + 8:at + 8 + n]
        assert struct.unpack(">I", png[at + 8 + n:at + 12 + n])[0] == zlib.crc32(kind + data)
        out.append((kind, data))
        at += 12 + n
    return out


def test_the_png_kernel_is_built():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: Pillow encodes")
    assert fast is not None, "setup.py should have built gluon_tb/writer/_summaries/_fastpng (zlib.h missing?)"


images = st.integers(1, 4).flatmap(lambda c: st.one_of(
    hnp.arrays(np.uint8, st.tuples(st.integers(1, 70), st.integers(1, 70), st.just(c))),  # anything
    hnp.arrays(np.uint8, st.tuples(st.integers(1, 40), st.integers(1, 40), st.just(c)),  # few values: ties
               elements=st.sampled_from([0, 1, 127, 128, 255]))))


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(images, st.sampled_from([0, 1, 6, 9]))
def test_the_kernel_writes_the_pixels_and_bytes_pillow_writes(hwc, level):
    ours = fast.png(hwc, level)
    np.testing.assert_array_equal(decoded(ours), hwc)
    if same_zlib():
        assert ours == pillow_png(hwc, level)
    kinds = [k for k, _ in chunks(ours)]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and set(kinds[1:-1]) == {b"IDAT"}


@needs_kernel
def test_large_images_split_idat_as_pillow_does_and_encode_png_uses_the_kernel():
    rng = np.random.default_rng(7)
    wide = rng.integers(0, 256, (40, 20000, 3), dtype=np.uint8)  # a row of 80 kB: chunks of w * 4 bytes
    tall = (rng.random((700, 300, 4)) * 40).astype(np.uint8)  # 64 KiB chunks
    for hwc in (wide, tall):
        ours = pixels.encode_png(hwc)
        assert ours == fast.png(hwc, pixels.PNG_COMPRESS_LEVEL)
        idat = [d for k, d in chunks(ours) if k == b"IDAT"]
        part = max(65536, hwc.shape[1] * 4)
        assert len(idat) > 1 and all(len(d) == part for d in idat[:-1]) and 0 < len(idat[-1]) <= part
        np.testing.assert_array_equal(decoded(ours), hwc)
        if same_zlib():
            assert ours == pillow_png(hwc)
    strided = wide[:, ::7]  # not contiguous: copied first
    np.testing.assert_array_equal(decoded(pixels.encode_png(strided)), strided)


@needs_kernel
def test_what_the_kernel_refuses():
    for bad in (np.zeros((2, 2, 5), np.uint8), np.zeros((2, 2), np.uint8), np.zeros((0, 2, 3), np.uint8),
                np.zeros((2, 2, 3), np.uint16), np.zeros((2, 2, 3), np.float32)):
        with pytest.raises(ValueError, match="C-contiguous uint8 H x W x C"):
            fast.png(bad, 1)
    with pytest.raises(ValueError, match="level must be 0-9, got 10"):
        fast.png(np.zeros((1, 1, 3), np.uint8), 10)
    with pytest.raises(ValueError, match="C-contiguous"):
        fast.png(np.zeros((4, 4, 3), np.uint8)[:, ::2], 1)
