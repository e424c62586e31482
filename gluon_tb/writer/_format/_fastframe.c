/* Optional C kernel of gluon_tb/writer/_format/record.py: TFRecord framing and CRC-32C.
 *
 * frame_many(records) -> bytes
 *     records: a list of bytes or chain.Chain tuples (a record as pieces: bytes-like objects and
 *     fill capsules, _fill.h, framed as their concatenation without joining them first). Each
 *     becomes: its length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the
 *     bytes, their masked CRC-32C; all joined into one buffer, the
 *     same bytes as record.frame_many_py's Python loop (tests compare them). The CRCs and copies
 *     run without the GIL, so the training thread goes on meanwhile.
 * frame_append(fd, records, start) -> int
 *     The same records framed and appended to the file behind fd, after checking it was not
 *     deleted, all in one release of the GIL (EventFile.write_records; see the function).
 * join(record) -> bytes
 *     A record's bytes: a Chain's pieces joined, its fills run (chain.Chain.__bytes__).
 * crc32c(data) -> int
 *     CRC-32C (Castagnoli) of a bytes-like object: the C fallback when neither the crc32c nor
 *     the google-crc32c package is installed.
 * trimmed_histogram(min, max, num, sum, sum_squares, right_edges, counts) -> bytes
 *     A HistogramProto of the non-zero span of the buckets (proto.py's trimmed_histogram).
 *
 * CRC-32C here is the portable table method, eight bytes a step ("slicing by 8"): plenty for
 * records of tens of bytes (figures in benchmarks/RESULTS-notes.md). Little-endian hosts only
 * (setup.py builds it everywhere; record.py uses it only where sys.byteorder is "little").
 * Only Python.h and POSIX headers are needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_fill.h"
#ifndef _WIN32
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

static uint32_t table[8][256];

static void make_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int s = 1; s < 8; s++)
            table[s][n] = (table[s - 1][n] >> 8) ^ table[0][table[s - 1][n] & 0xFF];
}

static uint32_t crc32c(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
            table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
            table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }

static void put_u32(uint8_t *out, uint32_t v) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(v >> (8 * i));
}

#define FRAME_GIL_BYTES (64 * 1024)

/* A record's bytes are one bytes object, or a chain.Chain (a tuple) of pieces: bytes-like objects
 * and fill capsules (_fill.h), framed as their concatenation. */
typedef struct {
    const uint8_t *data; /* the piece's bytes (a buffer's or a bytes object's) */
    const gtb_fill *fill; /* or, when not NULL, what makes them */
    Py_ssize_t len;
} seg_t;

typedef struct {
    PyObject *items;   /* a tuple copy of the list: keeps every record (and piece) alive */
    seg_t *segs;
    Py_ssize_t *ends;  /* ends[i]: one past record i's last segment */
    Py_ssize_t *lens;  /* lens[i]: record i's length */
    Py_buffer *bufs;   /* buffers taken from pieces that are not bytes, released by release() */
    Py_ssize_t n, nsegs, nbufs, total; /* total: framed, 16 bytes more a record */
} batch_t;

static void release(batch_t *b) {
    for (Py_ssize_t i = 0; i < b->nbufs; i++) PyBuffer_Release(&b->bufs[i]);
    PyMem_Free(b->segs);
    PyMem_Free(b->ends);
    PyMem_Free(b->lens);
    PyMem_Free(b->bufs);
    Py_CLEAR(b->items);
}

/* One piece of a Chain into seg (GIL held). */
static int piece(batch_t *b, PyObject *p, seg_t *seg, Py_ssize_t rec, Py_ssize_t at) {
    seg->fill = NULL;
    if (PyBytes_Check(p)) {
        seg->data = (const uint8_t *)PyBytes_AS_STRING(p);
        seg->len = PyBytes_GET_SIZE(p);
        return 0;
    }
    if (PyCapsule_CheckExact(p)) {
        const gtb_fill *f = PyCapsule_GetPointer(p, GTB_FILL_CAPSULE);
        if (f == NULL) return -1;
        seg->data = NULL;
        seg->fill = f;
        seg->len = f->len;
        return 0;
    }
    Py_buffer *v = &b->bufs[b->nbufs];
    if (PyObject_GetBuffer(p, v, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "records must be a list of bytes or Chains of bytes-like pieces, "
                     "got %.80s in record %zd at piece %zd", Py_TYPE(p)->tp_name, rec, at);
        return -1;
    }
    b->nbufs++;
    seg->data = (const uint8_t *)v->buf;
    seg->len = v->len;
    return 0;
}

