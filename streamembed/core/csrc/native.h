/* streamembed.core._native: compiled kernels behind projection.py, restricted.py and block/solve.py.
 * Each kernel mirrors a numpy implementation that stays in the package as the
 * fallback and as the reference the tests compare against. */
#ifndef STREAMEMBED_NATIVE_H
#define STREAMEMBED_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* itemsize (4 or 8) of a native float32/float64 buffer, or 0. */
int native_float_size(const Py_buffer *b);

/* projection.c */
void native_projection_init(void);
PyObject *native_project(PyObject *self, PyObject *args);
PyObject *native_isa(PyObject *self, PyObject *args);
/* The instruction set chosen for the kernels (set_isa; the best the CPU runs by default): "avx512", "avx2" or "sse2". */
const char *native_kernel_isa(void);
PyObject *native_supported_isas(PyObject *self, PyObject *args);
PyObject *native_set_isa(PyObject *self, PyObject *args);

/* secular.c */
PyObject *native_secular(PyObject *self, PyObject *args);

/* block.c */
PyObject *native_block_newton(PyObject *self, PyObject *args);
PyObject *native_block_rows(PyObject *self, PyObject *args);
PyObject *native_block_consistency(PyObject *self, PyObject *args);
PyObject *native_block_cross(PyObject *self, PyObject *args);

#endif
