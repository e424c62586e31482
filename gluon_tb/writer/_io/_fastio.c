/* Optional C kernel of gluon_tb/writer/_io/local_output.py: LocalOutput.write_files in one
 * release of the GIL (POSIX only).
 *
 * write_files(root, entries) -> bool
 *     root: bytes, the log directory (opened following symlinks, as realpath(root) resolves it).
 *     entries: a list of (dirs, name, tmp, data, shown): dirs a tuple of bytes, the file's
 *     directory under root component by component; name and tmp bytes, the file's name and a
 *     temporary name beside it; data a bytes-like object; shown a str naming the file in errors.
 *
 *     Each directory is opened one component at a time without following a symlink, and made
 *     where missing; each file is written under its temporary name, created exclusively and
 *     never through a symlink (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644 less the umask); when
 *     all are written they are renamed into place (a symlink at a final name is replaced, not
 *     followed). True when done.
 *
 *     False when this code does not decide: a component is a symlink or not a directory, a
 *     temporary name exists, a name is empty, ".", ".." or holds a NUL, or the root cannot be
 *     opened. Nothing is left behind, and local_output.py's Python code, which resolves
 *     symlinks and refuses what leads outside the log directory, does the work.
 *
 *     On an error (ENOSPC, say) every temporary file, every file already renamed into place
 *     and every directory made is removed, and OSError is raised naming the file.
 *
 * Why: the Python code makes 3-4 system calls per file and more per directory (realpath's
 * lstat of each component, makedirs' stats), and each drops the GIL and takes it back; while
 * the training thread runs Python, every take back is a forced hand-over that costs it
 * ~130-280 us on a VM. An embedding step (tensors, labels, sprite, config) made ~30.
 *
 * read_arrays(parts, buf, get_dtype, sync_copy) -> [dtype code or -1, ...]   (any platform)
 *     parts: a list of (handle, size, offset): an MXNet NDArrayHandle (an int), its count of
 *     elements, and where in buf its values go (8 * size bytes are set aside for each: no MXNet
 *     dtype is wider). get_dtype and sync_copy: the addresses of MXNet's MXNDArrayGetDType and
 *     MXNDArraySyncCopyToCPU (which waits for the array's pending writes, and refuses a size
 *     that is not the array's own). Returns each array's MXNet dtype code, or -1 where MXNet
 *     refused (its MXGetLastError, thread-local, says why; the caller reads the array its usual
 *     way instead). All of it in one release of the GIL: the writer thread reading a drain's
 *     batch losses one by one (context, wait, DLPack view, its deleter) took the GIL back four
 *     times a loss, and each take while the training thread runs Python is a forced hand-over.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#ifndef _WIN32
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

typedef struct {
    const char **dirs; /* the directory's components (into the entry's bytes) */
    Py_ssize_t ndirs;
    const char *name, *tmp;
    Py_buffer data;
    PyObject *shown;
    int dirfd;
    int state; /* 0: nothing on disk, 1: its temporary file exists, 2: renamed into place */
} entry_t;

typedef struct {
    int parent; /* an open directory (root or one in fds) */
    const char *name;
} made_t;

/* a name this code handles: not empty, not "." or "..", no NUL or slash */
static const char *plain_name(PyObject *b) {
    if (!PyBytes_Check(b)) return NULL;
    const char *s = PyBytes_AS_STRING(b);
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    if (n == 0 || (Py_ssize_t)strlen(s) != n || memchr(s, '/', (size_t)n) != NULL) return NULL;
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return NULL;
    return s;
}

static int same_dir(const entry_t *a, const entry_t *b) {
    if (a->ndirs != b->ndirs) return 0;
    for (Py_ssize_t k = 0; k < a->ndirs; k++)
        if (strcmp(a->dirs[k], b->dirs[k]) != 0) return 0;
    return 1;
}

static int write_all(int fd, const char *p, Py_ssize_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, (size_t)n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        n -= w;
    }
    return 0;
}