/* The records of a list, checked (GIL held); on error release() has been called. */
static int collect(PyObject *arg, batch_t *b) {
    memset(b, 0, sizeof(*b));
    if (!PyList_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "records must be a list of bytes, got %.80s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    /* the list is copied: its items stay referenced (and unchanged) while the GIL is free */
    b->items = PySequence_Tuple(arg);
    if (b->items == NULL) return -1;
    b->n = PyTuple_GET_SIZE(b->items);
    Py_ssize_t nsegs = 0, nchains = 0;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *r = PyTuple_GET_ITEM(b->items, i);
        if (PyBytes_Check(r)) {
            nsegs++;
        } else if (PyTuple_Check(r)) {
            nsegs += PyTuple_GET_SIZE(r);
            nchains += PyTuple_GET_SIZE(r);
        } else {
            PyErr_Format(PyExc_TypeError, "records must be a list of bytes or Chains, got %.80s at index %zd",
                         Py_TYPE(r)->tp_name, i);
            release(b);
            return -1;
        }
    }
    b->segs = PyMem_Malloc(sizeof(seg_t) * (nsegs ? nsegs : 1));
    b->ends = PyMem_Malloc(sizeof(Py_ssize_t) * (b->n ? b->n : 1));
    b->lens = PyMem_Malloc(sizeof(Py_ssize_t) * (b->n ? b->n : 1));
    b->bufs = nchains ? PyMem_Malloc(sizeof(Py_buffer) * nchains) : NULL;
    if (b->segs == NULL || b->ends == NULL || b->lens == NULL || (nchains && b->bufs == NULL)) {
        release(b);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *r = PyTuple_GET_ITEM(b->items, i);
        Py_ssize_t len = 0;
        if (PyBytes_Check(r)) {
            seg_t *s = &b->segs[b->nsegs++];
            s->data = (const uint8_t *)PyBytes_AS_STRING(r);
            s->fill = NULL;
            s->len = len = PyBytes_GET_SIZE(r);
        } else {
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(r); k++) {
                seg_t *s = &b->segs[b->nsegs];
                if (piece(b, PyTuple_GET_ITEM(r, k), s, i, k) < 0) {
                    release(b);
                    return -1;
                }
                b->nsegs++;
                len += s->len;
            }
        }
        b->ends[i] = b->nsegs;
        b->lens[i] = len;
        b->total += 16 + len;
    }
    return 0;
}

/* Record i's bytes into o (its length), fills run. No Python calls. */
static void join_into(uint8_t *o, const batch_t *b, Py_ssize_t i) {
    for (Py_ssize_t k = i ? b->ends[i - 1] : 0; k < b->ends[i]; k++) {
        const seg_t *s = &b->segs[k];
        if (s->fill != NULL)
            s->fill->fill(s->fill, o);
        else if (s->len)  /* an empty buffer's pointer may be NULL */
            memcpy(o, s->data, (size_t)s->len);
        o += s->len;
    }
}

/* Frame the records into o (b->total bytes). No Python calls. */
static void frame_into(uint8_t *o, const batch_t *b) {
    for (Py_ssize_t i = 0; i < b->n; i++) {
        uint64_t len = (uint64_t)b->lens[i];
        for (int k = 0; k < 8; k++) o[k] = (uint8_t)(len >> (8 * k));
        put_u32(o + 8, masked(crc32c(o, 8)));
        join_into(o + 12, b, i);
        put_u32(o + 12 + len, masked(crc32c(o + 12, (size_t)len)));
        o += 16 + len;
    }
}

