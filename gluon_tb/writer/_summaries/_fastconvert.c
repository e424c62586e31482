/* Optional C kernels of gluon_tb/writer/_summaries/pixels.py and audio.py: the value conversions of
 * images and audio clips, each in one pass with the GIL released once.
 *
 * Why: the numpy code does the same in 6-10 calls, and each call on a large array releases the GIL
 * and takes it back. While the training thread runs Python, taking it back means waiting for the
 * switch interval and then a forced hand-over, which costs the training thread two thread wake-ups
 * (~130-280 us measured on a 2-core VM, benchmarks/gil_takes.py) each time: 1.5-2.5 ms a payload (benchmarks/bench_gil.py, the off-CPU
 * column). Same results as the numpy code, value for value (tests/writer/summaries/test_fastconvert.py).
 *
 * finite_range(x) -> (n_finite, lo, hi)
 *     the count of finite values and the min and max of them (0.0, 0.0 when there are none)
 * to_uint8(x, out, rescale, lo, scale)
 *     pixels.to_uint8 of float values: with rescale true, v = ((float)x - (float)lo) * (float)scale,
 *     else v = (float)x; then f = v * 255 + 0.5 (two float32 operations, as numpy does them), NaN ->
 *     0, +inf -> 255, -inf -> 0, clipped to [0, 255] and truncated
 * image_grid(x, out, n, c, h, w, ncol, pad) -> (n_finite, lo, hi, rescaled)
 *     pixels.checked_grid: x holds n images of c x h x w values (N x C x H x W); their finite range
 *     decides the rescaling as pixels.display_range does (none when no value is finite, when all are
 *     in [0, 1] or all equal; else by their min and max), each value becomes a pixel as to_uint8
 *     makes it, written H x W x C into out, a uint8 grid of ceil(n / ncol) x ncol cells of h x w
 *     separated and framed by pad pixels of 0 (pixels.tile_images' layout; out is zeroed here). One release of the GIL
 *     where the numpy code took 3 (range, conversion, transposing copy) or one per image of a grid
 * pcm16(x, out)
 *     audio.to_pcm16: d = (double)x clipped to [-1, 1], NaN -> 0, rounded half to even (d * 32767)
 *
 *   x    a C-contiguous float32 or float64 buffer (any shape: read as its values in order)
 *   out  a writable C-contiguous buffer of as many uint8 (to_uint8) or int16 (pcm16) values
 *
 * Built with -ffp-contract=off (setup.py): a fused multiply-add would round once where numpy rounds
 * twice. Only Python.h is needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* x's values: 'f' or 'd' (with an optional byte-order prefix of this machine's order) */
static int float_kind(Py_buffer *b, const char *arg) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (f[0] == 'f' && f[1] == 0 && b->itemsize == 4) return 4;
    if (f[0] == 'd' && f[1] == 0 && b->itemsize == 8) return 8;
    PyErr_Format(PyExc_TypeError, "%s must be float32 or float64 values, got format %.20s", arg,
                 b->format ? b->format : "B");
    return 0;
}