static PyObject *write_files(PyObject *self, PyObject *args) {
    PyObject *oroot, *lst;
    if (!PyArg_ParseTuple(args, "SO!:write_files", &oroot, &PyList_Type, &lst)) return NULL;
    /* a copy of the list: its items stay referenced while the GIL is free */
    PyObject *items = PySequence_Tuple(lst);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(items), ncomp = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(items, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(t, 0))) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_TypeError, "entries must be (dirs, name, tmp, data, shown) tuples");
            return NULL;
        }
        ncomp += PyTuple_GET_SIZE(PyTuple_GET_ITEM(t, 0));
    }
    entry_t *es = PyMem_Calloc(n ? (size_t)n : 1, sizeof(entry_t));
    const char **comps = PyMem_Malloc(sizeof(char *) * (ncomp ? (size_t)ncomp : 1));
    int *fds = PyMem_Malloc(sizeof(int) * (ncomp ? (size_t)ncomp : 1));
    made_t *made = PyMem_Malloc(sizeof(made_t) * (ncomp ? (size_t)ncomp : 1));
    PyObject *result = NULL;
    if (es == NULL || comps == NULL || fds == NULL || made == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int plain = 1;
    const char *root = PyBytes_AS_STRING(oroot);
    if ((Py_ssize_t)strlen(root) != PyBytes_GET_SIZE(oroot)) plain = 0;
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(items, i), *dirs = PyTuple_GET_ITEM(t, 0);
        entry_t *e = &es[i];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(t, 3), &e->data, PyBUF_C_CONTIGUOUS) < 0) goto done;
        e->dirs = comps + c;
        e->ndirs = PyTuple_GET_SIZE(dirs);
        for (Py_ssize_t k = 0; k < e->ndirs; k++) {
            const char *s = plain_name(PyTuple_GET_ITEM(dirs, k));
            if (s == NULL) plain = 0;
            comps[c++] = s;
        }
        e->name = plain_name(PyTuple_GET_ITEM(t, 1));
        e->tmp = plain_name(PyTuple_GET_ITEM(t, 2));
        e->shown = PyTuple_GET_ITEM(t, 4);
        if (e->name == NULL || e->tmp == NULL) plain = 0;
    }
    if (!plain) {
        Py_INCREF(Py_False);
        result = Py_False;
        goto done;
    }

    int err = 0, fallback = 0, nfds = 0, nmade = 0, rootfd = -1;
    Py_ssize_t bad = 0;
    Py_BEGIN_ALLOW_THREADS
    rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) fallback = 1;
    for (Py_ssize_t i = 0; i < n && !err && !fallback; i++) { /* the directories */
        entry_t *e = &es[i];
        e->dirfd = -1;
        for (Py_ssize_t j = 0; j < i && e->dirfd < 0; j++)
            if (same_dir(e, &es[j])) e->dirfd = es[j].dirfd;
        if (e->dirfd >= 0) continue;
        int cur = rootfd;
        for (Py_ssize_t k = 0; k < e->ndirs; k++) {
            const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
            int fd = openat(cur, e->dirs[k], flags);
            if (fd < 0 && errno == ENOENT) {
                if (mkdirat(cur, e->dirs[k], 0777) == 0) {
                    made[nmade].parent = cur;
                    made[nmade++].name = e->dirs[k];
                } else if (errno != EEXIST) {
                    err = errno, bad = i;
                    break;
                }
                fd = openat(cur, e->dirs[k], flags);
            }
            if (fd < 0) {
                if (errno == ELOOP || errno == ENOTDIR) fallback = 1;
                else err = errno, bad = i;
                break;
            }
            fds[nfds++] = cur = fd;
        }
        e->dirfd = cur;
    }
    for (Py_ssize_t i = 0; i < n && !err && !fallback; i++) { /* the temporary files */
        entry_t *e = &es[i];
        int fd = openat(e->dirfd, e->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST) fallback = 1;
            else err = errno, bad = i;
            break;
        }
        e->state = 1;
        err = write_all(fd, (const char *)e->data.buf, e->data.len);
        if (close(fd) != 0 && !err) err = errno;
        if (err) bad = i;
    }
    for (Py_ssize_t i = 0; i < n && !err && !fallback; i++) { /* into place */
        entry_t *e = &es[i];
        if (renameat(e->dirfd, e->tmp, e->dirfd, e->name) != 0) err = errno, bad = i;
        else e->state = 2;
    }
    if (err || fallback) { /* leave nothing behind */
        for (Py_ssize_t i = 0; i < n; i++)
            if (es[i].state) unlinkat(es[i].dirfd, es[i].state == 2 ? es[i].name : es[i].tmp, 0);
        for (int k = nmade - 1; k >= 0; k--) unlinkat(made[k].parent, made[k].name, AT_REMOVEDIR);
    }
    for (int k = 0; k < nfds; k++) close(fds[k]);
    if (rootfd >= 0) close(rootfd);
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, es[bad].shown);
    } else {
        result = fallback ? Py_False : Py_True;
        Py_INCREF(result);
    }
