/* Optional C kernel of gluon_tb/writer/_summaries/pixels.py: a PNG encoder (needs zlib).
 *
 * png(image, level) -> bytes
 *     image: uint8, C-contiguous, H x W x C with C in 1 (gray), 2 (gray + alpha), 3 (RGB) or
 *     4 (RGBA); level: zlib's compression level (0-9). A PNG of 8 bits a channel, not interlaced:
 *     the signature, IHDR, IDAT chunks, IEND. Each row is filtered by whichever of none, up, sub
 *     and Paeth gives the smallest sum of the filtered bytes taken as signed (libpng's heuristic),
 *     then the rows are deflated.
 * png_grid(x, n, c, h, w, ncol, pad, level) -> (bytes, n_finite, lo, hi, rescaled)
 *     pixels.checked_png: n float32/float64 images of c x h x w values (C-contiguous N x C x H x W,
 *     c in 1-4) as pixels.checked_uint8 + tile_images make them (_pixels.h: the finite range, the
 *     rescaling it decides, the grid of ncol columns with pad pixels of 0 around each cell; pad 0
 *     and ncol 1 for one image), then png() of that grid; all in one release of the GIL, where the
 *     numpy code released it for the range, the conversion, the transposing copy (or each image of
 *     a grid) and the encoding
 * zlib_version() -> str
 *
 * Pillow's own choices are made here too (its filter order and heuristic, zlib's settings, IDAT
 * chunks of its encoder's 64 KiB buffer), so that on the same zlib the bytes are the ones Pillow
 * writes (tests compare them, and the pixels everywhere). Why: Pillow encodes in 64 KiB pieces and checksums each
 * chunk through zlib.crc32, each a release of the GIL, ~26 for a 512 x 512 sprite; each take of
 * the GIL back, while the training thread runs Python, is a forced hand-over costing that thread
 * ~130-280 us on a VM. Here the whole encoding is one release.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <zlib.h>

#include "_pixels.h"

static void put_u32be(uint8_t *o, uint32_t v) {
    o[0] = (uint8_t)(v >> 24);
    o[1] = (uint8_t)(v >> 16);
    o[2] = (uint8_t)(v >> 8);
    o[3] = (uint8_t)v;
}

/* a chunk of n data bytes already at o + 8: its length, type and CRC; returns its end */
static uint8_t *seal_chunk(uint8_t *o, const char *type, size_t n) {
    put_u32be(o, (uint32_t)n);
    memcpy(o + 4, type, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, o + 4, (uInt)4);
    const uint8_t *p = o + 8;
    size_t left = n;
    while (left > 0) { /* crc32 takes a uInt length */
        uInt step = left > 0x40000000u ? 0x40000000u : (uInt)left;
        crc = crc32(crc, p, step);
        p += step;
        left -= step;
    }
    put_u32be(o + 8 + n, (uint32_t)crc);
    return o + 12 + n;
}

#define MAGNITUDE(v) ((v) < 128 ? (uint64_t)(v) : (uint64_t)(256 - (v)))

