/* The module object of streamembed.core._native (see native.h). */
#include "native.h"

#include <signal.h>
#include <unistd.h>

/* exit_on_sigbus: a one-shot command that maps its inputs turns the SIGBUS of a file truncated under the mapping
 * into a message and an exit code (nothing else is safe in a signal handler: write and _exit are). */
static char sigbus_message[2048];
static size_t sigbus_length;
static int sigbus_code;

static void on_sigbus(int sig) {
    (void)sig;
    ssize_t ignored = write(STDERR_FILENO, sigbus_message, sigbus_length);
    (void)ignored;
    _exit(sigbus_code);
}

static PyObject *native_exit_on_sigbus(PyObject *self, PyObject *args) {
    (void)self;
    const char *message;
    Py_ssize_t length;
    int code;
    if (!PyArg_ParseTuple(args, "y#i", &message, &length, &code)) return NULL;
    if ((size_t)length >= sizeof(sigbus_message)) length = (Py_ssize_t)sizeof(sigbus_message) - 1;
    memcpy(sigbus_message, message, (size_t)length);
    sigbus_length = (size_t)length;
    sigbus_code = code;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

int native_float_size(const Py_buffer *b) {
    if (b->format == NULL) return 0;
    const char *f = b->format;
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (strcmp(f, "f") == 0 && b->itemsize == 4) return 4;
    if (strcmp(f, "d") == 0 && b->itemsize == 8) return 8;
    return 0;
}

static PyMethodDef methods[] = {
    {"project", native_project, METH_VARARGS,
     "project(A, WT, offset, Z, flags, start, stop[, Z2]): Z[i] = (A[i]**2) @ WT.T + offset (with Z2: Z's columns "
     "then Z2's, in one pass) and flags[i] = 1 if a sign bit is set in A[i], | 2 if an entry is zero, for rows "
     "start:stop, GIL released (projection.py)."},
    {"secular", native_secular, METH_VARARGS,
     "secular(aT, beta, proj_norm2, gap, in_group, lam_d, max_iter, final_step_rtol, step_rtol, u, converged, "
     "start, stop) -> iterations: safeguarded Newton on the RR secular equation for columns start:stop, GIL "
     "released (restricted.py)."},
    {"block_newton", native_block_newton, METH_VARARGS,
     "block_newton(Y, C, Beta, lam, f0, max_iter, constants, f, g_norm, iterations, cg_iterations, converged, gap, "
     "start, stop): trust-region Newton and the optimality gap of blocks start:stop, GIL released "
     "(block/solve.py)."},
    {"block_rows", native_block_rows, METH_VARARGS,
     "block_rows(A, shift, Bout, b2, abar, bad, start, stop): the rows start:stop of a batch of blocks centred "
     "into Bout and checked, GIL released (block/prepare.py)."},
    {"block_consistency", native_block_consistency, METH_VARARGS,
     "block_consistency(coords, beta, sizes, shift, out): out[b] = 1 where K0 + shift[b] I of block b has no Cholesky "
     "factor or a non-finite entry, GIL released (block/consistency.py)."},
    {"block_cross", native_block_cross, METH_VARARGS,
     "block_cross(M, rtol, bad, largest): per matrix of the stack M, bad = a NaN/inf/negative entry, diagonal or "
     "asymmetry beyond rtol · max |x|, largest = the largest finite |x|, GIL released (block/prepare.py)."},
    {"exit_on_sigbus", native_exit_on_sigbus, METH_VARARGS,
     "exit_on_sigbus(message: bytes, code): from now on a SIGBUS writes message to stderr and exits with code "
     "(stream/mapped.py)."},
    {"isa", native_isa, METH_NOARGS, "isa() -> the instruction set of the projection and block-solver kernels in use."},
    {"supported_isas", native_supported_isas, METH_NOARGS,
     "supported_isas() -> the kernel instruction sets this CPU runs."},
    {"set_isa", native_set_isa, METH_VARARGS, "set_isa(name): use the avx512, avx2 or sse2 kernels (projection and block solver)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Compiled kernels of streamembed's numerical core (see native.h).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    native_projection_init();
    return PyModule_Create(&module);
}
