/*
 * The RR secular equation, one object at a time (docs/math.md §3; restricted.py's
 * _newton_chunk is the same algorithm over numpy columns, and its docstring
 * the derivation). Per object, with a_j = λ_j c_j², w_j = gap_j + u:
 *
 *   q(u) = Σ a_j / w_j²,  φ(u) = q^{-1/2} - (β - λ_d + u)^{-1/2},
 *
 * safeguarded Newton from hi = λ_d + max(0, ‖ŷ‖² - β), taking the larger of
 * the Newton steps on φ and on h = q - (β - λ_d + u), restarting from lo or
 * bisecting when a step leaves the bracket.
 *
 * Why compiled: vectorised numpy spends ~25 array passes over (d, k) per
 * iteration, so the solve cost more than the projection; here four objects
 * run side by side in the lanes of one vector, from registers.
 *
 * Python API: secular(aT (d, k), beta (k,), proj_norm2 (k,), gap (d,),
 * in_group (d,) uint8, lam_d, max_iter, final_step_rtol, step_rtol,
 * u (k,) out, converged (k,) uint8 out, start, stop) -> iterations used by
 * the slowest column in start:stop. All floats are float64, C-contiguous.
 */
#include <float.h>
#include <math.h>

#include "native.h"

/* Dimensions the compiled solver takes (a stack block of MAX_D × 4 doubles); restricted.py
 * sends larger d to the numpy solver. */
#define MAX_D 256

static int get(PyObject *o, Py_buffer *b, int ndim, int itemsize, int writable, const char *name) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    const int ok = b->ndim == ndim && (itemsize == 8 ? native_float_size(b) == 8 : b->itemsize == itemsize);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "secular: %s must be a %d-D C-contiguous %s array", name, ndim,
                     itemsize == 8 ? "float64" : "uint8");
        return -1;
    }
    return 0;
}

typedef double f64x4 __attribute__((vector_size(32)));
typedef int64_t mask4 __attribute__((vector_size(32)));
enum { LANES = 4 };

/* Lane-wise helpers (GCC vector extensions; C has no vector ?: operator). Masks are 0 or -1. */
#define SELECT(m, a, b) ((f64x4)(((mask4)(a) & (m)) | ((mask4)(b) & ~(m))))
#define ABS(x) ((f64x4)((mask4)(x) & (mask4){INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}))
#define ANY(m) (((m)[0] | (m)[1] | (m)[2] | (m)[3]) != 0)
/* fmax: the larger, or the one that is not NaN (as C's fmax and numpy's np.fmax). */
#define FMAX(a, b) SELECT(((a) > (b)) | ((b) != (b)), a, b)
#define SQRT(x) \
    ((f64x4){__builtin_sqrt((x)[0]), __builtin_sqrt((x)[1]), __builtin_sqrt((x)[2]), __builtin_sqrt((x)[3])})

/* Four objects side by side, one per lane: the iteration of one object is a chain of dependent
 * divisions and square roots, so lanes (and the out-of-order core) overlap four chains. Lanes
 * that finish keep their result and stop updating; the block runs until its slowest lane is done.
 * a: (d, LANES) = λ_j c_j² of the four objects, row j contiguous. Returns the iterations run. */
#define SOLVE4(NAME, TARGET)                                                                          \
    TARGET static int NAME(const double *a, Py_ssize_t d, const double *beta_, const double *proj_norm2_,    \
                           const double *gap, const uint8_t *in_group, double lam_d, int max_iter,          \
                           double final_step_rtol, double step_rtol, const int64_t *active_, double *u_out, \
                           uint8_t *converged) {                                                            \
        f64x4 beta, proj_norm2;                                                                         \
        mask4 active;                                                                                   \
        memcpy(&beta, beta_, sizeof(beta));                                                             \
        memcpy(&proj_norm2, proj_norm2_, sizeof(proj_norm2));                                           \
        memcpy(&active, active_, sizeof(active));                                                       \
        const f64x4 zero = {0, 0, 0, 0}, eps8 = zero + 8 * DBL_EPSILON, bmd = beta - lam_d;             \
        f64x4 hi = lam_d + FMAX(zero, proj_norm2 - beta), aG = zero;                                    \
        for (Py_ssize_t j = 0; j < d; j++) {                                                            \
            f64x4 aj;                                                                                   \
            memcpy(&aj, a + j * LANES, sizeof(aj));                                                     \
            if (in_group[j]) aG += aj;                                                                  \
        }                                                                                               \
        f64x4 pole_lb = SQRT(aG / (bmd + hi));                                                          \
        pole_lb = SELECT(pole_lb - pole_lb == zero, pole_lb, zero); /* not finite -> 0 */              \
        f64x4 lo = FMAX(FMAX(zero, -bmd), pole_lb), u = hi;                                             \
        mask4 done_all = ~active, conv = {0, 0, 0, 0};                                                  \
        int it = 0;                                                                                     \
        while (ANY(~done_all) && it < max_iter) {                                                       \
            it++;                                                                                       \
            f64x4 q = zero, half_dq = zero;                                                             \
            for (Py_ssize_t j = 0; j < d; j++) {                                                        \
                f64x4 aj;                                                                               \
                memcpy(&aj, a + j * LANES, sizeof(aj));                                                 \
                const f64x4 r = 1.0 / (gap[j] + u), t = aj * r * r;                                     \
                q += t;                                                                                 \
                half_dq += t * r;                                                                       \
            }                                                                                           \
            const f64x4 su = bmd + u, rq = 1.0 / SQRT(q), rs = 1.0 / SQRT(su);                          \
            const f64x4 phi = rq - rs, dphi = rq * rq * rq * half_dq + 0.5 * rs * rs * rs;              \
            f64x4 un = FMAX(u - phi / dphi, u + (q - su) / (2.0 * half_dq + 1.0));                      \
            const mask4 right = phi > zero, live = ~done_all;                                           \
            hi = SELECT(right & live, u, hi);                                                           \
            lo = SELECT(~right & live, u, lo);                                                          \
            const mask4 small = (ABS(un - u) <= final_step_rtol * u) | (ABS(phi) <= eps8 * (rq + ABS(rs))); \
            const mask4 bad = ~((un >= lo) & (un <= hi)) & ~small;                                      \
            un = SELECT(bad, SELECT(u <= lo, 0.5 * (lo + hi), lo), un);                                 \
            const mask4 done = small | (hi - lo <= step_rtol * hi);                                     \
            u = SELECT(live, un, u);                                                                    \
            conv |= live & done;                                                                        \
            done_all |= done;                                                                           \
        }                                                                                               \
        memcpy(u_out, &u, sizeof(u));                                                                   \
        for (int l = 0; l < LANES; l++) converged[l] = conv[l] != 0;                                    \
        return it;                                                                                      \
    }

