/* Optional C kernel of gluon_tb/writer/_summaries/histogram_counts.py: bucket counts and statistics in one pass.
 *
 * count(x, cells, counts) -> (n_finite, min, max, sum, sum_sq)
 *
 *   x       C-contiguous float32 or float64 values (any buffer: a numpy array)
 *   cells   65536 packed cells, one per top 16 bits of a value: {float inner; int32 base} for
 *           float32 x, {double inner; int64 base} for float64 x (histogram_counts._Table.cells).
 *           base: 1 + the bucket of the cell's smallest value; inner: the value from which on
 *           the cell's next bucket starts, or inf
 *   counts  writable int64 buffer; incremented at base + (x >= inner) for every value, exactly
 *           as the numpy code does. An index outside counts raises ValueError (checked for the
 *           cells the values use, as they are used: the tables are right by construction, the
 *           check keeps a wrong one from writing outside the buffer)
 *
 * min, max, sum and sum of squares are over the finite values (sums in double, added per block
 * of 256 in two interleaved partial sums). The loop assumes every value is finite, which is
 * what gradients and weights are: a NaN or an infinity shows in the result (a NaN or infinite
 * sum, an infinite min or max), and only then a second, exact pass takes the statistics over
 * the finite values. The GIL is released meanwhile.
 *
 * One packed table, float min/max and no finiteness branch per value: faster than the earlier
 * loop (two separate tables, double min/max, a finiteness branch per value, and a scan of all
 * 65,536 bases per call; figures in benchmarks/RESULTS-notes.md).
 *
 * stats(x) -> (n_finite, min, max, sum, sum_sq) and uniform(x, edges, counts) serve bins=<int>:
 * the statistics first (numpy's uniform edges depend on the range), then a computed bucket per
 * value, moved until edges[i] <= x < edges[i + 1] as numpy.histogram does for uniform bins.
 *
 * Each call takes an optional last argument, nice (default 0). With nice > 0 (Linux), the loop
 * runs on a thread of its own created for the call, which sets its own nice value first, while
 * the calling thread waits without the GIL: the counting takes the CPU that training leaves idle,
 * and no thread that ever takes the GIL runs at a low priority (a low-priority thread that waits
 * for the GIL makes the thread holding it wait for it in turn: CPython hands the GIL over to the
 * thread that asked for it; see _common/threads.py). Where the thread cannot be created, the loop
 * runs on the calling thread.
 *
 * Only Python.h is needed: no numpy headers at build time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../_format/_fill.h"
#ifdef __linux__
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define NCELLS 65536
#define BLOCK 256

typedef struct {
    int64_t finite;
    double lo, hi, sum, sq;
} stats_t;

typedef struct { float inner; int32_t base; } cell32_t;
typedef struct { double inner; int64_t base; } cell64_t;

/* stats_f32 / stats_f64: n_finite, min, max, sum, sum of squares of the finite values, in an
 * exact pass: a value is finite unless its exponent bits are all ones. */
#define DEFINE_STATS(STATS, FLOAT, UINT, EXP_SHIFT, EXP_MASK)                                  \
    static void STATS(const FLOAT *x, Py_ssize_t n, stats_t *st) {                             \
        double lo = INFINITY, hi = -INFINITY, sum = 0.0, sq = 0.0;                             \
        int64_t finite = 0;                                                                    \
        for (Py_ssize_t start = 0; start < n; start += BLOCK) {                                \
            Py_ssize_t end = start + BLOCK < n ? start + BLOCK : n;                            \
            double bs = 0.0, bq = 0.0;                                                         \
            for (Py_ssize_t i = start; i < end; i++) {                                         \
                UINT bits;                                                                     \
                memcpy(&bits, &x[i], sizeof bits);                                             \
                if (((bits >> (EXP_SHIFT)) & (EXP_MASK)) != (EXP_MASK)) {                      \
                    double d = (double)x[i];                                                   \
                    bs += d;                                                                   \
                    bq += d * d;                                                               \
                    lo = d < lo ? d : lo;                                                      \
                    hi = d > hi ? d : hi;                                                      \
                    finite++;                                                                  \
                }                                                                              \
            }                                                                                  \
            sum += bs;                                                                         \
            sq += bq;                                                                          \
        }                                                                                      \
        st->finite = finite; st->lo = lo; st->hi = hi; st->sum = sum; st->sq = sq;             \
    }

