/* Optional C kernel of gluon_tb/writer/_histogram.py: bucket counts and statistics in one pass.
 *
 * count(x, base, inner, counts) -> (n_finite, min, max, sum, sum_sq)
 *
 *   x       C-contiguous float32 or float64 values (any buffer: a numpy array)
 *   base    int64[65536]: per cell (top 16 bits of a value), 1 + the bucket of its smallest value
 *   inner   float[65536] of x's type: the value from which on the cell's next bucket starts, or inf
 *   counts  writable int64 buffer, longer than every base[c] + 1; incremented at
 *           base[cell] + (x >= inner[cell]) for every value, exactly as the numpy code does
 *
 * min, max, sum and sum of squares are over the finite values (sums in double, added per block
 * of 256 so the rounding error stays that of a short sum). The GIL is released meanwhile.
 * Only Python.h is needed: no numpy headers at build time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NCELLS 65536
#define BLOCK 256

typedef struct {
    int64_t finite;
    double lo, hi, sum, sq;
} stats_t;

/* count_f32 and count_f64: the same loop for each float width. A value's cell is the top 16
 * bits of its bit pattern; it is finite unless its exponent bits are all ones. */
#define DEFINE_COUNT(NAME, FLOAT, UINT, CELL_SHIFT, EXP_SHIFT, EXP_MASK)                       \
    static void NAME(const FLOAT *x, Py_ssize_t n, const int64_t *base, const FLOAT *inner,    \
                     int64_t *counts, stats_t *st) {                                           \
        double lo = INFINITY, hi = -INFINITY, sum = 0.0, sq = 0.0;                             \
        int64_t finite = 0;                                                                    \
        for (Py_ssize_t start = 0; start < n; start += BLOCK) {                                \
            Py_ssize_t end = start + BLOCK < n ? start + BLOCK : n;                            \
            double bs = 0.0, bq = 0.0;                                                         \
            for (Py_ssize_t i = start; i < end; i++) {                                         \
                FLOAT v = x[i];                                                                \
                UINT bits;                                                                     \
                memcpy(&bits, &v, sizeof bits);                                                \
                UINT cell = bits >> (CELL_SHIFT);                                              \
                counts[base[cell] + (v >= inner[cell])]++;                                     \
                if (((bits >> (EXP_SHIFT)) & (EXP_MASK)) != (EXP_MASK)) {                      \
                    double d = (double)v;                                                      \
                    bs += d;                                                                   \
                    bq += d * d;                                                               \
                    if (d < lo) lo = d;                                                        \
                    if (d > hi) hi = d;                                                        \
                    finite++;                                                                  \
                }                                                                              \
            }                                                                                  \
            sum += bs;                                                                         \
            sq += bq;                                                                          \
        }                                                                                      \
        st->finite = finite; st->lo = lo; st->hi = hi; st->sum = sum; st->sq = sq;             \
    }

DEFINE_COUNT(count_f32, float, uint32_t, 16, 23, 0xFFu)
DEFINE_COUNT(count_f64, double, uint64_t, 48, 52, 0x7FFu)

static int is_format(const Py_buffer *b, char code) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;  /* native little-endian is all we build for */
    return f[0] == code && f[1] == '\0';
}

static PyObject *count(PyObject *self, PyObject *args) {
    PyObject *ox, *obase, *oinner, *ocounts;
    if (!PyArg_ParseTuple(args, "OOOO:count", &ox, &obase, &oinner, &ocounts)) return NULL;
    Py_buffer x = {0}, base = {0}, inner = {0}, counts = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(ox, &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(obase, &base, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(oinner, &inner, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(ocounts, &counts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    int f32 = x.itemsize == 4 && is_format(&x, 'f');
    int f64 = x.itemsize == 8 && is_format(&x, 'd');
    if (!f32 && !f64) {
        PyErr_SetString(PyExc_TypeError, "x must be float32 or float64");
        goto done;
    }
    if (base.itemsize != 8 || base.len != 8 * NCELLS || inner.itemsize != x.itemsize ||
        inner.len != x.itemsize * NCELLS || counts.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "base, inner or counts has the wrong size or type");
        goto done;
    }
    /* every index must land inside counts: base[c] + 1 < len(counts) */
    Py_ssize_t ncounts = counts.len / 8;
    const int64_t *b = (const int64_t *)base.buf;
    for (Py_ssize_t c = 0; c < NCELLS; c++) {
        if (b[c] < 0 || b[c] + 1 >= ncounts) {
            PyErr_SetString(PyExc_ValueError, "base has an index outside counts");
            goto done;
        }
    }
    stats_t st;
    Py_ssize_t n = x.len / x.itemsize;
    Py_BEGIN_ALLOW_THREADS
    if (f32)
        count_f32((const float *)x.buf, n, b, (const float *)inner.buf, (int64_t *)counts.buf, &st);
    else
        count_f64((const double *)x.buf, n, b, (const double *)inner.buf, (int64_t *)counts.buf, &st);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("Ldddd", (long long)st.finite, st.lo, st.hi, st.sum, st.sq);
done:
    if (x.obj) PyBuffer_Release(&x);
    if (base.obj) PyBuffer_Release(&base);
    if (inner.obj) PyBuffer_Release(&inner);
    if (counts.obj) PyBuffer_Release(&counts);
    return result;
}

static PyMethodDef methods[] = {
    {"count", count, METH_VARARGS,
     "count(x, base, inner, counts) -> (n_finite, min, max, sum, sum_sq)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fasthist",
                                    "C kernel of gluon_tb's histograms.", -1, methods};

PyMODINIT_FUNC PyInit__fasthist(void) { return PyModule_Create(&module); }