/* the predictor of PNG's Paeth filter (left a, above b, above-left c) */
static int paeth(int a, int b, int c) {
    int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    return (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
}

/* inside filter_rows: while the best sum is not 0, the row filtered by subtracting `predicted`
   (an expression of i) into trial; kept as the row's (filter `code`) if its sum is smaller */
#define TRY_FILTER(code, predicted)                                     \
    if (sum > 0) {                                                      \
        uint64_t s = 0;                                                 \
        for (size_t i = 0; i < stride; i++) {                           \
            uint8_t v = (uint8_t)(row[i] - (predicted));                \
            trial[i] = v;                                               \
            s += MAGNITUDE(v);                                          \
        }                                                               \
        if (s < sum) sum = s, dst[0] = (code), memcpy(best, trial, stride); \
    }

/* Each row with its filter byte into out, h * (1 + stride) bytes. The filter of a row is the
 * first of none, up, sub and Paeth (in that order; average is not tried) whose bytes, taken as
 * signed, have the smallest sum of magnitudes: Pillow's choice, so that the bytes are its own. */
static int filter_rows(const uint8_t *px, size_t h, size_t stride, size_t bpp, uint8_t *out) {
    uint8_t *zeros = calloc(stride, 1), *trial = malloc(stride);
    if (zeros == NULL || trial == NULL) {
        free(zeros);
        free(trial);
        return -1;
    }
    for (size_t y = 0; y < h; y++) {
        const uint8_t *row = px + y * stride, *up = y ? row - stride : zeros;
        uint8_t *dst = out + y * (stride + 1), *best = dst + 1;
        uint64_t sum = 0;
        dst[0] = 0;
        memcpy(best, row, stride);
        for (size_t i = 0; i < stride; i++) sum += MAGNITUDE(row[i]);
        TRY_FILTER(2, up[i]);                                   /* up */
        TRY_FILTER(1, i >= bpp ? row[i - bpp] : 0);             /* sub */
        TRY_FILTER(4, paeth(i >= bpp ? row[i - bpp] : 0, up[i], i >= bpp ? up[i - bpp] : 0));
    }
    free(zeros);
    free(trial);
    return 0;
}

/* the whole PNG into a malloc'd buffer (*png, *size); 0, or -1 out of memory, or a zlib error */
static int encode(const uint8_t *px, size_t h, size_t w, size_t ch, int level, uint8_t **png, size_t *size) {
    static const uint8_t signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    static const uint8_t color_type[5] = {0, 0, 4, 2, 6};
    size_t stride = w * ch, raw_n = h * (stride + 1);
    uint8_t *raw = malloc(raw_n ? raw_n : 1);
    if (raw == NULL || filter_rows(px, h, stride, ch, raw) != 0) {
        free(raw);
        return -1;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    int err = deflateInit2(&z, level, Z_DEFLATED, 15, 9, Z_FILTERED); /* Pillow's settings for PNG */
    if (err != Z_OK) {
        free(raw);
        return err == Z_MEM_ERROR ? -1 : err;
    }
    /* the deflated rows go in IDAT chunks of `part` bytes (the last one shorter), as Pillow
       writes them: its encoder's output buffer, 64 KiB or 4 bytes a pixel of a row */
    size_t bound = deflateBound(&z, (uLong)raw_n), part = w * 4 > 65536 ? w * 4 : 65536;
    uint8_t *zbuf = malloc(bound);
    if (zbuf == NULL) {
        deflateEnd(&z);
        free(raw);
        return -1;
    }
    z.next_in = raw;
    z.avail_in = (uInt)raw_n;
    z.next_out = zbuf;
    z.avail_out = (uInt)bound;
    for (;;) { /* deflateBound is enough, but for stored blocks zlib may want more calls */
        err = deflate(&z, Z_FINISH);
        if (err == Z_STREAM_END || (err != Z_OK && err != Z_BUF_ERROR)) break;
        if (z.avail_out == 0) { /* full: grow */
            size_t have = z.total_out;
            uint8_t *more = realloc(zbuf, bound * 2);
            if (more == NULL) {
                err = Z_MEM_ERROR;
                break;
            }
            zbuf = more;
            z.next_out = zbuf + have;
            z.avail_out = (uInt)(bound * 2 - have);
            bound *= 2;
        } else if (err == Z_BUF_ERROR) { /* no progress possible */
            break;
        }
    }
    size_t zn = z.total_out;
    deflateEnd(&z);
    free(raw);
    uint8_t *out = err == Z_STREAM_END ? malloc(8 + 25 + (zn / part + 1) * 12 + zn + 12) : NULL;
    if (out == NULL) {
        free(zbuf);
        return err == Z_STREAM_END || err == Z_MEM_ERROR ? -1 : err;
    }
    memcpy(out, signature, 8);
    uint8_t *o = out + 8, *ihdr = o + 8;
    put_u32be(ihdr, (uint32_t)w);
    put_u32be(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;               /* bits a channel */
    ihdr[9] = color_type[ch];
    ihdr[10] = ihdr[11] = ihdr[12] = 0; /* deflate, adaptive filtering, not interlaced */
    o = seal_chunk(o, "IHDR", 13);
    for (size_t at = 0; at < zn; at += part) {
        size_t n = zn - at < part ? zn - at : part;
        memcpy(o + 8, zbuf + at, n);
        o = seal_chunk(o, "IDAT", n);
    }
    free(zbuf);
    o = seal_chunk(o, "IEND", 0);
    *png = out;
    *size = (size_t)(o - out);
    return 0;
}

static PyObject *png(PyObject *self, PyObject *args) {
    PyObject *obj;
    int level;
    if (!PyArg_ParseTuple(args, "Oi:png", &obj, &level)) return NULL;
    if (level < 0 || level > 9) {
        PyErr_Format(PyExc_ValueError, "level must be 0-9, got %d", level);
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) return NULL;
    const char *f = b.format ? b.format : "B";
    if (b.itemsize != 1 || (strcmp(f, "B") != 0 && strcmp(f, "=B") != 0 && strcmp(f, "<B") != 0) || b.ndim != 3 ||
        b.shape[2] < 1 || b.shape[2] > 4 || b.shape[0] < 1 || b.shape[1] < 1 || b.shape[0] > 0x7FFFFFFF ||
        b.shape[1] > 0x7FFFFFFF || b.len > 0x3FFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "image must be a C-contiguous uint8 H x W x C array, C in 1-4, "
                                          "non-empty and under 1 GiB");
        PyBuffer_Release(&b);
        return NULL;
    }
    uint8_t *out = NULL;
    size_t size = 0;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = encode((const uint8_t *)b.buf, (size_t)b.shape[0], (size_t)b.shape[1], (size_t)b.shape[2], level, &out, &size);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (err == -1) return PyErr_NoMemory();
    if (err != 0) return PyErr_Format(PyExc_RuntimeError, "zlib failed to compress the image (error %d)", err);
    PyObject *result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)size);
    free(out);
    return result;
}

