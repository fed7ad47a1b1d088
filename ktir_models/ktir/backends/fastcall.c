/* A CPython extension module (_ktir_fastcall) that calls into the seqmm library on array
 * buffers, for the calls too small to pay ctypes' price.
 *
 * Why it exists: a ctypes call with three array pointers costs ~4-12 us in Python (each
 * ``ndarray.ctypes.data`` alone ~0.8-1.4 us), more than numpy spends on a few hundred f16
 * elements, so small f16 arrays stayed on numpy (~3 us for 576 elements, ~20 us when an operand
 * broadcasts), and each kernel call paid ~4 us for its pointers. A decode pass runs about a
 * thousand such operations and a few hundred kernel calls. Here an argument is read through the
 * buffer protocol (~0.1 us).
 *
 * What is computed is defined once, in f16conv.c and seqmm.c: setup() receives the addresses of
 * the loaded library's functions and the SIMD level it chose; this file only checks sizes and
 * forwards. binop and convert take C-contiguous buffers; the Python side (f16_convert.py)
 * checks dtypes and shapes, and a size that does not match raises ValueError here, so no call
 * can read or write past a buffer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*binop_fn)(const uint16_t *, const uint16_t *, uint16_t *, Py_ssize_t, int, int);
typedef void (*cvt_fn)(const void *, void *, Py_ssize_t, int);

typedef int (*tail_fn)(const void *, const void *, const void *, void *, Py_ssize_t, float, int,
                       int);
typedef void (*lut_fn)(const uint16_t *, const uint16_t *, uint16_t *, Py_ssize_t);

static binop_fn binop_p;
static cvt_fn h2f_p, f2h_p;
static tail_fn tail_p;
static lut_fn lut_p;
static int simd_level;

static PyObject *setup(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "setup(binop, h2f, f2h, tail, lut, simd) takes 6 arguments");
        return NULL;
    }
    void *b = PyLong_AsVoidPtr(args[0]), *w = PyLong_AsVoidPtr(args[1]),
         *r = PyLong_AsVoidPtr(args[2]), *t = PyLong_AsVoidPtr(args[3]),
         *l = PyLong_AsVoidPtr(args[4]);
    long s = PyLong_AsLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    if (!b || !w || !r || !t || !l) {
        PyErr_SetString(PyExc_ValueError, "setup: a function address is 0");
        return NULL;
    }
    binop_p = (binop_fn)b;
    h2f_p = (cvt_fn)w;
    f2h_p = (cvt_fn)r;
    tail_p = (tail_fn)t;
    lut_p = (lut_fn)l;
    simd_level = (int)s;
    Py_RETURN_NONE;
}

static int ready(void) {
    if (binop_p) return 1;
    PyErr_SetString(PyExc_RuntimeError, "_ktir_fastcall: setup() was not called");
    return 0;
}

/* The call's argument count checked (usage: the TypeError's text) and the library set up. */
static int called(Py_ssize_t n, Py_ssize_t want, const char *usage) {
    if (n != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", usage, want);
        return 0;
    }
    return ready();
}

/* args[0..count-1] as C-contiguous buffers, the last one writable; 0, or -1 with the error set
   and nothing held. */
static int acquire(PyObject *const *args, int count, Py_buffer *v) {
    for (int i = 0; i < count; i++) {
        int flags = PyBUF_C_CONTIGUOUS | (i == count - 1 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[i], &v[i], flags) < 0) {
            while (i--) PyBuffer_Release(&v[i]);
            return -1;
        }
    }
    return 0;
}

static void release(Py_buffer *v, int count) {
    for (int i = 0; i < count; i++) PyBuffer_Release(&v[i]);
}

/* An arithmetic op code 0..3 (+ - * /); -1 with the error set. */
static int op_code(PyObject *arg, const char *name) {
    long op = PyLong_AsLong(arg);
    if (op == -1 && PyErr_Occurred()) return -1;
    if (op < 0 || op > 3) {
        PyErr_Format(PyExc_ValueError, "%s: op must be 0..3", name);
        return -1;
    }
    return (int)op;
}

/* The calls return None, or raise ValueError(message) when the sizes did not fit (nothing was
   read or written then). */
