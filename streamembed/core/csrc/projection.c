/*
 * The projection hot path as one compiled pass (docs/math.md §3, folded as in
 * projection.py): for every row a of A, z = (a ⊙ a) · W + offset, plus a flag
 * for rows holding an entry with its sign bit set (a negative entry).
 *
 * Why compiled: through numpy the row block is squared into a buffer, then
 * BLAS packs that buffer again before a GEMM whose narrow output (p = d + 1
 * columns) keeps its micro-kernel far from peak; three passes over the data
 * where one suffices. Here each row is loaded once, squared in registers and
 * multiplied into p vector accumulators (one per output column) while W^T,
 * p × n, stays in L1. The row check costs one OR per vector.
 *
 * Vectors are GCC/Clang vector extensions of each instruction set's register
 * width; the kernels are compiled for AVX-512, AVX2+FMA and baseline SSE2
 * through target attributes, and the best one the CPU supports is chosen at
 * import (`isa()`, `set_isa()`).
 * Output columns are processed in groups small enough that the accumulators
 * stay in registers; a row is reread from L1 for each group.
 *
 * Python API (buffers must be C-contiguous, of one dtype, float32 or float64):
 *   project(A (m, n), WT (p, ldw), offset (p,), Z (m, p), flags (m,) uint8, start, stop[, Z2 (m, p2)])
 * with ldw ≥ n rounded up to a multiple of 64 bytes and WT[:, n:] finite (zero). flags[i] is
 * FLAG_SIGN (1) for a row with a sign bit set, | FLAG_ZERO (2) for a row with an entry equal to 0.
 * With Z2, WT has p + p2 rows and offset p + p2 entries: the last p2 columns go to Z2, computed in
 * the same pass over each row (a second product on the same rows: the radius's columns, read while
 * the row is in cache), each part by the kernels it would get alone, so that either part's numbers
 * are those of a call of its own;
 * a stride ldw · itemsize that is a multiple of 4 KiB maps every row of WT to
 * the same L1 sets (projection.py keeps it off multiples of 1 KiB). Rows
 * start:stop are computed with the GIL released, so Python threads can run
 * disjoint row ranges at once.
 */
#include "native.h"

#if !(defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)))
#error "streamembed.core._native needs GCC or Clang vector extensions on x86; the numpy paths are used instead"
#endif

/* One vector register of each instruction set, and the integer vector of the same size. */
#define VEC(NAME, T, BYTES) typedef T NAME __attribute__((vector_size(BYTES)));
VEC(f32x16, float, 64) VEC(f64x8, double, 64) VEC(i32x16, int32_t, 64) VEC(i64x8, int64_t, 64)
VEC(f32x8, float, 32) VEC(f64x4, double, 32) VEC(i32x8, int32_t, 32) VEC(i64x4, int64_t, 32)
VEC(f32x4, float, 16) VEC(f64x2, double, 16) VEC(i32x4, int32_t, 16) VEC(i64x2, int64_t, 16)

/* Prefetch the same columns of the rows this many kernel calls ahead: the hardware prefetcher
 * alone left the kernel waiting on memory (measured 2.3 → 4.0 M rows/s, n = 500, float32).
 * Locality 1 (prefetcht2, to L2) rather than a non-temporal hint: float64 on two threads went
 * from 0.56–0.62 to 0.70–0.79 of the read ceiling; float32 did not move. */
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 2
#endif

/* The row flags (project's flags argument). */
#define FLAG_SIGN 1
#define FLAG_ZERO 2

typedef void (*row_kernel)(const void *a, Py_ssize_t lda, const void *wt, Py_ssize_t ldw, Py_ssize_t n,
                           const void *offset, void *z, Py_ssize_t ldz, uint8_t *flag);

/* Sums of the lanes of a vector: add the halves in narrower vector types, then the last lanes.
 * (A loop over the lanes of the full vector compiles to scalar adds: measured 30% slower.) */
#define RED_LANES(T, V, x, out)                                      \
    do {                                                             \
        T l_[sizeof(V) / sizeof(T)];                                 \
        memcpy(l_, &(x), sizeof(V));                                 \
        (out) = l_[0];                                               \
        for (size_t i_ = 1; i_ < sizeof(V) / sizeof(T); i_++)        \
            (out) += l_[i_];                                         \
    } while (0)
#define RED_HALVES(T, V, H, x, out)                                  \
    do {                                                             \
        H lo_, hi_;                                                  \
        memcpy(&lo_, &(x), sizeof(H));                               \
        memcpy(&hi_, (const char *)&(x) + sizeof(H), sizeof(H));     \
        lo_ += hi_;                                                  \
        RED_LANES(T, H, lo_, out);                                   \
    } while (0)