DEFINE_STATS(stats_f32, float, uint32_t, 23, 0xFFu)
DEFINE_STATS(stats_f64, double, uint64_t, 52, 0x7FFu)

/* count_f32 and count_f64: the same loops for each float width. A value's cell is the top 16
 * bits of its bit pattern. Both return 0, or -1 when a cell's index falls outside counts. */
#define DEFINE_COUNT(NAME, FLOAT, UINT, CELL, CELL_SHIFT, STATS)                               \
    static int NAME(const FLOAT *x, Py_ssize_t n, const CELL *cells, int64_t *counts,          \
                    Py_ssize_t ncounts, stats_t *st) {                                         \
        FLOAT lo = (FLOAT)INFINITY, hi = (FLOAT)-INFINITY;                                     \
        double sum = 0.0, sq = 0.0;                                                            \
        uint64_t limit = (uint64_t)ncounts - 1; /* base + 1 must stay below ncounts */         \
        int bad = 0;                                                                           \
        for (Py_ssize_t start = 0; start < n; start += BLOCK) {                                \
            Py_ssize_t end = start + BLOCK < n ? start + BLOCK : n;                            \
            double s0 = 0.0, q0 = 0.0, s1 = 0.0, q1 = 0.0;                                     \
            Py_ssize_t i = start;                                                              \
            for (; i + 2 <= end; i += 2) { /* two values at once: independent chains */        \
                FLOAT v = x[i], w = x[i + 1];                                                  \
                UINT bv, bw;                                                                   \
                memcpy(&bv, &v, sizeof bv);                                                    \
                memcpy(&bw, &w, sizeof bw);                                                    \
                const CELL cv = cells[bv >> (CELL_SHIFT)], cw = cells[bw >> (CELL_SHIFT)];     \
                bad |= ((uint64_t)cv.base >= limit) | ((uint64_t)cw.base >= limit);            \
                if (bad) break;                                                                \
                counts[cv.base + (v >= cv.inner)]++;                                           \
                counts[cw.base + (w >= cw.inner)]++;                                           \
                lo = v < lo ? v : lo;                                                          \
                hi = v > hi ? v : hi;                                                          \
                lo = w < lo ? w : lo;                                                          \
                hi = w > hi ? w : hi;                                                          \
                double dv = (double)v, dw = (double)w;                                         \
                s0 += dv; q0 += dv * dv;                                                       \
                s1 += dw; q1 += dw * dw;                                                       \
            }                                                                                  \
            for (; i < end && !bad; i++) {                                                     \
                FLOAT v = x[i];                                                                \
                UINT bv;                                                                       \
                memcpy(&bv, &v, sizeof bv);                                                    \
                const CELL cv = cells[bv >> (CELL_SHIFT)];                                     \
                bad |= (uint64_t)cv.base >= limit;                                             \
                if (bad) break;                                                                \
                counts[cv.base + (v >= cv.inner)]++;                                           \
                lo = v < lo ? v : lo;                                                          \
                hi = v > hi ? v : hi;                                                          \
                double dv = (double)v;                                                         \
                s0 += dv; q0 += dv * dv;                                                       \
            }                                                                                  \
            if (bad) return -1;                                                                \
            sum += s0 + s1;                                                                    \
            sq += q0 + q1;                                                                     \
        }                                                                                      \
        st->finite = n; st->lo = lo; st->hi = hi; st->sum = sum; st->sq = sq;                  \
        if (isfinite(sum) && isfinite(sq) && isfinite(st->lo) && isfinite(st->hi))             \
            return 0;                                                                          \
        STATS(x, n, st); /* a NaN or an infinity among the values (or sums past double's range) */ \
        return 0;                                                                              \
    }

DEFINE_COUNT(count_f32, float, uint32_t, cell32_t, 16, stats_f32)
DEFINE_COUNT(count_f64, double, uint64_t, cell64_t, 48, stats_f64)

/* uniform_f32 / uniform_f64: counts over n uniform buckets with the given edges (n + 1 of
 * them, as doubles): a value's bucket is computed from its offset, then moved until
 * edges[i] <= x < edges[i + 1] (the last bucket closed), numpy.histogram's rule for uniform
 * bins; values outside [edges[0], edges[n]] and non-finite ones are left out. */
