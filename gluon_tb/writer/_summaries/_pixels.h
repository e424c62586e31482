/* Shared by _fastconvert.c and _fastpng.c (pixels.py's kernels): float pixels as pixels.to_uint8
 * makes them, the finite range pixels.display_range reads, and the tiled grid pixels.tile_images
 * lays out. Static functions only: each module gets its own copy. Needs Python.h, math.h, stdint.h
 * and string.h first; built with -ffp-contract=off (setup.py), as numpy rounds.
 */
#ifndef GLUON_TB_PIXELS_H
#define GLUON_TB_PIXELS_H

/* a buffer's values: 4 (float32), 8 (float64), or 0 with a TypeError naming `arg` (a byte-order
   prefix of this machine's order is accepted) */
static int float_kind(Py_buffer *b, const char *arg) {
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (f[0] == 'f' && f[1] == 0 && b->itemsize == 4) return 4;
    if (f[0] == 'd' && f[1] == 0 && b->itemsize == 8) return 8;
    PyErr_Format(PyExc_TypeError, "%s must be float32 or float64 values, got format %.20s", arg,
                 b->format ? b->format : "B");
    return 0;
}

/* the count, min and max of the finite values among the n_ values at x_ (of C type T), added to
   finite and put in lo and hi (untouched when none is finite); its own names end in _ */
#define FINITE_RANGE(T, x_, n_, finite, lo, hi)                 \
    do {                                                        \
        const T *fr_x_ = (const T *)(x_);                       \
        T fr_lo_ = INFINITY, fr_hi_ = -INFINITY;                \
        for (Py_ssize_t fr_i_ = 0; fr_i_ < (n_); fr_i_++) {     \
            T fr_v_ = fr_x_[fr_i_];                             \
            if (isfinite(fr_v_)) {                              \
                (finite)++;                                     \
                if (fr_v_ < fr_lo_) fr_lo_ = fr_v_;             \
                if (fr_v_ > fr_hi_) fr_hi_ = fr_v_;             \
            }                                                   \
        }                                                       \
        if (finite) { (lo) = fr_lo_; (hi) = fr_hi_; }           \
    } while (0)

/* pixels.to_uint8 of one value: rescaled by (v - lo) * scale first when asked; then v * 255 + 0.5
   (two float32 operations, as numpy does them), NaN -> 0, clipped to [0, 255], truncated */
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

/* pixels.checked_uint8 + tile_images of n float images of c x h x w values (N x C x H x W, kind 4 or
   8): the finite range decides the rescaling as display_range does (none when no value is finite,
   when all are in [0, 1] or all equal; else by their min and max), and each pixel goes H x W x C
   into out, a grid of ceil(n / ncol) x ncol cells separated and framed by pad pixels of 0, of
   gw pixels a row (zeroed here, out_len bytes). Returns whether it rescaled; the range into *finite, *lo, *hi.
   Needs no GIL. */
static inline int grid_pixels(const void *xs, int kind, Py_ssize_t n, Py_ssize_t c, Py_ssize_t h, Py_ssize_t w,
                              Py_ssize_t ncol, Py_ssize_t pad, uint8_t *out, size_t out_len, Py_ssize_t *finite,
                              double *lo, double *hi) {
    Py_ssize_t total = n * c * h * w, gw = ncol * (w + pad) + pad, nf = 0;
    double l = 0.0, u = 0.0;
    if (kind == 4)
        FINITE_RANGE(float, xs, total, nf, l, u);
    else
        FINITE_RANGE(double, xs, total, nf, l, u);
    int rescale = nf > 0 && !((l >= 0.0 && u <= 1.0) || u == l);
    float lo_f = rescale ? (float)l : 0.0f, scale = rescale ? (float)(1.0 / (u - l)) : 1.0f;
    memset(out, 0, out_len);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t y0 = pad + (i / ncol) * (h + pad), x0 = pad + (i % ncol) * (w + pad);
        for (Py_ssize_t ch = 0; ch < c; ch++) {
            for (Py_ssize_t y = 0; y < h; y++) {
                Py_ssize_t at = ((i * c + ch) * h + y) * w;
                uint8_t *dst = out + ((y0 + y) * gw + x0) * c + ch;
                if (kind == 4) {
                    const float *row = (const float *)xs + at;
                    for (Py_ssize_t k = 0; k < w; k++) dst[k * c] = pixel(row[k], rescale, lo_f, scale);
                } else {
                    const double *row = (const double *)xs + at;
                    for (Py_ssize_t k = 0; k < w; k++) dst[k * c] = pixel((float)row[k], rescale, lo_f, scale);
                }
            }
        }
    }
    *finite = nf;
    *lo = l;
    *hi = u;
    return rescale;
}

/* the grid's size for n images of h x w in ncol columns with pad pixels around each cell */
static inline void grid_size(Py_ssize_t n, Py_ssize_t h, Py_ssize_t w, Py_ssize_t ncol, Py_ssize_t pad,
                             Py_ssize_t *gh, Py_ssize_t *gw) {
    *gh = ((n + ncol - 1) / ncol) * (h + pad) + pad;
    *gw = ncol * (w + pad) + pad;
}

#endif