#define RED_QUARTERS(T, V, H, Q, x, out)                             \
    do {                                                             \
        H h_, hh_;                                                   \
        memcpy(&h_, &(x), sizeof(H));                                \
        memcpy(&hh_, (const char *)&(x) + sizeof(H), sizeof(H));     \
        h_ += hh_;                                                   \
        RED_HALVES(T, H, Q, h_, out);                                \
    } while (0)
#define RED_512_F32(x, out) RED_QUARTERS(float, f32x16, f32x8, f32x4, x, out)
#define RED_512_F64(x, out) RED_QUARTERS(double, f64x8, f64x4, f64x2, x, out)
#define RED_256_F32(x, out) RED_HALVES(float, f32x8, f32x4, x, out)
#define RED_256_F64(x, out) RED_HALVES(double, f64x4, f64x2, x, out)
#define RED_128_F32(x, out) RED_LANES(float, f32x4, x, out)
#define RED_128_F64(x, out) RED_LANES(double, f64x2, x, out)

/* Fold the squares of x[r] (entries off..off+L of row r) into the R × G accumulators. The row
 * check ORs the bit patterns: a set sign bit is a negative entry (or -0.0, which the caller's
 * exact recheck clears); NaN and ±inf reach the sums and are caught there (β not finite). It also
 * notes entries equal to zero (an object at dissimilarity 0 from a landmark: its radius is 0); the
 * zero-padded tail is checked apart, lane by lane. */
#define ACCUMULATE(V, I, R, G, off, TAIL)                                 \
    do {                                                                  \
        V sq_[R];                                                         \
        for (int r_ = 0; r_ < (R); r_++) {                                \
            if (flag) {                                                   \
                bad[r_] |= (I)x[r_];                                      \
                if (!(TAIL)) zero[r_] |= (x[r_] == 0);                    \
            }                                                             \
            sq_[r_] = x[r_] * x[r_];                                      \
        }                                                                 \
        for (int g_ = 0; g_ < (G); g_++) {                                \
            V w_;                                                         \
            memcpy(&w_, wt + g_ * ldw + (off), sizeof(V));                \
            for (int r_ = 0; r_ < (R); r_++) acc[r_][g_] += sq_[r_] * w_; \
        }                                                                 \
    } while (0)

/* R rows (stride lda), G output columns: z[r, g] = Σ_k a[r, k]² wt[g, k] + offset[g] (z stride ldz); with
 * flag ≠ NULL also flag[r] = FLAG_SIGN if row r has an entry with its sign bit set, | FLAG_ZERO if an
 * entry equal to zero. R rows share each load of W. Every (instruction set, dtype, R, G) is generated;
 * the tables below pick. */
#define ROW_KERNEL(NAME, TARGET, T, V, I, RED, R, G)                                                   \
    TARGET __attribute__((unused)) static void NAME(const void *a_, Py_ssize_t lda, const void *wt_,   \
                                                    Py_ssize_t ldw, Py_ssize_t n, const void *offset_, \
                                                    void *z_, Py_ssize_t ldz, uint8_t *flag) {         \
        const T *restrict a = (const T *)a_;                                                          \
        const T *restrict wt = (const T *)wt_;                                                        \
        const T *restrict offset = (const T *)offset_;                                                \
        T *restrict z = (T *)z_;                                                                      \
        enum { L = sizeof(V) / sizeof(T) };                                                           \
        const Py_ssize_t full = n / L, rem = n % L;                                                   \
        V acc[R][G];                                                                                  \
        I bad[R], zero[R];                                                                            \
        for (int r = 0; r < R; r++) {                                                                 \
            bad[r] = (I){0};                                                                          \
            zero[r] = (I){0};                                                                         \
            for (int g = 0; g < G; g++) acc[r][g] = (V){0};                                           \
        }                                                                                             \
        for (Py_ssize_t c = 0; c < full; c++) {                                                       \
            V x[R];                                                                                   \
            for (int r = 0; r < R; r++) {                                                             \
                if (flag) __builtin_prefetch(a + (r + PREFETCH_ROWS * R) * lda + c * L, 0, 1);        \
                memcpy(&x[r], a + r * lda + c * L, sizeof(V));                                        \
            }                                                                                         \
            ACCUMULATE(V, I, R, G, c * L, 0);                                                         \
        }                                                                                             \
        if (rem) {                                                                                    \
            V x[R];                                                                                   \
            for (int r = 0; r < R; r++) {                                                             \
                x[r] = (V){0};                                                                        \
                memcpy(&x[r], a + r * lda + full * L, (size_t)rem * sizeof(T));                       \
                if (flag)                                                                             \
                    for (Py_ssize_t l = 0; l < rem; l++) zero[r][0] |= -(a[r * lda + full * L + l] == 0); \
            }                                                                                         \
            ACCUMULATE(V, I, R, G, full * L, 1);                                                      \
        }                                                                                             \
        for (int r = 0; r < R; r++) {                                                                 \
            for (int g = 0; g < G; g++) {                                                             \
                RED(acc[r][g], z[r * ldz + g]);                                                       \
                z[r * ldz + g] += offset[g];                                                          \
            }                                                                                         \
            if (flag) {                                                                               \
                int any = 0, zeros = 0;                                                               \
                for (int l = 0; l < L; l++) {                                                         \
                    any |= bad[r][l] < 0;                                                             \
                    zeros |= zero[r][l] != 0;                                                         \
                }                                                                                     \
                flag[r] = (uint8_t)((any ? FLAG_SIGN : 0) | (zeros ? FLAG_ZERO : 0));                \
            }                                                                                         \
        }                                                                                             \
    }