/* join(record) -> bytes: a record's bytes (a Chain's pieces joined, its fills run). */
static PyObject *join(PyObject *self, PyObject *arg) {
    PyObject *list = PyList_New(1);
    if (list == NULL) return NULL;
    Py_INCREF(arg);
    PyList_SET_ITEM(list, 0, arg);
    batch_t b;
    int err = collect(list, &b);
    Py_DECREF(list);
    if (err < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, b.lens[0]);
    if (out != NULL) {
        PyThreadState *ts = b.lens[0] > FRAME_GIL_BYTES ? PyEval_SaveThread() : NULL;
        join_into((uint8_t *)PyBytes_AS_STRING(out), &b, 0);
        if (ts != NULL) PyEval_RestoreThread(ts);
    }
    release(&b);
    return out;
}

static PyObject *frame_many(PyObject *self, PyObject *arg) {
    batch_t b;
    if (collect(arg, &b) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, b.total);
    if (out != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        /* the GIL is released for large batches only: taking it back while another thread runs
           Python costs that thread a forced hand-over (~130-280 us on a VM), more than framing
           and checksumming FRAME_GIL_BYTES takes */
        PyThreadState *ts = b.total > FRAME_GIL_BYTES ? PyEval_SaveThread() : NULL;
        frame_into(o, &b);
        if (ts != NULL) PyEval_RestoreThread(ts);
    }
    release(&b);
    return out;
}

#ifndef _WIN32
/* frame_append(fd, records, start) -> int: what EventFile.write(frame_many(records)) does with
 * os.write, in one release of the GIL: if the file behind fd was deleted (no link left), -1 and
 * nothing written; else the records framed and appended (partial writes continued) and the
 * number of bytes written. A failed write cuts the file back to `start` (its size before) and
 * raises OSError. One release instead of three (framing, fstat, write): each take of the GIL
 * back is a forced hand-over for a thread running Python. */