done:
    for (Py_ssize_t i = 0; es != NULL && i < n; i++)  /* es is zeroed: obj is set once a buffer is held */
        if (es[i].data.obj) PyBuffer_Release(&es[i].data);
    PyMem_Free(es);
    PyMem_Free(comps);
    PyMem_Free(fds);
    PyMem_Free(made);
    Py_DECREF(items);
    return result;
}
#endif

typedef int (*get_dtype_t)(void *, int *);
typedef int (*sync_copy_t)(void *, void *, size_t);

static PyObject *read_arrays(PyObject *self, PyObject *args) {
    PyObject *oparts, *obuf;
    unsigned long long f_dtype, f_copy;
    if (!PyArg_ParseTuple(args, "OOKK:read_arrays", &oparts, &obuf, &f_dtype, &f_copy)) return NULL;
    if (!f_dtype || !f_copy) {
        PyErr_SetString(PyExc_ValueError, "read_arrays: get_dtype and sync_copy must be function addresses");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(oparts, "read_arrays: parts must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer buf = {0};
    void **handles = NULL;
    size_t *sizes = NULL, *offsets = NULL;
    int *codes = NULL;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(obuf, &buf, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
    handles = PyMem_Calloc(n ? n : 1, sizeof(void *));
    sizes = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    offsets = PyMem_Calloc(n ? n : 1, sizeof(size_t));
    codes = PyMem_Calloc(n ? n : 1, sizeof(int));
    if (!handles || !sizes || !offsets || !codes) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long h, size, offset;
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "KKK", &h, &size, &offset)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "read_arrays: each part is (handle, size, offset)");
            goto done;
        }
        /* the whole of 8 * size bytes inside buf, without overflow */
        if (!h || size > (unsigned long long)buf.len / 8 || offset > (unsigned long long)buf.len - 8 * size) {
            PyErr_SetString(PyExc_ValueError, "read_arrays: a part's handle is null or its bytes fall outside buf");
            goto done;
        }
        handles[i] = (void *)(uintptr_t)h;
        sizes[i] = (size_t)size;
        offsets[i] = (size_t)offset;
    }
    get_dtype_t get_dtype = (get_dtype_t)(uintptr_t)f_dtype;
    sync_copy_t sync_copy = (sync_copy_t)(uintptr_t)f_copy;
    char *base = (char *)buf.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int code = -1;
        if (get_dtype(handles[i], &code) != 0 || sync_copy(handles[i], base + offsets[i], sizes[i]) != 0)
            code = -1;
        codes[i] = code;
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    if (!result) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyLong_FromLong(codes[i]);
        if (!c) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, c);
    }
done:
    if (buf.obj) PyBuffer_Release(&buf);
    PyMem_Free(handles);
    PyMem_Free(sizes);
    PyMem_Free(offsets);
    PyMem_Free(codes);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"read_arrays", read_arrays, METH_VARARGS,
     "read_arrays([(handle, size, offset), ...], buf, get_dtype, sync_copy) -> [MXNet dtype code or -1, ...]"},
#ifndef _WIN32
    {"write_files", write_files, METH_VARARGS,
     "write_files(root, [(dirs, name, tmp, data, shown), ...]) -> bool: all written and renamed into "
     "place; False: not done, leave it to the Python code"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastio",
                                    "C kernels of gluon_tb's whole-file writes and NDArray reads, each in one "
                                    "release of the GIL.", -1, methods};

PyMODINIT_FUNC PyInit__fastio(void) { return PyModule_Create(&module); }
