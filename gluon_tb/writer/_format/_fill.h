/* A piece of a record whose bytes are made while the record is framed (chain.Chain).
 *
 * A C kernel that turns a payload into bytes of a length known in advance (audio's 16-bit samples)
 * can hand the framing its work instead of its output: a PyCapsule named GTB_FILL_CAPSULE whose
 * pointer is a struct starting with gtb_fill. _fastframe.c calls fill() while it frames the record,
 * without the GIL and without Python calls, into the record's place in the output; the capsule
 * keeps whatever fill() reads alive (and its destructor, run with the GIL, releases it). So the
 * writer thread takes the GIL back once for the conversion, the framing and the write together,
 * where a separate kernel call costs one more hand-over of the GIL by the training thread.
 */
#ifndef GLUON_TB_FILL_H
#define GLUON_TB_FILL_H

#include <Python.h>
#include <stdint.h>

#define GTB_FILL_CAPSULE "gluon_tb.fill"

typedef struct gtb_fill {
    Py_ssize_t len;                                        /* the bytes fill() writes */
    void (*fill)(const struct gtb_fill *self, uint8_t *out); /* no Python calls: runs without the GIL */
} gtb_fill;

#endif