SOLVE4(solve4_avx2, __attribute__((target("avx2,fma"))))
SOLVE4(solve4_base, )

/* Vectors never cross the call: a 32-byte vector argument is passed differently with and without
 * AVX enabled, and the caller is compiled without it. */
typedef int (*solve4_fn)(const double *, Py_ssize_t, const double *, const double *, const double *, const uint8_t *,
                         double, int, double, double, const int64_t *, double *, uint8_t *);

PyObject *native_secular(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oa, *ob, *op, *og, *oi, *ou, *oc;
    double lam_d, final_step_rtol, step_rtol;
    int max_iter;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOOOOdiddOOnn", &oa, &ob, &op, &og, &oi, &lam_d, &max_iter, &final_step_rtol,
                          &step_rtol, &ou, &oc, &start, &stop))
        return NULL;
    Py_buffer a = {0}, b = {0}, p = {0}, g = {0}, in = {0}, u = {0}, c = {0};
    PyObject *result = NULL;
    if (get(oa, &a, 2, 8, 0, "aT") < 0 || get(ob, &b, 1, 8, 0, "beta") < 0 || get(op, &p, 1, 8, 0, "proj_norm2") < 0 ||
        get(og, &g, 1, 8, 0, "gap") < 0 || get(oi, &in, 1, 1, 0, "in_group") < 0 || get(ou, &u, 1, 8, 1, "u") < 0 ||
        get(oc, &c, 1, 1, 1, "converged") < 0)
        goto done;
    const Py_ssize_t d = a.shape[0], k = a.shape[1];
    if (b.shape[0] != k || p.shape[0] != k || u.shape[0] != k || c.shape[0] != k || g.shape[0] != d ||
        in.shape[0] != d) {
        PyErr_Format(PyExc_ValueError, "secular: aT is (%zd, %zd): beta, proj_norm2, u, converged need %zd entries, "
                     "gap and in_group %zd", d, k, k, d);
        goto done;
    }
    if (d > MAX_D) {
        PyErr_Format(PyExc_ValueError, "secular: d = %zd exceeds the %d dimensions the compiled solver takes", d, MAX_D);
        goto done;
    }
    if (start < 0 || stop > k || start > stop) {
        PyErr_Format(PyExc_ValueError, "secular: column range %zd:%zd outside 0:%zd", start, stop, k);
        goto done;
    }
    int iterations = 0;
    __builtin_cpu_init();
    const solve4_fn solve4 =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? solve4_avx2 : solve4_base;
    const double *aT = (const double *)a.buf, *beta = (const double *)b.buf, *pn2 = (const double *)p.buf;
    double *u_out = (double *)u.buf;
    uint8_t *conv_out = (uint8_t *)c.buf;
    Py_BEGIN_ALLOW_THREADS
    double block[MAX_D * LANES];
    for (Py_ssize_t i0 = start; i0 < stop; i0 += LANES) {
        /* the block's columns of aT side by side; lanes past stop repeat the last object, inactive */
        double bt[LANES], pn[LANES], ub[LANES];
        int64_t active[LANES];
        uint8_t cb[LANES];
        for (int l = 0; l < LANES; l++) {
            const Py_ssize_t i = i0 + l < stop ? i0 + l : stop - 1;
            for (Py_ssize_t j = 0; j < d; j++) block[j * LANES + l] = aT[j * k + i];
            bt[l] = beta[i];
            pn[l] = pn2[i];
            active[l] = i0 + l < stop ? -1 : 0;
        }
        const int it = solve4(block, d, bt, pn, (const double *)g.buf, (const uint8_t *)in.buf, lam_d, max_iter,
                              final_step_rtol, step_rtol, active, ub, cb);
        if (it > iterations) iterations = it;
        for (int l = 0; l < LANES && i0 + l < stop; l++) {
            u_out[i0 + l] = ub[l];
            conv_out[i0 + l] = cb[l];
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(iterations);
done:
    for (Py_buffer **it = (Py_buffer *[]){&a, &b, &p, &g, &in, &u, &c, NULL}; *it; it++)
        if ((*it)->obj) PyBuffer_Release(*it);
    return result;
}