static PyObject *frame_append(PyObject *self, PyObject *args) {
    int fd;
    PyObject *arg;
    long long start;
    if (!PyArg_ParseTuple(args, "iOL:frame_append", &fd, &arg, &start)) return NULL;
    batch_t b;
    if (collect(arg, &b) < 0) return NULL;
    Py_ssize_t total = b.total;
    uint8_t *buf = PyMem_RawMalloc(total ? (size_t)total : 1);
    if (buf == NULL) {
        release(&b);
        return PyErr_NoMemory();
    }
    int err = 0;
    Py_ssize_t written = 0;
    Py_BEGIN_ALLOW_THREADS
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = errno;
    } else if (st.st_nlink == 0) {
        written = -1;
    } else {
        frame_into(buf, &b);
        while (written < total) {
            ssize_t w = write(fd, buf + written, (size_t)(total - written));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            written += w;
        }
        if (err) {  /* as EventFile._write_all: best effort */
            int r = ftruncate(fd, (off_t)start);
            (void)r;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(buf);
    release(&b);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(written);
}
#endif

static PyObject *crc32c_py(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    uint32_t c;
    if (b.len > 4096) {
        Py_BEGIN_ALLOW_THREADS
        c = crc32c((const uint8_t *)b.buf, (size_t)b.len);
        Py_END_ALLOW_THREADS
    } else {
        c = crc32c((const uint8_t *)b.buf, (size_t)b.len);
    }
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* trimmed_histogram(min, max, num, sum, sum_squares, right_edges, counts) -> bytes: a
 * HistogramProto of the buckets from the first non-zero count to the last (none if all are
 * zero): fields 1-5 doubles, 6 the right edges and 7 the counts as packed doubles; the same
 * bytes as proto.trimmed_histogram_py (tests compare them). right_edges: float64, counts: int64,
 * both C-contiguous and of one length. */
static uint8_t *put_double(uint8_t *o, uint8_t key, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    *o++ = key;
    for (int b = 0; b < 8; b++) *o++ = (uint8_t)(bits >> (8 * b));
    return o;
}

static uint8_t *put_varint(uint8_t *o, uint64_t n) {
    while (n >= 0x80) {
        *o++ = (uint8_t)((n & 0x7F) | 0x80);
        n >>= 7;
    }
    *o++ = (uint8_t)n;
    return o;
}

/* a buffer's struct format without its native-order prefix ("d", "q", ...) */
static const char *format_code(const Py_buffer *b) {
    const char *f = b->format ? b->format : "B";
    return (*f == '<' || *f == '=' || *f == '@') ? f + 1 : f;
}

static PyObject *trimmed_histogram(PyObject *self, PyObject *args) {
    double lo, hi, num, sum, sq;
    PyObject *oedges, *ocounts;
    if (!PyArg_ParseTuple(args, "dddddOO:trimmed_histogram", &lo, &hi, &num, &sum, &sq, &oedges, &ocounts))
        return NULL;
    Py_buffer e = {0}, c = {0};
    PyObject *out = NULL;
    if (PyObject_GetBuffer(oedges, &e, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(ocounts, &c, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    const char *ef = format_code(&e), *cf = format_code(&c);
    if (e.itemsize != 8 || strcmp(ef, "d") != 0 || c.itemsize != 8 || (strcmp(cf, "q") != 0 && strcmp(cf, "l") != 0) ||
        e.len != c.len) {
        PyErr_SetString(PyExc_TypeError, "right_edges must be float64 and counts int64, of one length");
        goto done;
    }
    const double *edges = (const double *)e.buf;
    const int64_t *counts = (const int64_t *)c.buf;
    Py_ssize_t n = c.len / 8, start = 0, end = n;
    while (start < n && counts[start] == 0) start++;
    while (end > start && counts[end - 1] == 0) end--;
    uint64_t packed = (uint64_t)(end - start) * 8;
    uint8_t lenbuf[10];
    Py_ssize_t lenlen = put_varint(lenbuf, packed) - lenbuf;
    out = PyBytes_FromStringAndSize(NULL, 5 * 9 + 2 * (1 + lenlen + (Py_ssize_t)packed));
    if (out == NULL) goto done;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    o = put_double(o, 0x09, lo);  /* field 1, 64-bit */
    o = put_double(o, 0x11, hi);
    o = put_double(o, 0x19, num);
    o = put_double(o, 0x21, sum);
    o = put_double(o, 0x29, sq);
    *o++ = 0x32;  /* field 6, length-delimited */
    memcpy(o, lenbuf, (size_t)lenlen);
    o += lenlen;
    memcpy(o, edges + start, (size_t)packed);  /* little-endian host: doubles as they are */
    o += packed;
    *o++ = 0x3a;  /* field 7 */
    memcpy(o, lenbuf, (size_t)lenlen);
    o += lenlen;
    for (Py_ssize_t i = start; i < end; i++) {
        double d = (double)counts[i];
        memcpy(o, &d, 8);
        o += 8;
    }
done:
    if (e.obj) PyBuffer_Release(&e);
    if (c.obj) PyBuffer_Release(&c);
    return out;
}

static PyMethodDef methods[] = {
    {"frame_many", frame_many, METH_O, "frame_many(records: list[bytes | Chain]) -> bytes: TFRecords joined"},
    {"join", join, METH_O, "join(record: bytes | Chain) -> bytes: a record's bytes, a Chain's pieces joined"},
#ifndef _WIN32
    {"frame_append", frame_append, METH_VARARGS,
     "frame_append(fd, records, start) -> int: records framed and appended; -1 if the file was deleted"},
#endif
    {"crc32c", crc32c_py, METH_O, "crc32c(data) -> int: CRC-32C (Castagnoli) of a bytes-like object"},
    {"trimmed_histogram", trimmed_histogram, METH_VARARGS,
     "trimmed_histogram(min, max, num, sum, sum_squares, right_edges, counts) -> bytes: a HistogramProto"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastframe",
                                    "C kernel of gluon_tb's TFRecord framing.", -1, methods};

PyMODINIT_FUNC PyInit__fastframe(void) {
    make_tables();
    return PyModule_Create(&module);
}