#define T512 __attribute__((target("avx512f,avx512dq,fma")))
#define T256 __attribute__((target("avx2,fma")))
#define TSSE

#define KERNELS_FOR(PFX, BITS, TARGET, F32, I32, F64, I64, R, G)                     \
    ROW_KERNEL(PFX##_f32_##R##x##G, TARGET, float, F32, I32, RED_##BITS##_F32, R, G)   \
    ROW_KERNEL(PFX##_f64_##R##x##G, TARGET, double, F64, I64, RED_##BITS##_F64, R, G)
#define KERNELS_1_TO_6(...)                                                                        \
    KERNELS_FOR(__VA_ARGS__, 1) KERNELS_FOR(__VA_ARGS__, 2) KERNELS_FOR(__VA_ARGS__, 3)            \
    KERNELS_FOR(__VA_ARGS__, 4) KERNELS_FOR(__VA_ARGS__, 5) KERNELS_FOR(__VA_ARGS__, 6)
#define KERNELS_7_TO_12(...)                                                                       \
    KERNELS_FOR(__VA_ARGS__, 7) KERNELS_FOR(__VA_ARGS__, 8) KERNELS_FOR(__VA_ARGS__, 9)            \
    KERNELS_FOR(__VA_ARGS__, 10) KERNELS_FOR(__VA_ARGS__, 11) KERNELS_FOR(__VA_ARGS__, 12)

/* Register budgets: AVX-512 has 32 registers, so 4 rows × up to 6 columns of accumulators (four
 * rows share each load of W: measured 2.1 → 3.5 M rows/s for float64 at n = 500, whose W no
 * longer fits L1); single rows take up to 12 columns on every instruction set (16 registers). */
KERNELS_1_TO_6(k512, 512, T512, f32x16, i32x16, f64x8, i64x8, 1) KERNELS_7_TO_12(k512, 512, T512, f32x16, i32x16, f64x8, i64x8, 1)
KERNELS_1_TO_6(k512, 512, T512, f32x16, i32x16, f64x8, i64x8, 4)
KERNELS_1_TO_6(k256, 256, T256, f32x8, i32x8, f64x4, i64x4, 1) KERNELS_7_TO_12(k256, 256, T256, f32x8, i32x8, f64x4, i64x4, 1)
KERNELS_1_TO_6(ksse, 128, TSSE, f32x4, i32x4, f64x2, i64x2, 1) KERNELS_7_TO_12(ksse, 128, TSSE, f32x4, i32x4, f64x2, i64x2, 1)

#define MAX_GROUP 12
#define MAX_BLOCK_GROUP 6
/* Above this many bytes W (p × n) no longer stays in L1 beside the rows being read, and row
 * blocks that share its loads win; below it single rows stream best (measured: float32 at
 * n = 500, 22 KB of W, 5.0 M rows/s single vs 4.0 in blocks of 4). */
#define W_IN_L1_BYTES 24576

/* The kernels of one instruction set: single rows by output columns (up to MAX_GROUP), and, where
 * the registers allow, blocks of block_rows rows by columns (up to block_group). */
typedef struct {
    const char *name;
    int block_rows, block_group;
    row_kernel single_f32[MAX_GROUP + 1], single_f64[MAX_GROUP + 1];
    row_kernel block_f32[MAX_BLOCK_GROUP + 1], block_f64[MAX_BLOCK_GROUP + 1];
} isa_table;

#define LIST6(PFX, T, R) \
    NULL, PFX##_##T##_##R##x1, PFX##_##T##_##R##x2, PFX##_##T##_##R##x3, PFX##_##T##_##R##x4, \
    PFX##_##T##_##R##x5, PFX##_##T##_##R##x6
#define LIST12(PFX, T, R) \
    LIST6(PFX, T, R), PFX##_##T##_##R##x7, PFX##_##T##_##R##x8, PFX##_##T##_##R##x9, \
    PFX##_##T##_##R##x10, PFX##_##T##_##R##x11, PFX##_##T##_##R##x12
static const isa_table ISAS[] = {
    /* float32 single rows run the 256-bit kernels: on the Zen 4 machine these kernels were tuned on
     * (AVX-512 executed as two 256-bit halves) they were 8-12% faster than 16 lanes, whose tail
     * (n = 500 = 31·16 + 4) and lane reduction cost more. */
    {"avx512", 4, 6, {LIST12(k256, f32, 1)}, {LIST12(k512, f64, 1)}, {LIST6(k512, f32, 4)}, {LIST6(k512, f64, 4)}},
    {"avx2", 1, 0, {LIST12(k256, f32, 1)}, {LIST12(k256, f64, 1)}, {NULL}, {NULL}},
    {"sse2", 1, 0, {LIST12(ksse, f32, 1)}, {LIST12(ksse, f64, 1)}, {NULL}, {NULL}},
};
enum { N_ISAS = sizeof(ISAS) / sizeof(ISAS[0]) };

static const isa_table *current = NULL;

static int isa_supported(const isa_table *t) {
    __builtin_cpu_init();
    if (strcmp(t->name, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
    if (strcmp(t->name, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return 1;
}

const char *native_kernel_isa(void) { return current != NULL ? current->name : "sse2"; }

PyObject *native_isa(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyUnicode_FromString(current->name);
}

PyObject *native_supported_isas(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int i = 0; i < N_ISAS; i++) {
        if (!isa_supported(&ISAS[i])) continue;
        PyObject *s = PyUnicode_FromString(ISAS[i].name);
        if (!s || PyList_Append(out, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(s);
    }
    return out;
}

PyObject *native_set_isa(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    for (int i = 0; i < N_ISAS; i++) {
        if (strcmp(ISAS[i].name, name) != 0) continue;
        if (!isa_supported(&ISAS[i])) {
            PyErr_Format(PyExc_ValueError, "this CPU does not support the %s kernels", name);
            return NULL;
        }
        current = &ISAS[i];
        Py_RETURN_NONE;
    }
    PyErr_Format(PyExc_ValueError, "unknown kernel ISA %R (expected avx512, avx2 or sse2)", PyTuple_GET_ITEM(args, 0));
    return NULL;
}

/* One part of the output columns: p of them, from WT rows wt.., into z (stride p), by blocks of rows
 * when its W does not stay in L1 (the choice a call of its own would make). */
typedef struct {
    Py_ssize_t p, n_groups;
    int blocked;
    const char *wt, *offset;
    char *z;
} part;

static part make_part(const isa_table *t, Py_ssize_t p, Py_ssize_t n, int size, const char *wt, const char *offset,
                      char *z) {
    part q = {p, 0, t->block_rows > 1 && (size_t)(p * n * size) > W_IN_L1_BYTES, wt, offset, z};
    const Py_ssize_t max_group = q.blocked ? t->block_group : MAX_GROUP;
    q.n_groups = (p + max_group - 1) / max_group;
    return q;
}

/* rows i..i+rows-1 (rows = 1, or t->block_rows for a blocked part) of one part */
static void run_part(const isa_table *t, const part *q, int size, const char *a, Py_ssize_t n, Py_ssize_t ldw,
                     Py_ssize_t i, int rows, uint8_t *flags) {
    const row_kernel *single = size == 4 ? t->single_f32 : t->single_f64;
    const row_kernel *block = size == 4 ? t->block_f32 : t->block_f64;
    Py_ssize_t col = 0;
    for (Py_ssize_t g = 0; g < q->n_groups; g++) {
        /* balanced groups: p = 13 runs as 7 + 6, not 12 + 1 */
        const Py_ssize_t width = (q->p - col) / (q->n_groups - g) + ((q->p - col) % (q->n_groups - g) != 0);
        (rows > 1 ? block : single)[width](a + (i * n) * size, n, q->wt + (col * ldw) * size, ldw, n,
                                           q->offset + col * size, q->z + (i * q->p + col) * size, q->p,
                                           g == 0 && flags ? flags + i : NULL);
        col += width;
    }
}

PyObject *native_project(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oA, *oW, *oC, *oZ, *oF, *oZ2 = NULL;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOOOOnn|O", &oA, &oW, &oC, &oZ, &oF, &start, &stop, &oZ2)) return NULL;
    if (oZ2 == Py_None) oZ2 = NULL;
    Py_buffer A = {0}, W = {0}, C = {0}, Z = {0}, F = {0}, Z2 = {0};
    PyObject *result = NULL;
    const int ro = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, rw = ro | PyBUF_WRITABLE;
    if (PyObject_GetBuffer(oA, &A, ro) < 0) goto done;
    if (PyObject_GetBuffer(oW, &W, ro) < 0) goto done;
    if (PyObject_GetBuffer(oC, &C, ro) < 0) goto done;
    if (PyObject_GetBuffer(oZ, &Z, rw) < 0) goto done;
    if (PyObject_GetBuffer(oF, &F, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
    if (oZ2 && PyObject_GetBuffer(oZ2, &Z2, rw) < 0) goto done;
    const int size = native_float_size(&A);
    if (A.ndim != 2 || W.ndim != 2 || C.ndim != 1 || Z.ndim != 2 || F.ndim != 1 || F.itemsize != 1
        || (oZ2 && Z2.ndim != 2)) {
        PyErr_SetString(PyExc_ValueError, "project: A, WT, Z, Z2 must be 2-D, offset 1-D and flags 1-D of bytes");
        goto done;
    }
    if (size == 0 || native_float_size(&W) != size || native_float_size(&C) != size || native_float_size(&Z) != size
        || (oZ2 && native_float_size(&Z2) != size)) {
        PyErr_SetString(PyExc_TypeError, "project: A, WT, offset, Z and Z2 must all be float32 or all float64");
        goto done;
    }
    const Py_ssize_t m = A.shape[0], n = A.shape[1], p = Z.shape[1], p2 = oZ2 ? Z2.shape[1] : 0, ldw = W.shape[1];
    const Py_ssize_t lanes = 64 / size;
    if (ldw < (n + lanes - 1) / lanes * lanes || W.shape[0] != p + p2 || C.shape[0] != p + p2 || Z.shape[0] != m
        || (oZ2 && (Z2.shape[0] != m || p2 < 1)) || F.shape[0] != m || p < 1) {
        PyErr_Format(PyExc_ValueError,
                     "project: shapes do not fit: A (%zd, %zd), WT (%zd, %zd) needs ldw >= n rounded up to 64 bytes, "
                     "offset (%zd,) and Z (%zd, %zd) + Z2 (.., %zd) need %zd rows of WT and %zd offsets, flags (%zd,)",
                     m, n, W.shape[0], ldw, C.shape[0], Z.shape[0], p, p2, p + p2, p + p2, F.shape[0]);
        goto done;
    }
    if (start < 0 || stop > m || start > stop) {
        PyErr_Format(PyExc_ValueError, "project: row range %zd:%zd outside 0:%zd", start, stop, m);
        goto done;
    }
    {
        const isa_table *t = current;
        const char *a = (const char *)A.buf, *wt = (const char *)W.buf, *offset = (const char *)C.buf;
        const part first = make_part(t, p, n, size, wt, offset, (char *)Z.buf);
        const part second = oZ2 ? make_part(t, p2, n, size, wt + p * ldw * size, offset + p * size, (char *)Z2.buf)
                                : first;
        const int any_blocked = first.blocked || (oZ2 && second.blocked);
        uint8_t *flags = (uint8_t *)F.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = start; i < stop;) {
            const int rows = any_blocked && stop - i >= t->block_rows ? t->block_rows : 1;
            /* within a block of rows, a part that is not blocked runs them one by one (in cache) */
            if (first.blocked || rows == 1) run_part(t, &first, size, a, n, ldw, i, rows, flags);
            else for (int r = 0; r < rows; r++) run_part(t, &first, size, a, n, ldw, i + r, 1, flags);
            if (oZ2) {
                if (second.blocked || rows == 1) run_part(t, &second, size, a, n, ldw, i, rows, NULL);
                else for (int r = 0; r < rows; r++) run_part(t, &second, size, a, n, ldw, i + r, 1, NULL);
            }
            i += rows;
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (A.obj) PyBuffer_Release(&A);
    if (W.obj) PyBuffer_Release(&W);
    if (Z.obj) PyBuffer_Release(&Z);
    if (F.obj) PyBuffer_Release(&F);
    if (C.obj) PyBuffer_Release(&C);
    if (Z2.obj) PyBuffer_Release(&Z2);
    return result;
}

void native_projection_init(void) {
    for (int i = 0; i < N_ISAS && current == NULL; i++)
        if (isa_supported(&ISAS[i])) current = &ISAS[i];
}
