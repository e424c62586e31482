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
 * pcm16(x, out)
 *     audio.to_pcm16: d = (double)x clipped to [-1, 1], NaN -> 0, rounded half to even (d * 32767)
 *
 * pcm16_piece(x) -> capsule
 *     the same samples (little-endian) as a fill piece of a chain.Chain (../_format/_fill.h): made
 *     while the record is framed and written, in that release of the GIL (audio.build_audio)
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

#include "_pixels.h"
#include "../_format/_fill.h"

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

static PyObject *finite_range(PyObject *self, PyObject *arg) {
    Py_buffer b;
    int kind;
    if (get_in(arg, &b, &kind) < 0) return NULL;
    Py_ssize_t n = b.len / kind, finite = 0;
    double lo = 0.0, hi = 0.0;
    Py_BEGIN_ALLOW_THREADS
    if (kind == 4)
        FINITE_RANGE(float, b.buf, n, finite, lo, hi);
    else
        FINITE_RANGE(double, b.buf, n, finite, lo, hi);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(ndd)", finite, lo, hi);
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

static inline int16_t sample(double d) {
    if (d != d) return 0;
    if (d > 1.0) d = 1.0;
    if (d < -1.0) d = -1.0;
    return (int16_t)nearbyint(d * 32767.0);
}

/* the n samples of x (float32 when kind is 4, else float64) as little-endian int16, low byte first
 * (out need not be aligned: a fill piece writes into a record) */
static void pcm16_bytes(const void *x, int kind, Py_ssize_t n, uint8_t *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        uint16_t v = (uint16_t)sample(kind == 4 ? (double)((const float *)x)[i] : ((const double *)x)[i]);
        out[2 * i] = (uint8_t)(v & 0xFF);
        out[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

static PyObject *pcm16(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    if (!PyArg_ParseTuple(args, "OO", &xo, &oo)) return NULL;
    Py_buffer b, o;
    int kind;
    Py_ssize_t n;
    if (get_in_out(xo, oo, &b, &o, &kind, &n, 2) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    pcm16_bytes(b.buf, kind, n, (uint8_t *)o.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

/* pcm16_piece(x) -> capsule: pcm16 of x as a fill piece (_fill.h): the little-endian int16 samples
 * are made while the record holding them is framed and written, in the same release of the GIL. */
typedef struct {
    gtb_fill base;
    Py_buffer src;
    int kind;
} pcm16_fill;

static void pcm16_run(const gtb_fill *self, uint8_t *out) {
    const pcm16_fill *f = (const pcm16_fill *)self;
    pcm16_bytes(f->src.buf, f->kind, f->src.len / f->kind, out);
}

static void pcm16_free(PyObject *capsule) {
    pcm16_fill *f = PyCapsule_GetPointer(capsule, GTB_FILL_CAPSULE);
    if (f == NULL) return;
    PyBuffer_Release(&f->src);
    PyMem_Free(f);
}

static PyObject *pcm16_piece(PyObject *self, PyObject *arg) {
    pcm16_fill *f = PyMem_Malloc(sizeof(pcm16_fill));
    if (f == NULL) return PyErr_NoMemory();
    if (get_in(arg, &f->src, &f->kind) < 0) {
        PyMem_Free(f);
        return NULL;
    }
    f->base.len = f->src.len / f->kind * 2;
    f->base.fill = pcm16_run;
    PyObject *capsule = PyCapsule_New(f, GTB_FILL_CAPSULE, pcm16_free);
    if (capsule == NULL) {
        PyBuffer_Release(&f->src);
        PyMem_Free(f);
    }
    return capsule;
}

static PyMethodDef methods[] = {
    {"finite_range", finite_range, METH_O,
     "finite_range(x) -> (n_finite, lo, hi): the min and max of x's finite float values"},
    {"to_uint8", to_uint8, METH_VARARGS, "to_uint8(x, out, rescale, lo, scale): pixels.to_uint8 of float values into out"},
    {"pcm16", pcm16, METH_VARARGS, "pcm16(x, out): audio.to_pcm16 of float values into out (int16)"},
    {"pcm16_piece", pcm16_piece, METH_O,
     "pcm16_piece(x) -> capsule: pcm16 of x, made while its record is framed (a chain.Chain fill piece)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastconvert",
                                    "C kernels of gluon_tb's image and audio conversions.", -1, methods};

PyMODINIT_FUNC PyInit__fastconvert(void) { return PyModule_Create(&module); }