#define DEFINE_UNIFORM(UNIFORM, FLOAT)                                                         \
    static void UNIFORM(const FLOAT *x, Py_ssize_t n, const double *edges, Py_ssize_t nb,      \
                        int64_t *counts) {                                                     \
        double first = edges[0], last = edges[nb], norm = (double)nb / (last - first);         \
        for (Py_ssize_t k = 0; k < n; k++) {                                                   \
            double v = (double)x[k];                                                           \
            if (!(v >= first && v <= last)) continue; /* outside, or NaN */                    \
            double f = (v - first) * norm;                                                     \
            Py_ssize_t i = f < (double)nb ? (Py_ssize_t)f : nb - 1;                            \
            if (i < 0) i = 0;                                                                  \
            while (i > 0 && v < edges[i]) i--;                                                 \
            while (i < nb - 1 && v >= edges[i + 1]) i++;                                       \
            counts[i]++;                                                                       \
        }                                                                                      \
    }

DEFINE_UNIFORM(uniform_f32, float)
DEFINE_UNIFORM(uniform_f64, double)

/* ---- running a loop at a low priority (see the top of this file) ---- */
typedef struct {
    void (*fn)(void *);
    void *arg;
    int nice;
} job_t;

#ifdef __linux__
static void *job_main(void *p) {
    job_t *job = (job_t *)p;
    /* on Linux a nice value is a thread's own: PRIO_PROCESS with a thread id */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), job->nice);
    job->fn(job->arg);
    return NULL;
}
#endif

/* fn(arg), at nice on a thread of its own where it can; call without the GIL */
static void run_job(void (*fn)(void *), void *arg, int nice) {
#ifdef __linux__
    if (nice > 0) {
        job_t job = {fn, arg, nice};
        pthread_t t;
        if (pthread_create(&t, NULL, job_main, &job) == 0) {
            pthread_join(t, NULL);
            return;
        }
    }
#else
    (void)nice;
#endif
    fn(arg);
}

typedef struct {
    const void *x;
    Py_ssize_t n;
    const void *cells;
    int64_t *counts;
    Py_ssize_t ncounts;
    int f32, rc;
    stats_t st;
} count_job_t;

static void count_job(void *p) {
    count_job_t *j = (count_job_t *)p;
    if (j->f32)
        j->rc = count_f32((const float *)j->x, j->n, (const cell32_t *)j->cells, j->counts, j->ncounts, &j->st);
    else
        j->rc = count_f64((const double *)j->x, j->n, (const cell64_t *)j->cells, j->counts, j->ncounts, &j->st);
}

typedef struct {
    const void *x;
    Py_ssize_t n;
    int f32;
    stats_t st;
} stats_job_t;

static void stats_job(void *p) {
    stats_job_t *j = (stats_job_t *)p;
    if (j->f32)
        stats_f32((const float *)j->x, j->n, &j->st);
    else
        stats_f64((const double *)j->x, j->n, &j->st);
}

typedef struct {
    const void *x;
    Py_ssize_t n, nb;
    const double *edges;
    int64_t *counts;
    int f32;
} uniform_job_t;

static void uniform_job(void *p) {
    uniform_job_t *j = (uniform_job_t *)p;
    if (j->f32)
        uniform_f32((const float *)j->x, j->n, j->edges, j->nb, j->counts);
    else
        uniform_f64((const double *)j->x, j->n, j->edges, j->nb, j->counts);
}

static void probe_job(void *p) {
#ifdef __linux__
    *(int *)p = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
#else
    *(int *)p = 0;
#endif
}

/* probe_nice(nice) -> the nice value a kernel given nice runs at (for tests) */
static PyObject *probe_nice(PyObject *self, PyObject *args) {
    int nice = 0, seen = 0;
    if (!PyArg_ParseTuple(args, "i:probe_nice", &nice)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    run_job(probe_job, &seen, nice);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(seen);
}

/* a buffer's one-character struct format code (its native-order prefix dropped), or 0 */
static char single_code(const Py_buffer *b) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;  /* native little-endian is all we build for */
    return f[0] != '\0' && f[1] == '\0' ? f[0] : 0;
}

static int is_format(const Py_buffer *b, char code) { return single_code(b) == code; }