static int get_in(PyObject *o, Py_buffer *b, int *kind) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    *kind = float_kind(b, "x");
    if (*kind == 0) {
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static int get_out(PyObject *o, Py_buffer *b, Py_ssize_t n, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return -1;
    if (b->len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "out must hold %zd bytes (%zd values), got %zd", n * itemsize, n, b->len);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* x (float values) and out (as many values of itemsize bytes): both buffers, or -1 and neither */
static int get_in_out(PyObject *xo, PyObject *oo, Py_buffer *b, Py_buffer *o, int *kind, Py_ssize_t *n,
                      Py_ssize_t itemsize) {
    if (get_in(xo, b, kind) < 0) return -1;
    *n = b->len / *kind;
    if (get_out(oo, o, *n, itemsize) < 0) {
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* the count, min and max of the finite values of x (of C type T), into finite, lo and hi */
#define FINITE_RANGE(T)                                     \
    do {                                                    \
        const T *x = (const T *)b.buf;                      \
        T l = INFINITY, h = -INFINITY;                      \
        for (Py_ssize_t i = 0; i < n; i++) {                \
            T v = x[i];                                     \
            if (isfinite(v)) {                              \
                finite++;                                   \
                if (v < l) l = v;                           \
                if (v > h) h = v;                           \
            }                                               \
        }                                                   \
        if (finite) { lo = l; hi = h; }                     \
    } while (0)

static PyObject *finite_range(PyObject *self, PyObject *arg) {
    Py_buffer b;
    int kind;
    if (get_in(arg, &b, &kind) < 0) return NULL;
    Py_ssize_t n = b.len / kind, finite = 0;
    double lo = 0.0, hi = 0.0;
    Py_BEGIN_ALLOW_THREADS
    if (kind == 4)
        FINITE_RANGE(float);
    else
        FINITE_RANGE(double);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(ndd)", finite, lo, hi);
}

static inline uint8_t pixel(float v, int rescale, float lo, float scale) {
    if (rescale) {
        v = v - lo;
        v = v * scale;
    }
    float f = v * 255.0f;
    f = f + 0.5f;
    if (f != f) return 0;
    if (f >= 255.0f) return 255;
    if (f <= 0.0f) return 0;
    return (uint8_t)f;
}

static PyObject *to_uint8(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    int rescale;
    double lo_d, scale_d;
    if (!PyArg_ParseTuple(args, "OOpdd", &xo, &oo, &rescale, &lo_d, &scale_d)) return NULL;
    Py_buffer b, o;
    int kind;
    Py_ssize_t n;
    if (get_in_out(xo, oo, &b, &o, &kind, &n, 1) < 0) return NULL;
    float lo = (float)lo_d, scale = (float)scale_d;
    uint8_t *out = (uint8_t *)o.buf;
    Py_BEGIN_ALLOW_THREADS
    if (kind == 4) {
        const float *x = (const float *)b.buf;
        for (Py_ssize_t i = 0; i < n; i++) out[i] = pixel(x[i], rescale, lo, scale);
    } else {
        const double *x = (const double *)b.buf;
        for (Py_ssize_t i = 0; i < n; i++) out[i] = pixel((float)x[i], rescale, lo, scale);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

/* x's values (of C type T) as pixels into the grid cells of out (see image_grid) */
#define GRID(T)                                                                                  \
    do {                                                                                         \
        const T *x = (const T *)b.buf;                                                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                                     \
            Py_ssize_t y0 = pad + (i / ncol) * (h + pad), x0 = pad + (i % ncol) * (w + pad);     \
            for (Py_ssize_t ch = 0; ch < c; ch++) {                                              \
                for (Py_ssize_t y = 0; y < h; y++) {                                             \
                    const T *row = x + ((i * c + ch) * h + y) * w;                               \
                    uint8_t *dst = out + ((y0 + y) * gw + x0) * c + ch;                          \
                    for (Py_ssize_t k = 0; k < w; k++) dst[k * c] = pixel((float)row[k], rescale, lo_f, scale); \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    } while (0)

static PyObject *image_grid(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    Py_ssize_t n, c, h, w, ncol, pad;
    if (!PyArg_ParseTuple(args, "OOnnnnnn:image_grid", &xo, &oo, &n, &c, &h, &w, &ncol, &pad)) return NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || ncol < 1 || ncol > n || pad < 0) {
        PyErr_SetString(PyExc_ValueError, "image_grid: n, c, h, w and ncol must be positive (ncol <= n), pad >= 0");
        return NULL;
    }
    Py_buffer b, o;
    int kind;
    if (get_in(xo, &b, &kind) < 0) return NULL;
    if (b.len / kind != n * c * h * w) {
        PyErr_Format(PyExc_ValueError, "x must hold n * c * h * w = %zd values, got %zd", n * c * h * w, b.len / kind);
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_ssize_t gh = ((n + ncol - 1) / ncol) * (h + pad) + pad, gw = ncol * (w + pad) + pad;
    if (get_out(oo, &o, gh * gw * c, 1) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_ssize_t finite = 0, total = n * c * h * w;
    double lo = 0.0, hi = 0.0;
    int rescale;
    uint8_t *out = (uint8_t *)o.buf;
    Py_BEGIN_ALLOW_THREADS
    memset(out, 0, (size_t)o.len);  /* the frame (numpy's zeroed allocation would release the GIL itself) */
    {
        Py_ssize_t n = total;  /* FINITE_RANGE reads n values: all of them */
        if (kind == 4)
            FINITE_RANGE(float);
        else
            FINITE_RANGE(double);
    }
    rescale = finite > 0 && !((lo >= 0.0 && hi <= 1.0) || hi == lo);
    float lo_f = rescale ? (float)lo : 0.0f, scale = rescale ? (float)(1.0 / (hi - lo)) : 1.0f;
    if (kind == 4)
        GRID(float);
    else
        GRID(double);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&b);
    return Py_BuildValue("(nddO)", finite, lo, hi, rescale ? Py_True : Py_False);
}

static inline int16_t sample(double d) {
    if (d != d) return 0;
    if (d > 1.0) d = 1.0;
    if (d < -1.0) d = -1.0;
    return (int16_t)nearbyint(d * 32767.0);
}

static PyObject *pcm16(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    if (!PyArg_ParseTuple(args, "OO", &xo, &oo)) return NULL;
    Py_buffer b, o;
    int kind;
    Py_ssize_t n;
    if (get_in_out(xo, oo, &b, &o, &kind, &n, 2) < 0) return NULL;
    int16_t *out = (int16_t *)o.buf;
    Py_BEGIN_ALLOW_THREADS
    if (kind == 4) {
        const float *x = (const float *)b.buf;
        for (Py_ssize_t i = 0; i < n; i++) out[i] = sample((double)x[i]);
    } else {
        const double *x = (const double *)b.buf;
        for (Py_ssize_t i = 0; i < n; i++) out[i] = sample(x[i]);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"finite_range", finite_range, METH_O,
     "finite_range(x) -> (n_finite, lo, hi): the min and max of x's finite float values"},
    {"to_uint8", to_uint8, METH_VARARGS, "to_uint8(x, out, rescale, lo, scale): pixels.to_uint8 of float values into out"},
    {"image_grid", image_grid, METH_VARARGS,
     "image_grid(x, out, n, c, h, w, ncol, pad) -> (n_finite, lo, hi, rescaled): float N x C x H x W images as "
     "uint8 pixels tiled H x W x C into out"},
    {"pcm16", pcm16, METH_VARARGS, "pcm16(x, out): audio.to_pcm16 of float values into out (int16)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastconvert",
                                    "C kernels of gluon_tb's image and audio conversions.", -1, methods};

PyMODINIT_FUNC PyInit__fastconvert(void) { return PyModule_Create(&module); }