static PyObject *done(int ok, const char *message) {
    if (ok) Py_RETURN_NONE;
    PyErr_SetString(PyExc_ValueError, message);
    return NULL;
}

/* binop(a, b, out, op): out = f16(f32(a) op f32(b)) elementwise, op 0..3 (+ - * /); a, b and
   out hold the same number of 2-byte elements. */
static PyObject *binop(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (!called(n, 4, "binop(a, b, out, op)")) return NULL;
    int op = op_code(args[3], "binop");
    Py_buffer v[3];
    if (op < 0 || acquire(args, 3, v) < 0) return NULL;
    int ok = v[0].len == v[2].len && v[1].len == v[2].len && v[2].len % 2 == 0;
    if (ok) binop_p(v[0].buf, v[1].buf, v[2].buf, v[2].len / 2, op, simd_level);
    release(v, 3);
    return done(ok, "binop: a, b and out must hold as many f16 elements");
}

/* binop_repeat(big, small, out, op, small_left): out = big op small (small op big when
   small_left), small's elements repeated along big: the broadcast of a [..., n] operand (its
   leading dims all 1) against a [..., n]-suffixed one. big and out hold as many elements, a
   whole number of smalls. A small of fewer than 64 elements is first laid out several times
   over in a local buffer, so the library's loops still run full vectors. */
static PyObject *binop_repeat(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (!called(n, 5, "binop_repeat(big, small, out, op, small_left)")) return NULL;
    int op = op_code(args[3], "binop_repeat");
    if (op < 0) return NULL;
    int small_left = PyObject_IsTrue(args[4]);
    Py_buffer v[3];
    if (small_left < 0 || acquire(args, 3, v) < 0) return NULL;
    Py_ssize_t total = v[2].len / 2, period = v[1].len / 2;
    int ok = v[0].len == v[2].len && v[2].len % 2 == 0 && v[1].len % 2 == 0 && period > 0 &&
             total % period == 0;
    if (ok) {
        const uint16_t *big = (const uint16_t *)v[0].buf, *small = (const uint16_t *)v[1].buf;
        uint16_t *out = (uint16_t *)v[2].buf;
        uint16_t wide[128];
        Py_ssize_t step = period;
        if (period < 64) {  /* whole periods, at least 64 elements */
            step = period * ((64 + period - 1) / period);
            for (Py_ssize_t i = 0; i < step; i++) wide[i] = small[i % period];
            small = wide;
        }
        for (Py_ssize_t i = 0; i < total; i += step) {
            Py_ssize_t len = total - i < step ? total - i : step;
            if (small_left) binop_p(small, big + i, out + i, len, op, simd_level);
            else binop_p(big + i, small, out + i, len, op, simd_level);
        }
    }
    release(v, 3);
    return done(ok, "binop_repeat: big and out must hold as many f16 elements, a whole number "
                    "of smalls");
}

/* silu_tail(a, e, u, out, k, mode): seqmm_silu_tail (f16conv.c) on four C-contiguous buffers of
   as many elements: a, e, u of 2-byte (mode bit 0) or 4-byte elements, out of 2 (bit 1) or 4. */
static PyObject *silu_tail(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (!called(n, 6, "silu_tail(a, e, u, out, k, mode)")) return NULL;
    double k = PyFloat_AsDouble(args[4]);
    if (k == -1.0 && PyErr_Occurred()) return NULL;
    long mode = PyLong_AsLong(args[5]);
    if (mode == -1 && PyErr_Occurred()) return NULL;
    if (mode < 0 || mode > 7 || (mode & 3) == 1) {
        PyErr_SetString(PyExc_ValueError, "silu_tail: no chain has this mode");
        return NULL;
    }
    Py_buffer v[4];
    if (acquire(args, 4, v) < 0) return NULL;
    Py_ssize_t in_size = (mode & 1) ? 2 : 4, out_size = (mode & 2) ? 2 : 4;
    Py_ssize_t count = v[3].len / out_size;
    int ok = v[3].len % out_size == 0 && v[0].len == count * in_size &&
             v[1].len == count * in_size && v[2].len == count * in_size;
    if (ok) tail_p(v[0].buf, v[1].buf, v[2].buf, v[3].buf, count, (float)k, (int)mode,
                   simd_level);
    release(v, 4);
    return done(ok, "silu_tail: a, e, u and out must hold as many elements of their sizes");
}