static PyObject *count(PyObject *self, PyObject *args) {
    PyObject *ox, *ocells, *ocounts;
    int nice = 0;
    if (!PyArg_ParseTuple(args, "OOO|i:count", &ox, &ocells, &ocounts, &nice)) return NULL;
    Py_buffer x = {0}, cells = {0}, counts = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(ox, &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(ocells, &cells, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(ocounts, &counts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    int f32 = x.itemsize == 4 && is_format(&x, 'f');
    int f64 = x.itemsize == 8 && is_format(&x, 'd');
    if (!f32 && !f64) {
        PyErr_SetString(PyExc_TypeError, "x must be float32 or float64");
        goto done;
    }
    if (cells.len != (Py_ssize_t)(f32 ? sizeof(cell32_t) : sizeof(cell64_t)) * NCELLS ||
        counts.itemsize != 8 || (!is_format(&counts, 'q') && !is_format(&counts, 'l'))) {
        PyErr_SetString(PyExc_ValueError, "cells or counts has the wrong size or type");
        goto done;
    }
    count_job_t j = {x.buf, x.len / x.itemsize, cells.buf, (int64_t *)counts.buf, counts.len / 8, f32, 0};
    Py_BEGIN_ALLOW_THREADS
    run_job(count_job, &j, nice);
    Py_END_ALLOW_THREADS
    stats_t st = j.st;
    if (j.rc < 0) {
        PyErr_SetString(PyExc_ValueError, "cells has an index outside counts");
        goto done;
    }
    result = Py_BuildValue("Ldddd", (long long)st.finite, st.lo, st.hi, st.sum, st.sq);
done:
    if (x.obj) PyBuffer_Release(&x);
    if (cells.obj) PyBuffer_Release(&cells);
    if (counts.obj) PyBuffer_Release(&counts);
    return result;
}

/* x as float32 (1) or float64 (2), or 0 with a TypeError set */
static int float_kind(const Py_buffer *x);

static PyObject *stats(PyObject *self, PyObject *args) {
    PyObject *ox;
    int nice = 0;
    if (!PyArg_ParseTuple(args, "O|i:stats", &ox, &nice)) return NULL;
    Py_buffer x = {0};
    if (PyObject_GetBuffer(ox, &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    int kind = float_kind(&x);
    if (!kind) {
        PyBuffer_Release(&x);
        return NULL;
    }
    stats_job_t j = {x.buf, x.len / x.itemsize, kind == 1};
    Py_BEGIN_ALLOW_THREADS
    run_job(stats_job, &j, nice);
    Py_END_ALLOW_THREADS
    stats_t st = j.st;
    PyBuffer_Release(&x);
    return Py_BuildValue("Ldddd", (long long)st.finite, st.lo, st.hi, st.sum, st.sq);
}

static PyObject *uniform(PyObject *self, PyObject *args) {
    PyObject *ox, *oedges, *ocounts;
    int nice = 0;
    if (!PyArg_ParseTuple(args, "OOO|i:uniform", &ox, &oedges, &ocounts, &nice)) return NULL;
    Py_buffer x = {0}, edges = {0}, counts = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(ox, &x, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(oedges, &edges, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(ocounts, &counts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        goto done;
    int kind = float_kind(&x);
    if (!kind) goto done;
    Py_ssize_t nb = edges.len / 8 - 1;
    if (edges.itemsize != 8 || !is_format(&edges, 'd') || nb < 1 || counts.itemsize != 8 ||
        (!is_format(&counts, 'q') && !is_format(&counts, 'l')) || counts.len / 8 < nb) {
        PyErr_SetString(PyExc_ValueError, "edges (float64, at least 2) or counts (int64, one per bucket) is wrong");
        goto done;
    }
    const double *e = (const double *)edges.buf;
    for (Py_ssize_t i = 0; i < nb; i++) {
        if (!(e[i] < e[i + 1])) {
            PyErr_SetString(PyExc_ValueError, "edges must be finite and increasing");
            goto done;
        }
    }
    uniform_job_t j = {x.buf, x.len / x.itemsize, nb, e, (int64_t *)counts.buf, kind == 1};
    Py_BEGIN_ALLOW_THREADS
    run_job(uniform_job, &j, nice);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (x.obj) PyBuffer_Release(&x);
    if (edges.obj) PyBuffer_Release(&edges);
    if (counts.obj) PyBuffer_Release(&counts);
    return result;
}

static int float_kind(const Py_buffer *x) {
    if (x->itemsize == 4 && is_format(x, 'f')) return 1;
    if (x->itemsize == 8 && is_format(x, 'd')) return 2;
    PyErr_SetString(PyExc_TypeError, "x must be float32 or float64");
    return 0;
}

/* ---- pr_counts: the PR curve's weighted buckets (pr_curve.py) ---- */
/* a label as a double, from a buffer of format code f (one of "?bBhHiIlLqQfd") */
static double label_at(const char *buf, char f, Py_ssize_t i) {
    switch (f) {
    case '?': return ((const unsigned char *)buf)[i] ? 1.0 : 0.0;
    case 'b': return (double)((const signed char *)buf)[i];
    case 'B': return (double)((const unsigned char *)buf)[i];
    case 'h': return (double)((const short *)buf)[i];
    case 'H': return (double)((const unsigned short *)buf)[i];
    case 'i': return (double)((const int *)buf)[i];
    case 'I': return (double)((const unsigned int *)buf)[i];
    case 'l': return (double)((const long *)buf)[i];
    case 'L': return (double)((const unsigned long *)buf)[i];
    case 'q': return (double)((const long long *)buf)[i];
    case 'Q': return (double)((const unsigned long long *)buf)[i];
    case 'f': return (double)((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* a label buffer's format code, if label_at reads it, else 0 */
static char format_code(const Py_buffer *b) {
    char c = single_code(b);
    return c && strchr("?bBhHiIlLqQfd", c) ? c : 0;
}

/* tp[k] += label * w, fp[k] += (1 - label) * w for every value i, k = floor(p * (nb - 1)) in the
 * predictions' own type (kind 1: float32, 2: float64); k is kept inside [0, nb) (it is there for
 * predictions in [0, 1], which the callers have checked). No Python calls. */
static void pr_buckets(const void *pb, int kind, const void *lb, char lf, const double *wv, double wscalar,
                       Py_ssize_t n, double *t, double *f, Py_ssize_t nb) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k;
        if (kind == 1) {
            float v = ((const float *)pb)[i] * (float)(nb - 1);
            k = (Py_ssize_t)floorf(v);
        } else {
            double v = ((const double *)pb)[i] * (double)(nb - 1);
            k = (Py_ssize_t)floor(v);
        }
        if (k < 0 || k >= nb) k = k < 0 ? 0 : nb - 1;
        double y = label_at((const char *)lb, lf, i), wi = wv ? wv[i] : wscalar;
        t[k] += y * wi;
        f[k] += (1.0 - y) * wi;
    }
}

/* The values of a PR curve as pr_counts and pr_curve_piece take them (see pr_counts). */
typedef struct {
    Py_buffer p, l, w; /* w.obj is NULL for a scalar weight */
    int kind;          /* the predictions': 1 float32, 2 float64 */
    char lf;           /* the labels' format code */
    double wscalar;
    Py_ssize_t n;
} pr_in;

static void pr_in_release(pr_in *in) {
    if (in->p.obj) PyBuffer_Release(&in->p);
    if (in->l.obj) PyBuffer_Release(&in->l);
    if (in->w.obj) PyBuffer_Release(&in->w);
}

/* in (zeroed by the caller) from the three arguments, checked; -1 (with an error naming `who`
 * and released buffers) when they are not as pr_counts describes. */
static int pr_in_get(PyObject *op, PyObject *ol, PyObject *ow, pr_in *in, const char *who) {
    in->wscalar = 1.0;
    if (PyObject_GetBuffer(op, &in->p, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;
    if (PyObject_GetBuffer(ol, &in->l, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;
    if (PyFloat_Check(ow))
        in->wscalar = PyFloat_AsDouble(ow);
    else if (PyObject_GetBuffer(ow, &in->w, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto fail;
    in->kind = float_kind(&in->p);
    if (!in->kind) goto fail;
    in->lf = format_code(&in->l);
    in->n = in->p.len / in->p.itemsize;
    if (!in->lf || in->l.len / in->l.itemsize != in->n ||
        (in->w.obj && (!is_format(&in->w, 'd') || in->w.len / 8 != in->n))) {
        PyErr_Format(PyExc_ValueError, "%s: labels or weights has the wrong type or size", who);
        goto fail;
    }
    return 0;
fail:
    pr_in_release(in);
    return -1;
}

/* pr_counts(predictions, labels, weights, tp, fp) -> (0, -1) when every value is valid, else
 * (1, i) for the first prediction i outside [0, 1] (or NaN) or (2, i) for the first label i
 * that is not 0 or 1 (a bool label is always valid); then nothing is counted.
 *
 *   predictions  float32 or float64; bucket k = floor(p * (n - 1)) in the predictions' own type,
 *                as numpy computes predictions * (num_thresholds - 1) and floors it
 *   labels       any bool, int or float buffer, taken as float64
 *   weights      a float (every value's weight) or a float64 buffer (one weight a value)
 *   tp, fp       writable float64 buffers of n = num_thresholds buckets, zeros: tp[k] += label * w,
 *                fp[k] += (1 - label) * w, value after value in order, as np.bincount adds them
 * In one pass without the GIL: numpy's dozen calls each released and took back the GIL. */
static PyObject *pr_counts(PyObject *self, PyObject *args) {
    PyObject *op, *ol, *ow, *otp, *ofp;
    if (!PyArg_ParseTuple(args, "OOOOO:pr_counts", &op, &ol, &ow, &otp, &ofp)) return NULL;
    pr_in in = {0};
    Py_buffer tp = {0}, fp = {0};
    PyObject *result = NULL;
    if (pr_in_get(op, ol, ow, &in, "pr_counts") < 0) return NULL;
    if (PyObject_GetBuffer(otp, &tp, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    if (PyObject_GetBuffer(ofp, &fp, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    Py_ssize_t n = in.n, nb = tp.len / 8;
    if (!is_format(&tp, 'd') || !is_format(&fp, 'd') || fp.len != tp.len || nb < 1) {
        PyErr_SetString(PyExc_ValueError, "pr_counts: tp or fp has the wrong type or size");
        goto done;
    }
    int bad = 0, kind = in.kind;
    Py_ssize_t at = -1;
    double *t = (double *)tp.buf, *f = (double *)fp.buf;
    const double *wv = in.w.obj ? (const double *)in.w.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        double v = kind == 1 ? (double)((const float *)in.p.buf)[i] : ((const double *)in.p.buf)[i];
        if (!(v >= 0.0 && v <= 1.0)) { bad = 1; at = i; }
    }
    if (!bad && in.lf != '?') {
        for (Py_ssize_t i = 0; i < n; i++) {
            double y = label_at((const char *)in.l.buf, in.lf, i);
            if (!(y == 0.0 || y == 1.0)) { bad = 2; at = i; break; }
        }
    }
    if (!bad) pr_buckets(in.p.buf, kind, in.l.buf, in.lf, wv, in.wscalar, n, t, f, nb);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("in", bad, at);
done:
    pr_in_release(&in);
    if (tp.obj) PyBuffer_Release(&tp);
    if (fp.obj) PyBuffer_Release(&fp);
    return result;
}

/* ---- pr_curve_piece: the whole [6, n] float32 tensor content as a fill piece (../_format/_fill.h) ---- */
typedef struct {
    gtb_fill base;
    pr_in in;
    Py_ssize_t nb;
    double *scratch; /* 4 nb doubles, taken with the piece: the fill itself cannot fail */
} pr_fill;

static void put_f32(uint8_t *out, Py_ssize_t at, double d) {
    float v = (float)d;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; b++) out[4 * at + b] = (uint8_t)(bits >> (8 * b));
}

/* pr_curve._curves in C, the same float64 operations in the same order, each cast to float32 */
static void pr_run(const gtb_fill *self, uint8_t *out) {
    const pr_fill *f = (const pr_fill *)self;
    const pr_in *in = &f->in;
    Py_ssize_t nb = f->nb;
    double *tb = f->scratch, *fb = tb + nb, *tp = tb + 2 * nb, *fp = tb + 3 * nb;
    memset(tb, 0, sizeof(double) * (size_t)(2 * nb));
    pr_buckets(in->p.buf, in->kind, in->l.buf, in->lf, in->w.obj ? (const double *)in->w.buf : NULL,
               in->wscalar, in->n, tb, fb, nb);
    tp[nb - 1] = tb[nb - 1];  /* np.cumsum of the reversed buckets: the first sum is the value itself */
    fp[nb - 1] = fb[nb - 1];
    for (Py_ssize_t j = nb - 2; j >= 0; j--) {
        tp[j] = tp[j + 1] + tb[j];
        fp[j] = fp[j + 1] + fb[j];
    }
    for (Py_ssize_t j = 0; j < nb; j++) {
        double tn = fp[0] - fp[j], fn = tp[0] - tp[j];
        double dp = tp[j] + fp[j], dr = tp[j] + fn;
        dp = dp != dp ? dp : (dp > 1e-7 ? dp : 1e-7); /* np.maximum(1e-7, x): NaN stays NaN */
        dr = dr != dr ? dr : (dr > 1e-7 ? dr : 1e-7);
        put_f32(out, j, tp[j]);
        put_f32(out, nb + j, fp[j]);
        put_f32(out, 2 * nb + j, tn);
        put_f32(out, 3 * nb + j, fn);
        put_f32(out, 4 * nb + j, tp[j] / dp);
        put_f32(out, 5 * nb + j, tp[j] / dr);
    }
}

static void pr_free(PyObject *capsule) {
    pr_fill *f = PyCapsule_GetPointer(capsule, GTB_FILL_CAPSULE);
    if (f == NULL) return;
    pr_in_release(&f->in);
    PyMem_Free(f->scratch);
    PyMem_Free(f);
}

/* pr_curve_piece(predictions, labels, weights, num_thresholds) -> capsule: as pr_counts's
 * arguments, for values checked already (pr_curve.capture_pr_curve checks numpy arrays). */
static PyObject *pr_curve_piece(PyObject *self, PyObject *args) {
    PyObject *op, *ol, *ow;
    Py_ssize_t nb;
    if (!PyArg_ParseTuple(args, "OOOn:pr_curve_piece", &op, &ol, &ow, &nb)) return NULL;
    if (nb < 2 || nb > PY_SSIZE_T_MAX / 32) {
        PyErr_Format(PyExc_ValueError, "pr_curve_piece: num_thresholds must be at least 2, got %zd", nb);
        return NULL;
    }
    pr_fill *f = PyMem_Calloc(1, sizeof(pr_fill));
    if (f == NULL) return PyErr_NoMemory();
    if (pr_in_get(op, ol, ow, &f->in, "pr_curve_piece") < 0) {
        PyMem_Free(f);
        return NULL;
    }
    f->scratch = PyMem_Malloc(sizeof(double) * (size_t)(4 * nb));
    PyObject *capsule = NULL;
    if (f->scratch == NULL) {
        PyErr_NoMemory();
    } else {
        f->nb = nb;
        f->base.len = 24 * nb;
        f->base.fill = pr_run;
        capsule = PyCapsule_New(f, GTB_FILL_CAPSULE, pr_free);
    }
    if (capsule == NULL) {
        pr_in_release(&f->in);
        PyMem_Free(f->scratch);
        PyMem_Free(f);
    }
    return capsule;
}

static PyMethodDef methods[] = {
    {"stats", stats, METH_VARARGS,
     "stats(x, nice=0) -> (n_finite, min, max, sum, sum_sq) of the finite values"},
    {"uniform", uniform, METH_VARARGS,
     "uniform(x, edges, counts, nice=0): counts[i] += values in bucket i of float64 edges (uniform)"},
    {"pr_counts", pr_counts, METH_VARARGS,
     "pr_counts(predictions, labels, weights, tp, fp) -> (0, -1), or (1 or 2, first bad index)"},
    {"pr_curve_piece", pr_curve_piece, METH_VARARGS,
     "pr_curve_piece(predictions, labels, weights, num_thresholds) -> capsule: the curve's float32 tensor "
     "content, made while its record is framed (a chain.Chain fill piece); for checked values"},
    {"probe_nice", probe_nice, METH_VARARGS, "probe_nice(nice) -> the nice value a kernel given nice runs at"},
    {"count", count, METH_VARARGS,
     "count(x, cells, counts, nice=0) -> (n_finite, min, max, sum, sum_sq)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fasthist",
                                    "C kernel of gluon_tb's histograms.", -1, methods};

PyMODINIT_FUNC PyInit__fasthist(void) { return PyModule_Create(&module); }