static PyObject *png_grid(PyObject *self, PyObject *args) {
    PyObject *xo;
    Py_ssize_t n, c, h, w, ncol, pad;
    int level;
    if (!PyArg_ParseTuple(args, "Onnnnnni:png_grid", &xo, &n, &c, &h, &w, &ncol, &pad, &level)) return NULL;
    if (n < 1 || c < 1 || c > 4 || h < 1 || w < 1 || ncol < 1 || ncol > n || pad < 0 || level < 0 || level > 9) {
        PyErr_SetString(PyExc_ValueError, "png_grid: n, h, w and ncol must be positive (ncol <= n), c 1-4, "
                                          "pad >= 0, level 0-9");
        return NULL;
    }
    Py_ssize_t gh, gw;
    grid_size(n, h, w, ncol, pad, &gh, &gw);
    if (gh > 0x7FFFFFFF || gw > 0x7FFFFFFF || (double)gh * (double)gw * (double)c > (double)0x3FFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "png_grid: the grid must be under 1 GiB");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(xo, &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    int kind = float_kind(&b, "x");
    if (kind == 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    if (b.len / kind != n * c * h * w) {
        PyErr_Format(PyExc_ValueError, "x must hold n * c * h * w = %zd values, got %zd", n * c * h * w, b.len / kind);
        PyBuffer_Release(&b);
        return NULL;
    }
    size_t grid_len = (size_t)(gh * gw * c), size = 0;
    uint8_t *grid = malloc(grid_len), *out = NULL;
    if (grid == NULL) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    Py_ssize_t finite = 0;
    double lo = 0.0, hi = 0.0;
    int rescaled, err;
    Py_BEGIN_ALLOW_THREADS
    rescaled = grid_pixels(b.buf, kind, n, c, h, w, ncol, pad, grid, grid_len, &finite, &lo, &hi);
    err = encode(grid, (size_t)gh, (size_t)gw, (size_t)c, level, &out, &size);
    Py_END_ALLOW_THREADS
    free(grid);
    PyBuffer_Release(&b);
    if (err == -1) return PyErr_NoMemory();
    if (err != 0) return PyErr_Format(PyExc_RuntimeError, "zlib failed to compress the image (error %d)", err);
    PyObject *png_bytes = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)size);
    free(out);
    if (png_bytes == NULL) return NULL;
    return Py_BuildValue("(NnddO)", png_bytes, finite, lo, hi, rescaled ? Py_True : Py_False);
}

static PyObject *zlib_runtime(PyObject *self, PyObject *unused) { return PyUnicode_FromString(zlibVersion()); }

static PyMethodDef methods[] = {
    {"png", png, METH_VARARGS, "png(image, level) -> bytes: a uint8 H x W x C image (C in 1-4) as PNG"},
    {"png_grid", png_grid, METH_VARARGS,
     "png_grid(x, n, c, h, w, ncol, pad, level) -> (bytes, n_finite, lo, hi, rescaled): float N x C x H x W "
     "images as one PNG grid, converted and tiled as pixels.checked_uint8 and tile_images do"},
    {"zlib_version", zlib_runtime, METH_NOARGS, "zlib_version() -> str: the version of the zlib it runs on"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpng", "C kernel of gluon_tb's PNG encoding.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastpng(void) { return PyModule_Create(&module); }