/* lut(table, x, out): out = table[x] elementwise (seqmm_f16_lut): table holds 65536 2-byte
   entries, x and out as many 2-byte elements. */
static PyObject *lut(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (!called(n, 3, "lut(table, x, out)")) return NULL;
    Py_buffer v[3];
    if (acquire(args, 3, v) < 0) return NULL;
    int ok = v[0].len == 2 * 65536 && v[1].len == v[2].len && v[2].len % 2 == 0;
    if (ok) lut_p(v[0].buf, v[1].buf, v[2].buf, v[2].len / 2);
    release(v, 3);
    return done(ok, "lut: table must hold 65536 2-byte entries, x and out as many 2-byte "
                    "elements");
}

/* convert(x, out): f16 -> f32 when out holds twice x's bytes, f32 -> f16 when half; the same
   element count either way. */
static PyObject *convert(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (!called(n, 2, "convert(x, out)")) return NULL;
    Py_buffer v[2];
    if (acquire(args, 2, v) < 0) return NULL;
    int widen = v[0].itemsize == 2 && v[1].itemsize == 4 && v[1].len == 2 * v[0].len;
    int narrow = v[0].itemsize == 4 && v[1].itemsize == 2 && v[0].len == 2 * v[1].len;
    if (widen) h2f_p(v[0].buf, v[1].buf, v[0].len / 2, simd_level);
    else if (narrow) f2h_p(v[0].buf, v[1].buf, v[1].len / 2, simd_level);
    release(v, 2);
    return done(widen || narrow, "convert: expected 2-byte x and 4-byte out (or the reverse), "
                                 "one element each");
}

/* pointers(a, b, c): the addresses of three arrays' first elements, whatever their strides
   (read-only views and stride-0 broadcasts included), as seqmm's kernel takes them. */
static PyObject *pointers(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "pointers(a, b, c) takes 3 arguments");
        return NULL;
    }
    void *p[3];
    for (int i = 0; i < 3; i++) {
        Py_buffer v;
        if (PyObject_GetBuffer(args[i], &v, PyBUF_STRIDED_RO) < 0) return NULL;
        p[i] = v.buf;
        PyBuffer_Release(&v);  /* the caller holds the arrays for as long as it uses these */
    }
    return Py_BuildValue("(NNN)", PyLong_FromVoidPtr(p[0]), PyLong_FromVoidPtr(p[1]),
                         PyLong_FromVoidPtr(p[2]));
}

static PyMethodDef methods[] = {
    {"pointers", (PyCFunction)(void (*)(void))pointers, METH_FASTCALL,
     "pointers(a, b, c): the three arrays' data addresses"},
    {"setup", (PyCFunction)(void (*)(void))setup, METH_FASTCALL,
     "setup(binop, h2f, f2h, tail, lut, simd): the library's function addresses and SIMD "
     "level"},
    {"binop", (PyCFunction)(void (*)(void))binop, METH_FASTCALL,
     "binop(a, b, out, op): f16 + - * / through f32 into out"},
    {"binop_repeat", (PyCFunction)(void (*)(void))binop_repeat, METH_FASTCALL,
     "binop_repeat(big, small, out, op, small_left): a broadcast operand repeated along big"},
    {"silu_tail", (PyCFunction)(void (*)(void))silu_tail, METH_FASTCALL,
     "silu_tail(a, e, u, out, k, mode): out = R(R(a / R(k + e)) * u), rounded as the ops"},
    {"lut", (PyCFunction)(void (*)(void))lut, METH_FASTCALL,
     "lut(table, x, out): out = table[x], an f16 function by its 65536 values"},
    {"convert", (PyCFunction)(void (*)(void))convert, METH_FASTCALL,
     "convert(x, out): f16 <-> f32, numpy's astype bits"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ktir_fastcall",
                                    "seqmm's library called on buffers", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ktir_fastcall(void) { return PyModule_Create(&module); }
