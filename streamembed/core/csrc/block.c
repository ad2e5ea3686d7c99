/*
 * Block RR's first start, one block at a time (docs/math.md §3.3; block/newton.py's trust_region_newton and
 * block/certificate.py's optimality_gap are the same algorithms over numpy stacks, and their docstrings the
 * derivation). Per block of k objects and d axes:
 *
 *   F(Y) = 2‖Y Λ^{1/2} − C‖² + ‖Y Yᵀ − β‖² + f0,
 *
 * trust-region Newton with Steihaug's truncated CG (diagonal preconditioner 4(Λ + diag Yᵀ Y)), the exact
 * change of F along a step, then the duality bound on F(Y*) − min F. The constants are newton.py's and
 * certificate.py's, passed in by the caller.
 *
 * Why compiled: numpy spends ~100 passes over (s, k, d) stacks per Newton iteration, many of them for
 * products of k×k and d×d matrices far too small for BLAS; here a block's matrices stay in L1.
 *
 * Python API: block_newton(Y (s, k, d) in/out, C (s, k, d), Beta (s, k, k), lam (d,), f0 (s,), max_iter,
 * constants (8,): [grad_rtol, step_rtol, cg_forcing, accept_ratio, cholesky_share, grid_lo, grid_hi, cg_floor],
 * f (s,) out, g_norm (s,) out, iterations (s,) int64 out, cg_iterations (s,) int64 out, converged (s,) uint8
 * out, gap (s,) out (NaN: the margin needs the smallest eigenvalue, which the caller computes), start, stop).
 * All floats are float64, C-contiguous.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "native.h"

/* Fused multiply-adds (setup.py's -ffp-contract=fast) in the kernels of instruction sets that have them, except for
 * small blocks (UNFUSED_BELOW_K, solve_range). */
/* (the 32-byte vectors of the baseline clone are inlined: no call passes one, whatever the ABI warning says) */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef struct {
    Py_ssize_t k, d;
    const double *lam, *C, *Beta;
    double *CT; /* the block's C, transposed */
    Py_ssize_t dp;  /* d rounded up to a multiple of 4 */
    double *Yr;     /* Y in (k, dp) row layout, the padding zero */
    double *Vr;     /* a step in the same layout (change()) */
    const double **rowsR, **rowsV, **rowsY; /* the rows of R (k), V and Y (d each) */
    double grid[64]; /* 2^j, j = grid_lo, grid_lo + 2, … < grid_hi */
    int n_grid;
    double sl[256];
    double f0, c_scale, beta_norm, grad_rtol, step_rtol, cg_forcing, accept_ratio, share, grid_lo, grid_hi, cg_floor;
    /* workspace: k·d each unless noted */
    double *RY /* k·d */, *P /* d·dp */, *Minv /* k·d: 1 / M */;
    double *Y, *E, *g, *R /* k·k */, *G /* d·dp */, *T /* d·dp */, *S, *z, *r, *y, *p, *Hp, *M, *Q /* k·k */;
    double f, g_norm, y_norm, g_scale;
} Block;

#define INLINE static inline __attribute__((always_inline))

/* ⟨a, b⟩ in eight interleaved partial sums (a sum taken in order is a chain of dependent additions the compiler
 * may not reorder; numpy's sums are blocked too, in another order: the difference is round-off). */
INLINE double dot(const double *a, const double *b, Py_ssize_t n) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int q = 0; q < 8; q++) s[q] += a[i + q] * b[i + q];
    double t = 0.0;
    for (; i < n; i++) t += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + t;
}

/* Layout: every (k, d) matrix of a block is held transposed, (d, k) row-major, so that the innermost loops
 * run along the block's k objects (contiguous, the longer dimension for small d); k×k and d×d are symmetric.
 * Yr and Vr hold Y and a step in (k, dp) row layout, dp = d rounded up to 4, the padding columns zero; G and
 * Tt are (d, dp).
 *
 * Every product is a sum of rows times coefficients (add_rows) or a Gram matrix (gram), the outputs held in
 * registers for the whole sum: a run of 16 consecutive outputs of two output rows at once (eight independent
 * chains of fused multiply-adds sharing each row's loads), and a Gram row's partial sums in four chains. */
typedef double v4 __attribute__((vector_size(32)));

INLINE v4 load4(const double *p) {
    v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE void store4(double *p, v4 v) { memcpy(p, &v, sizeof v); }

INLINE v4 bcast(double x) { return (v4){0, 0, 0, 0} + x; }

/* o0[i] += Σ_l c0[l] rows[l][i] and o1[i] += Σ_l c1[l] rows[l][i] (i < k, l < cnt). */
INLINE void add_rows2(double *restrict o0, double *restrict o1, const double *restrict c0, const double *restrict c1,
                      const double *const *restrict rows, Py_ssize_t k, Py_ssize_t cnt) {
    Py_ssize_t i = 0;
    for (; i + 16 <= k; i += 16) {
        v4 a0 = load4(o0 + i), a1 = load4(o0 + i + 4), a2 = load4(o0 + i + 8), a3 = load4(o0 + i + 12);
        v4 b0 = load4(o1 + i), b1 = load4(o1 + i + 4), b2 = load4(o1 + i + 8), b3 = load4(o1 + i + 12);
        for (Py_ssize_t l = 0; l < cnt; l++) {
            const double *m = rows[l] + i;
            const v4 m0 = load4(m), m1 = load4(m + 4), m2 = load4(m + 8), m3 = load4(m + 12);
            const v4 s = bcast(c0[l]), t = bcast(c1[l]);
            a0 += s * m0;
            a1 += s * m1;
            a2 += s * m2;
            a3 += s * m3;
            b0 += t * m0;
            b1 += t * m1;
            b2 += t * m2;
            b3 += t * m3;
        }
        store4(o0 + i, a0);
        store4(o0 + i + 4, a1);
        store4(o0 + i + 8, a2);
        store4(o0 + i + 12, a3);
        store4(o1 + i, b0);
        store4(o1 + i + 4, b1);
        store4(o1 + i + 8, b2);
        store4(o1 + i + 12, b3);
    }
    for (; i + 4 <= k; i += 4) {
        v4 a0 = load4(o0 + i), b0 = load4(o1 + i);
        for (Py_ssize_t l = 0; l < cnt; l++) {
            const v4 m0 = load4(rows[l] + i);
            a0 += bcast(c0[l]) * m0;
            b0 += bcast(c1[l]) * m0;
        }
        store4(o0 + i, a0);
        store4(o1 + i, b0);
    }
    for (; i < k; i++) {
        double a = o0[i], b = o1[i];
        for (Py_ssize_t l = 0; l < cnt; l++) {
            a += c0[l] * rows[l][i];
            b += c1[l] * rows[l][i];
        }
        o0[i] = a;
        o1[i] = b;
    }
}

/* o[i] += Σ_l c[l] rows[l][i]: add_rows2 for one output row. */
INLINE void add_rows1(double *restrict o, const double *restrict c, const double *const *restrict rows, Py_ssize_t k,
                      Py_ssize_t cnt) {
    Py_ssize_t i = 0;
    for (; i + 16 <= k; i += 16) {
        v4 a0 = load4(o + i), a1 = load4(o + i + 4), a2 = load4(o + i + 8), a3 = load4(o + i + 12);
        for (Py_ssize_t l = 0; l < cnt; l++) {
            const double *m = rows[l] + i;
            const v4 s = bcast(c[l]);
            a0 += s * load4(m);
            a1 += s * load4(m + 4);
            a2 += s * load4(m + 8);
            a3 += s * load4(m + 12);
        }
        store4(o + i, a0);
        store4(o + i + 4, a1);
        store4(o + i + 8, a2);
        store4(o + i + 12, a3);
    }
    for (; i + 4 <= k; i += 4) {
        v4 a0 = load4(o + i);
        for (Py_ssize_t l = 0; l < cnt; l++) a0 += bcast(c[l]) * load4(rows[l] + i);
        store4(o + i, a0);
    }
    for (; i < k; i++) {
        double a = o[i];
        for (Py_ssize_t l = 0; l < cnt; l++) a += c[l] * rows[l][i];
        o[i] = a;
    }
}

/* Output rows out[j] (j < nrow, stride k) += Σ_l coef(j)[l] rows[l] with coef(j) = coef + j · cstride: two rows at
 * a time. */
INLINE void add_rows(double *out, const double *coef, Py_ssize_t cstride, const double *const *rows, Py_ssize_t k,
                     Py_ssize_t nrow, Py_ssize_t cnt) {
    Py_ssize_t j = 0;
    for (; j + 2 <= nrow; j += 2)
        add_rows2(out + j * k, out + (j + 1) * k, coef + j * cstride, coef + (j + 1) * cstride, rows, k, cnt);
    if (j < nrow) add_rows1(out + j * k, coef + j * cstride, rows, k, cnt);
}

/* T[a][b] = Σ_i X[a][i] Xr[i][b] for a < d, b < dp: X (d, k), Xr (k, dp), T (d, dp), four chains per run of 4. */
INLINE void gram(const double *restrict X, const double *restrict Xr, double *restrict T, Py_ssize_t k, Py_ssize_t d,
                 Py_ssize_t dp) {
    for (Py_ssize_t a = 0; a < d; a++) {
        const double *x = X + a * k;
        for (Py_ssize_t b = 0; b < dp; b += 4) {
            v4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0}, s3 = {0, 0, 0, 0};
            Py_ssize_t i = 0;
            for (; i + 4 <= k; i += 4) {
                s0 += bcast(x[i]) * load4(Xr + i * dp + b);
                s1 += bcast(x[i + 1]) * load4(Xr + (i + 1) * dp + b);
                s2 += bcast(x[i + 2]) * load4(Xr + (i + 2) * dp + b);
                s3 += bcast(x[i + 3]) * load4(Xr + (i + 3) * dp + b);
            }
            for (; i < k; i++) s0 += bcast(x[i]) * load4(Xr + i * dp + b);
            store4(T + a * dp + b, (s0 + s1) + (s2 + s3));
        }
    }
}

/* E, R, G, f, g, ‖g‖, ‖Y‖ and the gradient's scale at B->Y (newton.py's _State). */
INLINE void evaluate(Block *B) {
    const Py_ssize_t k = B->k, d = B->d, dp = B->dp;
    const double *restrict Y = B->Y, *restrict C = B->C;
    double *restrict E = B->E, *restrict R = B->R, *restrict g = B->g, *restrict Yr = B->Yr;
    for (Py_ssize_t j = 0; j < d; j++)
        for (Py_ssize_t i = 0; i < k; i++) {
            E[j * k + i] = Y[j * k + i] * B->sl[j] - C[j * k + i];
            Yr[i * dp + j] = Y[j * k + i];
        }
    /* R[i, :] = −β[i, :] + Σ_j Y[j, i] Y[j, :] */
    for (Py_ssize_t a = 0; a < k * k; a++) R[a] = -B->Beta[a];
    add_rows(R, Yr, dp, B->rowsY, k, k, d);
    gram(Y, Yr, B->G, k, d, dp);
    B->f = 2.0 * dot(E, E, k * d) + dot(R, R, k * k) + B->f0;
    /* g[j, :] = 4 (E[j, :] √λ_j + (RY)[j, :]), (RY)[j, :] = Σ_l Y[j, l] R[l, :] (kept for change()) */
    double *restrict RY = B->RY;
    for (Py_ssize_t i = 0; i < k * d; i++) RY[i] = 0.0;
    add_rows(RY, Y, k, B->rowsR, k, d, k);
    for (Py_ssize_t j = 0; j < d; j++)
        for (Py_ssize_t i = 0; i < k; i++) g[j * k + i] = 4.0 * (E[j * k + i] * B->sl[j] + RY[j * k + i]);
    B->g_norm = sqrt(dot(g, g, k * d));
    B->y_norm = sqrt(dot(Y, Y, k * d));
    B->g_scale = 4.0 * (B->lam[0] * B->y_norm + B->c_scale + (B->y_norm * B->y_norm + B->beta_norm) * B->y_norm);
}

/* out = H[V] = 4 (V Λ + R V + V G + Y (Vᵀ Y)) at the current state (all transposed: Vᵀ R + G Vᵀ + Tt Yᵀ with
 * Tt = Yᵀ V, d × d). */
INLINE void hess(Block *B, const double *restrict V, double *restrict out, double *restrict RV) {
    const Py_ssize_t k = B->k, d = B->d, dp = B->dp;
    double *restrict T = B->P, *restrict Tt = B->T; /* P is free until change() */
    for (Py_ssize_t j = 0; j < d; j++) B->rowsV[j] = V + j * k;
    gram(V, B->Yr, T, k, d, dp); /* T = Vᵀ Y, then Tt = Tᵀ = Yᵀ V */
    for (Py_ssize_t a = 0; a < d; a++)
        for (Py_ssize_t b = 0; b < d; b++) Tt[a * dp + b] = T[b * dp + a];
    if (RV != NULL) { /* R V on its own as well (change() uses it) */
        for (Py_ssize_t i = 0; i < k * d; i++) RV[i] = 0.0;
        add_rows(RV, V, k, B->rowsR, k, d, k);
        for (Py_ssize_t j = 0; j < d; j++)
            for (Py_ssize_t i = 0; i < k; i++) out[j * k + i] = V[j * k + i] * B->lam[j] + RV[j * k + i];
    } else {
        for (Py_ssize_t j = 0; j < d; j++)
            for (Py_ssize_t i = 0; i < k; i++) out[j * k + i] = V[j * k + i] * B->lam[j];
        add_rows(out, V, k, B->rowsR, k, d, k);
    }
    add_rows(out, B->G, dp, B->rowsV, k, d, d);
    add_rows(out, Tt, dp, B->rowsY, k, d, d);
    for (Py_ssize_t i = 0; i < k * d; i++) out[i] *= 4.0;
}

/* F(Y + S) − F(Y) (newton.py's _State.change) without a k×k product: with Q = Y Sᵀ + S Yᵀ + S Sᵀ,
 *   ⟨R, Q⟩ = 2⟨R Y, S⟩ + ⟨R S, S⟩   (R Y from evaluate(), R S = RS from the step's Hessian product),
 *   ‖Q‖²   = 2⟨G, P⟩ + 2 tr(M²) + 4⟨M, P⟩ + ‖P‖²,   P = Sᵀ S, M = Sᵀ Y (d × d);
 * no difference of two values of F, so the acceptance ratio stays meaningful down to round-off (‖Q‖²'s terms are
 * of the size of ‖Y‖² ‖S‖², below the 2‖S Λ^{1/2}‖² ≥ 2 λ_d ‖S‖² of ΔF by the factor λ_d / ‖Y‖² at worst). */
INLINE double change(Block *B, const double *restrict S, const double *restrict RS) {
    const Py_ssize_t k = B->k, d = B->d, dp = B->dp;
    double *restrict Sr = B->Vr, *restrict M = B->T, *restrict P = B->P;
    double es = 0.0, ss = 0.0;
    for (Py_ssize_t j = 0; j < d; j++)
        for (Py_ssize_t i = 0; i < k; i++) {
            const double s = S[j * k + i] * B->sl[j];
            es += B->E[j * k + i] * s;
            ss += s * s;
            Sr[i * dp + j] = S[j * k + i];
        }
    const double rq = 2.0 * dot(B->RY, S, k * d) + dot(RS, S, k * d);
    gram(S, Sr, P, k, d, dp);
    gram(S, B->Yr, M, k, d, dp);
    double gp = 0.0, mm = 0.0, mp = 0.0, pp = 0.0;
    for (Py_ssize_t a = 0; a < d; a++)
        for (Py_ssize_t b = 0; b < d; b++) {
            const double pab = P[a * dp + b];
            gp += B->G[a * dp + b] * pab;
            mm += M[a * dp + b] * M[b * dp + a];
            mp += M[a * dp + b] * pab;
            pp += pab * pab;
        }
    const double qq = 2.0 * gp + 2.0 * mm + 4.0 * mp + pp;
    return 4.0 * es + 2.0 * ss + 2.0 * rq + qq;
}

/* Steihaug's truncated preconditioned CG within ‖s‖_M ≤ radius: the step into B->S; the CG iterations. */
INLINE int64_t steihaug(Block *B, double radius, Py_ssize_t max_cg) {
    const Py_ssize_t n = B->k * B->d;
    double *z = B->z, *r = B->r, *y = B->y, *p = B->p, *Hp = B->Hp;
    const double *Minv = B->Minv;
    const double scale = B->g_scale > DBL_MIN ? B->g_scale : DBL_MIN;
    const double rel = B->g_norm / scale, floor_eta = B->cg_floor * B->grad_rtol / (rel > DBL_MIN ? rel : DBL_MIN);
    double eta = sqrt(rel);
    if (floor_eta > eta) eta = floor_eta;
    if (B->cg_forcing < eta) eta = B->cg_forcing;
    const double r_stop = eta * B->g_norm, rad2 = radius * radius;
    for (Py_ssize_t i = 0; i < n; i++) {
        z[i] = 0.0;
        r[i] = B->g[i];
        y[i] = r[i] * Minv[i];
        p[i] = -y[i];
    }
    double ry = dot(r, y, n), zMz = 0.0, zMp = 0.0, pMp = ry;
    int64_t its = 0;
    for (Py_ssize_t it = 0; it < max_cg; it++) {
        hess(B, p, Hp, NULL);
        const double kappa = dot(p, Hp, n), alpha = ry / kappa;
        const double zMz_new = zMz + 2.0 * alpha * zMp + alpha * alpha * pMp;
        its++;
        if (!(kappa > 0) || zMz_new >= rad2) {
            const double q = zMp * zMp + pMp * (rad2 - zMz);
            const double tau = (sqrt(q > 0 ? q : 0.0) - zMp) / pMp;
            for (Py_ssize_t i = 0; i < n; i++) B->S[i] = z[i] + tau * p[i];
            return its;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            z[i] += alpha * p[i];
            r[i] += alpha * Hp[i];
        }
        if (sqrt(dot(r, r, n)) <= r_stop) {
            memcpy(B->S, z, (size_t)n * sizeof(double));
            return its;
        }
        for (Py_ssize_t i = 0; i < n; i++) y[i] = r[i] * Minv[i];
        const double ry_new = dot(r, y, n), beta = ry_new / ry;
        zMp = beta * (zMp + alpha * pMp);
        pMp = ry_new + beta * beta * pMp;
        zMz = zMz_new;
        ry = ry_new;
        for (Py_ssize_t i = 0; i < n; i++) p[i] = -y[i] + beta * p[i];
    }
    memcpy(B->S, z, (size_t)n * sizeof(double)); /* iteration limit: the last iterate */
    return its;
}

/* Trust-region Newton from B->Y (newton.py's trust_region_newton for one problem, no time budget). */
INLINE void newton(Block *B, int max_iter, int64_t *iterations, int64_t *cg_iterations, uint8_t *converged) {
    const Py_ssize_t k = B->k, d = B->d, n = k * d;
    evaluate(B);
    double size2 = 0.0;
    for (Py_ssize_t i = 0; i < k; i++) size2 += fabs(B->Beta[i * k + i]);
    if (B->y_norm * B->y_norm > size2) size2 = B->y_norm * B->y_norm;
    double radius = 2.0 * sqrt(4.0 * (B->lam[0] + size2) * (size2 > DBL_MIN ? size2 : DBL_MIN));
    int64_t its = 0, cg = 0;
    uint8_t conv = 0;
    for (int it = 0; it <= max_iter; it++) {
        const int done = B->g_norm <= B->grad_rtol * B->g_scale;
        if (done || it == max_iter) {
            conv = (uint8_t)done;
            break;
        }
        its++;
        for (Py_ssize_t j = 0; j < d; j++)
            for (Py_ssize_t i = 0; i < k; i++) {
                B->M[j * k + i] = 4.0 * (B->lam[j] + B->G[j * B->dp + j]);
                B->Minv[j * k + i] = 1.0 / B->M[j * k + i];
            }
        cg += steihaug(B, radius, n);
        hess(B, B->S, B->Hp, B->y); /* y (CG's) is free: R S, for change() */
        const double pred = -(dot(B->g, B->S, n) + 0.5 * dot(B->S, B->Hp, n));
        const double actual = -change(B, B->S, B->y);
        const double rho = pred > 0 ? actual / pred : -1.0;
        double smM = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) smM += B->S[i] * B->M[i] * B->S[i];
        const double s_norm_M = sqrt(smM);
        const int accept = rho > B->accept_ratio && actual > 0;
        const int grow = rho > 0.75 && s_norm_M >= 0.99 * radius;
        radius = rho < 0.25 ? 0.25 * s_norm_M : (grow ? 2.0 * radius : radius);
        const double s_norm = sqrt(dot(B->S, B->S, n));
        const int tiny_step = accept && s_norm <= B->step_rtol * B->y_norm;
        const int stuck = !accept && pred <= 0;
        if (accept)
            for (Py_ssize_t i = 0; i < n; i++) B->Y[i] += B->S[i];
        evaluate(B);
        if (tiny_step || stuck) {
            conv = 1;
            break;
        }
    }
    *iterations = its;
    *cg_iterations = cg;
    *converged = conv;
}

/* λ_min of the symmetric k×k matrix A (destroyed): Householder tridiagonalisation (the lower triangle; d, e
 * k-vectors of workspace), then bisection on the Sturm count of the tridiagonal matrix to the last bit. Backward
 * stable, as LAPACK's eigvalsh that certificate.py's numpy path calls: the two agree to a few ulps of ‖A‖. */
static double smallest_eigenvalue(double *restrict A, Py_ssize_t k, double *restrict dg, double *restrict e,
                                  double *restrict v, double *restrict p) {
    for (Py_ssize_t j = 0; j + 2 < k; j++) {
        const Py_ssize_t n = k - j - 1; /* the column below the diagonal, rows j+1 … k−1 */
        double xx = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            v[i] = A[(j + 1 + i) * k + j];
            xx += v[i] * v[i];
        }
        dg[j] = A[j * k + j];
        if (xx == 0.0) {
            e[j] = 0.0;
            continue;
        }
        const double alpha = v[0] > 0 ? -sqrt(xx) : sqrt(xx);
        e[j] = alpha;
        v[0] -= alpha;
        double vv = 0.0; /* ‖x − α e₁‖², no cancellation: α and x₀ have opposite signs */
        for (Py_ssize_t i = 0; i < n; i++) vv += v[i] * v[i];
        if (!(vv > 0)) continue;
        const double tau = 2.0 / vv;
        /* trailing block T ← H T H, H = I − τ v vᵀ: p = τ T v, q = p − (τ/2)(pᵀv) v, T −= v qᵀ + q vᵀ */
        double pv = 0.0;
        for (Py_ssize_t a = 0; a < n; a++) {
            const double *ta = A + (j + 1 + a) * k + (j + 1);
            double t = 0.0;
            for (Py_ssize_t b = 0; b < n; b++) t += ta[b] * v[b];
            p[a] = tau * t;
            pv += p[a] * v[a];
        }
        const double K = 0.5 * tau * pv;
        for (Py_ssize_t a = 0; a < n; a++) p[a] -= K * v[a];
        for (Py_ssize_t a = 0; a < n; a++) {
            double *ta = A + (j + 1 + a) * k + (j + 1);
            for (Py_ssize_t b = 0; b < n; b++) ta[b] -= v[a] * p[b] + p[a] * v[b];
        }
    }
    if (k >= 2) {
        dg[k - 2] = A[(k - 2) * k + (k - 2)];
        e[k - 2] = A[(k - 1) * k + (k - 2)];
    }
    dg[k - 1] = A[(k - 1) * k + (k - 1)];
    /* Gershgorin interval, then bisection: count(x) = eigenvalues < x */
    double lo = INFINITY, hi = -INFINITY, emax = 0.0;
    for (Py_ssize_t i = 0; i < k; i++) {
        const double r = (i > 0 ? fabs(e[i - 1]) : 0.0) + (i + 1 < k ? fabs(e[i]) : 0.0);
        if (dg[i] - r < lo) lo = dg[i] - r;
        if (dg[i] + r > hi) hi = dg[i] + r;
        if (i + 1 < k && fabs(e[i]) > emax) emax = fabs(e[i]);
    }
    if (!isfinite(lo) || !isfinite(hi)) return NAN;
    const double pivmin = DBL_MIN * (emax * emax > 1.0 ? emax * emax : 1.0);
    /* stop at a few ulps of the matrix's size (LAPACK's abstol for eigenvalues of a backward stable reduction) */
    const double atol = 4.0 * DBL_EPSILON * (fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi));
    /* quadrisection: the Sturm counts at four points of [lo, hi] in one vector pass (five subintervals) */
    for (int it = 0; it < 128 && hi - lo > atol; it++) {
        const double w = (hi - lo) / 5.0;
        const double xs[4] = {lo + w, lo + 2.0 * w, lo + 3.0 * w, lo + 4.0 * w};
        double q[4] = {1.0, 1.0, 1.0, 1.0}, c[4] = {0, 0, 0, 0};
        for (Py_ssize_t i = 0; i < k; i++) {
            const double e2 = i > 0 ? e[i - 1] * e[i - 1] : 0.0;
            for (int j = 0; j < 4; j++) { /* four independent chains of divisions */
                double t = dg[i] - xs[j] - (i > 0 ? e2 / q[j] : 0.0);
                if (fabs(t) < pivmin) t = -pivmin;
                q[j] = t;
                c[j] += t < 0;
            }
        }
        /* count(x) = eigenvalues below x: the smallest lies below the first point whose count is ≥ 1 */
        double nlo = xs[3], nhi = hi;
        for (int j = 0; j < 4; j++)
            if (c[j] >= 1.0) {
                nhi = xs[j];
                nlo = j > 0 ? xs[j - 1] : lo;
                break;
            }
        if (!(nhi - nlo < hi - lo)) break;
        lo = nlo;
        hi = nhi;
    }
    return 0.5 * (lo + hi);
}

/* The duality bound on F(Y) − min F at the current state (certificate.py's optimality_gap): the margin is
 * share · λ_d where R + (1 − share) λ_d I is positive definite (a Cholesky test), else λ_d + λ_min(R); NaN when
 * R is not finite (the caller's numpy then decides). */
INLINE double gap(Block *B) {
    const Py_ssize_t k = B->k, d = B->d;
    const double lam_min = B->lam[d - 1];
    /* Cholesky of the shifted R, in place in Q */
    for (Py_ssize_t i = 0; i < k * k; i++) B->Q[i] = B->R[i];
    for (Py_ssize_t i = 0; i < k; i++) B->Q[i * k + i] += (1.0 - B->share) * lam_min;
    int definite = 1;
    for (Py_ssize_t j = 0; j < k && definite; j++) {
        double s = B->Q[j * k + j];
        for (Py_ssize_t l = 0; l < j; l++) s -= B->Q[j * k + l] * B->Q[j * k + l];
        if (!(s > 0)) {
            definite = 0;
            break;
        }
        const double ljj = sqrt(s);
        B->Q[j * k + j] = ljj;
        for (Py_ssize_t i = j + 1; i < k; i++) {
            double t = B->Q[i * k + j];
            for (Py_ssize_t l = 0; l < j; l++) t -= B->Q[i * k + l] * B->Q[j * k + l];
            B->Q[i * k + j] = t / ljj;
        }
    }
    double exact = B->share * lam_min;
    if (!definite) {
        for (Py_ssize_t i = 0; i < k * k; i++) B->Q[i] = B->R[i];
        /* S, z, r, y (consecutive, 4kd ≥ 4k) are free once Newton has finished */
        const double mu = smallest_eigenvalue(B->Q, k, B->S, B->S + k, B->S + 2 * k, B->S + 3 * k);
        if (!isfinite(mu)) return NAN;
        exact = lam_min + mu;
    }
    const double y2 = B->y_norm * B->y_norm;
    const double margin = exact - 64 * DBL_EPSILON * ((double)k * y2 + B->beta_norm + lam_min);
    const double g_norm = B->g_norm + 64 * DBL_EPSILON * B->g_scale;
    const double m_ref = lam_min > fabs(margin) ? lam_min : fabs(margin);
    double best = INFINITY;
    for (int e = 0; e < B->n_grid; e++) {
        const double delta = m_ref * B->grid[e], eps = delta - margin;
        const double num = g_norm + 4.0 * fabs(eps) * B->y_norm;
        const double bound = (double)k * eps * eps + num * num / (8.0 * delta);
        if (bound < best) best = bound;
    }
    if (margin > 0) {
        const double bound = g_norm * g_norm / (8.0 * margin);
        if (bound < best) best = bound;
    }
    return best;
}

/* The same code for three instruction sets (every helper above is inlined into each), the best one the CPU
 * runs picked at load time. */
INLINE void solve_range_body(Block *B, double *Y, const double *C, const double *Beta, const double *f0, int max_iter,
                        double *f, double *g_norm, int64_t *its, int64_t *cg, uint8_t *conv, double *gaps,
                        Py_ssize_t start, Py_ssize_t stop) {
    const Py_ssize_t k = B->k, d = B->d, kd = k * d, kk = k * k;
    for (Py_ssize_t b = start; b < stop; b++) {
        const double *Cb = C + b * kd, *Yb = Y + b * kd;
        for (Py_ssize_t i = 0; i < k; i++)
            for (Py_ssize_t j = 0; j < d; j++) {
                B->CT[j * k + i] = Cb[i * d + j];
                B->Y[j * k + i] = Yb[i * d + j];
            }
        B->C = B->CT;
        B->Beta = Beta + b * kk;
        B->f0 = f0[b];
        B->c_scale = sqrt(dot(B->C, B->C, kd)) * B->sl[0];
        B->beta_norm = sqrt(dot(B->Beta, B->Beta, kk));
        newton(B, max_iter, its + b, cg + b, conv + b);
        double *Yo = Y + b * kd;
        for (Py_ssize_t i = 0; i < k; i++)
            for (Py_ssize_t j = 0; j < d; j++) Yo[i * d + j] = B->Y[j * k + i];
        f[b] = B->f;
        g_norm[b] = B->g_norm;
        gaps[b] = gap(B);
    }
}

/* Blocks of fewer members are solved without fused multiply-adds: each product rounded alone keeps the
 * arithmetic symmetric between mirror-image members, as numpy's is, so that such members come out exactly
 * mirrored (the two-object reference case of docs/math.md §6). A fused a·b + c rounds once and breaks the tie
 * between two sums taken in a different order. Larger blocks take the fused kernels (the k²d products dominate). */
#define UNFUSED_BELOW_K 8
#define SOLVE_RANGE_ARGS                                                                                            \
    Block *B, double *Y, const double *C, const double *Beta, const double *f0, int max_iter, double *f,          \
        double *g_norm, int64_t *its, int64_t *cg, uint8_t *conv, double *gaps, Py_ssize_t start, Py_ssize_t stop
#define SOLVE_RANGE_CALL solve_range_body(B, Y, C, Beta, f0, max_iter, f, g_norm, its, cg, conv, gaps, start, stop)
__attribute__((target("avx512f,avx512dq,avx512vl,fma"))) static void solve_range_avx512(SOLVE_RANGE_ARGS) { SOLVE_RANGE_CALL; }
__attribute__((target("avx2,fma"))) static void solve_range_avx2(SOLVE_RANGE_ARGS) { SOLVE_RANGE_CALL; }
__attribute__((target("avx2"))) static void solve_range_avx2_unfused(SOLVE_RANGE_ARGS) { SOLVE_RANGE_CALL; }
static void solve_range_base(SOLVE_RANGE_ARGS) { SOLVE_RANGE_CALL; }

/* The kernels of the instruction set set_isa chose (the best this CPU runs unless a test chose another),
 * so that every variant can be run and checked on one machine. */
static void solve_range(SOLVE_RANGE_ARGS) {
    const char *isa = native_kernel_isa();
    const int avx512 = strcmp(isa, "avx512") == 0, avx2 = avx512 || strcmp(isa, "avx2") == 0;
    if (B->k < UNFUSED_BELOW_K && avx2)
        solve_range_avx2_unfused(B, Y, C, Beta, f0, max_iter, f, g_norm, its, cg, conv, gaps, start, stop);
    else if (avx512)
        solve_range_avx512(B, Y, C, Beta, f0, max_iter, f, g_norm, its, cg, conv, gaps, start, stop);
    else if (avx2)
        solve_range_avx2(B, Y, C, Beta, f0, max_iter, f, g_norm, its, cg, conv, gaps, start, stop);
    else
        solve_range_base(B, Y, C, Beta, f0, max_iter, f, g_norm, its, cg, conv, gaps, start, stop);
}

static int get(PyObject *o, Py_buffer *b, int ndim, int itemsize, int writable, const char *name) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    const int ok = b->ndim == ndim && (itemsize == 8 && strcmp(name, "iterations") && strcmp(name, "cg_iterations")
                                           ? native_float_size(b) == 8 : b->itemsize == itemsize);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "block_newton: %s must be a %d-D C-contiguous array of %d-byte items", name,
                     ndim, itemsize);
        return -1;
    }
    return 0;
}

PyObject *native_block_newton(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oY, *oC, *oB, *ol, *of0, *oc, *of, *og, *oi, *ocg, *ocv, *ogap;
    int max_iter;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOOOOiOOOOOOOnn", &oY, &oC, &oB, &ol, &of0, &max_iter, &oc, &of, &og, &oi, &ocg,
                          &ocv, &ogap, &start, &stop))
        return NULL;
    Py_buffer Y = {0}, C = {0}, Bt = {0}, lam = {0}, f0 = {0}, cst = {0}, f = {0}, g = {0}, it = {0}, cg = {0},
              cv = {0}, gp = {0};
    PyObject *result = NULL;
    double *work = NULL;
    const double **ptrs = NULL;
    if (get(oY, &Y, 3, 8, 1, "Y") < 0 || get(oC, &C, 3, 8, 0, "C") < 0 || get(oB, &Bt, 3, 8, 0, "Beta") < 0 ||
        get(ol, &lam, 1, 8, 0, "lam") < 0 || get(of0, &f0, 1, 8, 0, "f0") < 0 || get(oc, &cst, 1, 8, 0, "constants") < 0 ||
        get(of, &f, 1, 8, 1, "f") < 0 || get(og, &g, 1, 8, 1, "g_norm") < 0 || get(oi, &it, 1, 8, 1, "iterations") < 0 ||
        get(ocg, &cg, 1, 8, 1, "cg_iterations") < 0 || get(ocv, &cv, 1, 1, 1, "converged") < 0 ||
        get(ogap, &gp, 1, 8, 1, "gap") < 0)
        goto done;
    const Py_ssize_t s = Y.shape[0], k = Y.shape[1], d = Y.shape[2];
    if (C.shape[0] != s || C.shape[1] != k || C.shape[2] != d || Bt.shape[0] != s || Bt.shape[1] != k ||
        Bt.shape[2] != k || lam.shape[0] != d || f0.shape[0] != s || cst.shape[0] != 8 || f.shape[0] != s ||
        g.shape[0] != s || it.shape[0] != s || cg.shape[0] != s || cv.shape[0] != s || gp.shape[0] != s) {
        PyErr_SetString(PyExc_ValueError, "block_newton: inconsistent shapes");
        goto done;
    }
    if (d < 1 || d > 256 || k < 1 || start < 0 || stop > s || start > stop) {
        PyErr_Format(PyExc_ValueError, "block_newton: needs 1 ≤ d ≤ 256, k ≥ 1 and 0 ≤ start ≤ stop ≤ %zd", s);
        goto done;
    }
    const Py_ssize_t kd = k * d, kk = k * k;
    const Py_ssize_t dp = (d + 3) / 4 * 4;
    work = calloc((size_t)(13 * kd + 2 * k * dp + 2 * kk + 3 * d * dp), sizeof(double)); /* zero: the padding */
    ptrs = malloc((size_t)(k + 2 * d) * sizeof(double *));
    if (work == NULL || ptrs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Block B;
    memset(&B, 0, sizeof(B));
    B.k = k;
    B.d = d;
    B.lam = (const double *)lam.buf;
    for (Py_ssize_t j = 0; j < d; j++) B.sl[j] = sqrt(B.lam[j]);
    const double *c = (const double *)cst.buf;
    B.grad_rtol = c[0];
    B.step_rtol = c[1];
    B.cg_forcing = c[2];
    B.accept_ratio = c[3];
    B.share = c[4];
    B.grid_lo = c[5];
    B.grid_hi = c[6];
    B.cg_floor = c[7];
    for (double e = B.grid_lo; e < B.grid_hi && B.n_grid < 64; e += 2.0) B.grid[B.n_grid++] = exp2(e);
    double *w = work;
    B.Y = w, w += kd;
    B.E = w, w += kd;
    B.g = w, w += kd;
    B.S = w, w += kd;
    B.z = w, w += kd;
    B.r = w, w += kd;
    B.y = w, w += kd;
    B.p = w, w += kd;
    B.Hp = w, w += kd;
    B.M = w, w += kd;
    B.CT = w, w += kd;
    B.dp = dp;
    B.Yr = w, w += k * dp;
    B.Vr = w, w += k * dp;
    B.R = w, w += kk;
    B.Q = w, w += kk;
    B.G = w, w += d * dp;
    B.P = w, w += d * dp;
    B.RY = w, w += kd;
    B.Minv = w, w += kd;
    B.T = w;
    B.rowsR = ptrs;
    B.rowsV = ptrs + k;
    B.rowsY = ptrs + k + d;
    for (Py_ssize_t l = 0; l < k; l++) B.rowsR[l] = B.R + l * k;
    for (Py_ssize_t j = 0; j < d; j++) B.rowsY[j] = B.Y + j * k;
    Py_BEGIN_ALLOW_THREADS
    solve_range(&B, (double *)Y.buf, (const double *)C.buf, (const double *)Bt.buf, (const double *)f0.buf, max_iter,
                (double *)f.buf, (double *)g.buf, (int64_t *)it.buf, (int64_t *)cg.buf, (uint8_t *)cv.buf,
                (double *)gp.buf, start, stop);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(work);
    free(ptrs);
    for (Py_buffer **b = (Py_buffer *[]){&Y, &C, &Bt, &lam, &f0, &cst, &f, &g, &it, &cg, &cv, &gp, NULL}; *b; b++)
        if ((*b)->obj) PyBuffer_Release(*b);
    return result;
}

/*
 * The rows of a batch of blocks, centred (block/prepare.py's centre_rows: docs/math.md §2): per row a of A
 * (rows start:stop), with ā = mean a², B = −½ (a² − ā − shift) written to row i − start of Bout, ‖B‖², ā, and
 * whether the row has a negative, NaN or infinite entry (then its B is 0 and ‖B‖² NaN). The caller multiplies
 * Bout by the eigenvectors (BLAS). A float32 or float64 (m, n); shift (n,), Bout (≥ stop − start, n), b2, abar
 * (m,) float64; bad (m,) uint8. Python API: block_rows(A, shift, Bout, b2, abar, bad, start, stop), GIL released.
 */
/* Each row's two sums (ā and ‖B‖²) are taken in eight interleaved partial sums (as dot()), which the compiler
 * keeps in vector registers: a sum taken in order is a chain of dependent additions at the adder's latency.
 * numpy's reference sums pairwise, in another order: the two agree to round-off. */
typedef long long i4 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));
INLINE v4 LOAD_ROW4_float(const float *p) {
    f4 v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, v4);
}
INLINE v4 LOAD_ROW4_double(const double *p) { return load4(p); }
#define ROWS_BODY(T)                                                                                           \
    for (Py_ssize_t i = start; i < stop; i++) {                                                                \
        const T *a = (const T *)A + i * n;                                                                     \
        double *row = Bout + (i - start) * n;                                                                  \
        v4 s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};                                                               \
        i4 bad_lanes = {0, 0, 0, 0};                                                                           \
        const v4 zero = {0, 0, 0, 0}, inf = bcast(INFINITY);                                                   \
        Py_ssize_t j = 0;                                                                                      \
        for (; j + 8 <= n; j += 8) {                                                                           \
            const v4 x0 = LOAD_ROW4_##T(a + j), x1 = LOAD_ROW4_##T(a + j + 4);                                 \
            bad_lanes |= ~((x0 >= zero) & (x0 != inf)) | ~((x1 >= zero) & (x1 != inf));                        \
            const v4 y0 = x0 * x0, y1 = x1 * x1;                                                               \
            store4(row + j, y0);                                                                               \
            store4(row + j + 4, y1);                                                                           \
            s0 += y0;                                                                                          \
            s1 += y1;                                                                                          \
        }                                                                                                      \
        double tail = 0.0;                                                                                     \
        int row_bad = 0;                                                                                       \
        for (; j < n; j++) {                                                                                   \
            const double x = (double)a[j];                                                                     \
            row_bad |= !(x >= 0) | (x == INFINITY);                                                            \
            row[j] = x * x;                                                                                    \
            tail += x * x;                                                                                     \
        }                                                                                                      \
        for (int q = 0; q < 4; q++) row_bad |= bad_lanes[q] != 0;                                              \
        bad[i] = (uint8_t)row_bad;                                                                             \
        const v4 s01 = s0 + s1;                                                                                \
        const double ab = (((s01[0] + s01[2]) + (s01[1] + s01[3])) + tail) / (double)n;                        \
        abar[i] = ab;                                                                                          \
        if (row_bad) {                                                                                         \
            for (Py_ssize_t l = 0; l < n; l++) row[l] = 0.0;                                                   \
            b2[i] = NAN;                                                                                       \
            continue;                                                                                          \
        }                                                                                                      \
        v4 t0 = {0, 0, 0, 0}, t1 = {0, 0, 0, 0};                                                               \
        const v4 vab = bcast(ab), half = bcast(-0.5);                                                          \
        j = 0;                                                                                                 \
        for (; j + 8 <= n; j += 8) {                                                                           \
            const v4 c0 = half * (load4(row + j) - vab - load4(shift + j));                                    \
            const v4 c1 = half * (load4(row + j + 4) - vab - load4(shift + j + 4));                            \
            store4(row + j, c0);                                                                               \
            store4(row + j + 4, c1);                                                                           \
            t0 += c0 * c0;                                                                                     \
            t1 += c1 * c1;                                                                                     \
        }                                                                                                      \
        double tt = 0.0;                                                                                       \
        for (; j < n; j++) {                                                                                   \
            const double c = -0.5 * (row[j] - ab - shift[j]);                                                  \
            row[j] = c;                                                                                        \
            tt += c * c;                                                                                       \
        }                                                                                                      \
        const v4 t01 = t0 + t1;                                                                                \
        b2[i] = ((t01[0] + t01[2]) + (t01[1] + t01[3])) + tt;                                                  \
    }

__attribute__((target_clones("avx2", "default")))
static void rows_f32(const float *A, Py_ssize_t n, const double *shift, double *Bout, double *b2, double *abar,
                     uint8_t *bad, Py_ssize_t start, Py_ssize_t stop) {
    ROWS_BODY(float)
}

__attribute__((target_clones("avx2", "default")))
static void rows_f64(const double *A, Py_ssize_t n, const double *shift, double *Bout, double *b2, double *abar,
                     uint8_t *bad, Py_ssize_t start, Py_ssize_t stop) {
    ROWS_BODY(double)
}

PyObject *native_block_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oA, *os, *oB, *ob, *oa, *obad;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOOOOOnn", &oA, &os, &oB, &ob, &oa, &obad, &start, &stop)) return NULL;
    Py_buffer A = {0}, sh = {0}, Bo = {0}, b2 = {0}, ab = {0}, bad = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(oA, &A, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    const int size = native_float_size(&A);
    if (A.ndim != 2 || size == 0) {
        PyErr_SetString(PyExc_TypeError, "block_rows: A must be a 2-D C-contiguous float32 or float64 array");
        goto done;
    }
    if (get(os, &sh, 1, 8, 0, "shift") < 0 || get(oB, &Bo, 2, 8, 1, "Bout") < 0 || get(ob, &b2, 1, 8, 1, "b2") < 0 ||
        get(oa, &ab, 1, 8, 1, "abar") < 0 || get(obad, &bad, 1, 1, 1, "bad") < 0)
        goto done;
    const Py_ssize_t m = A.shape[0], n = A.shape[1];
    if (sh.shape[0] != n || Bo.shape[1] != n || Bo.shape[0] < stop - start || b2.shape[0] != m || ab.shape[0] != m ||
        bad.shape[0] != m || n < 1 || start < 0 || stop > m || start > stop) {
        PyErr_SetString(PyExc_ValueError, "block_rows: inconsistent shapes or row range");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (size == 4)
        rows_f32((const float *)A.buf, n, (const double *)sh.buf, (double *)Bo.buf, (double *)b2.buf,
                 (double *)ab.buf, (uint8_t *)bad.buf, start, stop);
    else
        rows_f64((const double *)A.buf, n, (const double *)sh.buf, (double *)Bo.buf, (double *)b2.buf,
                 (double *)ab.buf, (uint8_t *)bad.buf, start, stop);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (Py_buffer **b = (Py_buffer *[]){&A, &sh, &Bo, &b2, &ab, &bad, NULL}; *b; b++)
        if ((*b)->obj) PyBuffer_Release(*b);
    return result;
}

/*
 * The inconsistent_block flag (block/consistency.py's inconsistent_blocks, docs/math.md §4.3), one block at a time in
 * L1: per block b of k = sizes[b] members (rows of coords consecutive, its β the next k² entries of beta), whether
 * K0 + shift[b] I, K0 = ½(β + βᵀ) − Ŷ_r Ŷ_rᵀ, has no Cholesky factor (an eigenvalue below −shift[b]) or a non-finite
 * entry. Python API: block_consistency(coords (m, r), beta (Σ k²,), sizes (nb,) int64, shift (nb,), out (nb,) uint8),
 * float64, C-contiguous, GIL released.
 */
static void consistency_range(const double *coords, Py_ssize_t r, const double *beta, const int64_t *sizes,
                              const double *shift, uint8_t *out, Py_ssize_t nb, double *L) {
    const double *y = coords, *bt = beta;
    for (Py_ssize_t b = 0; b < nb; b++) {
        const Py_ssize_t k = (Py_ssize_t)sizes[b];
        int bad = 0;
        for (Py_ssize_t i = 0; i < k; i++)
            for (Py_ssize_t j = 0; j <= i; j++) {
                const double *yi = y + i * r, *yj = y + j * r;
                double s = 0.0;
                for (Py_ssize_t c = 0; c < r; c++) s += yi[c] * yj[c];
                double v = 0.5 * (bt[i * k + j] + bt[j * k + i]) - s;
                if (i == j) v += shift[b];
                if (!isfinite(v)) bad = 1;
                L[i * k + j] = v;
            }
        for (Py_ssize_t j = 0; j < k && !bad; j++) {
            double s = L[j * k + j];
            for (Py_ssize_t l = 0; l < j; l++) s -= L[j * k + l] * L[j * k + l];
            if (!(s > 0)) {
                bad = 1;
                break;
            }
            const double ljj = sqrt(s);
            L[j * k + j] = ljj;
            for (Py_ssize_t i = j + 1; i < k; i++) {
                double t = L[i * k + j];
                for (Py_ssize_t l = 0; l < j; l++) t -= L[i * k + l] * L[j * k + l];
                L[i * k + j] = t / ljj;
            }
        }
        out[b] = (uint8_t)bad;
        y += k * r;
        bt += k * k;
    }
}

PyObject *native_block_consistency(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oc, *ob, *os, *osh, *oo;
    if (!PyArg_ParseTuple(args, "OOOOO", &oc, &ob, &os, &osh, &oo)) return NULL;
    Py_buffer c = {0}, bt = {0}, sz = {0}, sh = {0}, o = {0};
    PyObject *result = NULL;
    double *L = NULL;
    if (get(oc, &c, 2, 8, 0, "coords") < 0 || get(ob, &bt, 1, 8, 0, "beta") < 0 || get(osh, &sh, 1, 8, 0, "shift") < 0 ||
        get(oo, &o, 1, 1, 1, "out") < 0)
        goto done;
    if (PyObject_GetBuffer(os, &sz, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (sz.ndim != 1 || sz.itemsize != 8 || (sz.format && strchr("qlQL", sz.format[strlen(sz.format) - 1]) == NULL)) {
        PyErr_SetString(PyExc_TypeError, "block_consistency: sizes must be a 1-D int64 array");
        goto done;
    }
    const Py_ssize_t nb = sz.shape[0], m = c.shape[0], r = c.shape[1];
    const int64_t *sizes = (const int64_t *)sz.buf;
    Py_ssize_t rows = 0, kk = 0, kmax = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        if (sizes[b] < 1) {
            PyErr_SetString(PyExc_ValueError, "block_consistency: block sizes must be ≥ 1");
            goto done;
        }
        rows += sizes[b];
        kk += sizes[b] * sizes[b];
        if (sizes[b] > kmax) kmax = sizes[b];
    }
    if (rows != m || kk != bt.shape[0] || sh.shape[0] != nb || o.shape[0] != nb) {
        PyErr_SetString(PyExc_ValueError, "block_consistency: inconsistent shapes");
        goto done;
    }
    L = malloc((size_t)(kmax * kmax > 0 ? kmax * kmax : 1) * sizeof(double));
    if (L == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    consistency_range((const double *)c.buf, r, (const double *)bt.buf, sizes, (const double *)sh.buf,
                      (uint8_t *)o.buf, nb, L);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(L);
    for (Py_buffer **b = (Py_buffer *[]){&c, &bt, &sz, &sh, &o, NULL}; *b; b++)
        if ((*b)->obj) PyBuffer_Release(*b);
    return result;
}

/*
 * The entry checks of a stack of mutual dissimilarity matrices (block/prepare.py's _entry_problems) in one pass
 * each: bad[b] = 1 if M[b] has a NaN, infinite or negative entry, a diagonal entry or an asymmetry |x_ij − x_ji|
 * beyond rtol · max |x| (the caller then describes the first problem); largest[b] = the largest |x| of a finite
 * entry (block/prepare.py's _out_of_range squares it). Python API: block_cross(M (s, k, k) float64, rtol,
 * bad (s,) uint8, largest (s,) float64), GIL released.
 */
static void cross_range(const double *M, Py_ssize_t s, Py_ssize_t k, double rtol, uint8_t *bad, double *worst) {
    for (Py_ssize_t b = 0; b < s; b++) {
        const double *x = M + b * k * k;
        double hi = 0.0;
        int suspect = 0;
        for (Py_ssize_t a = 0; a < k * k; a++) {
            const double v = x[a];
            suspect |= !(v >= 0) | (v == INFINITY);
            const double av = fabs(v);
            if (isfinite(av) && av > hi) hi = av;
        }
        worst[b] = hi;
        if (suspect) {
            bad[b] = 1;
            continue;
        }
        const double tol = rtol * hi;
        int off = 0;
        for (Py_ssize_t i = 0; i < k && !off; i++) {
            off |= fabs(x[i * k + i]) > tol;
            for (Py_ssize_t j = 0; j < i; j++) off |= fabs(x[i * k + j] - x[j * k + i]) > tol;
        }
        bad[b] = (uint8_t)off;
    }
}

PyObject *native_block_cross(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oM, *ob, *ow;
    double rtol;
    if (!PyArg_ParseTuple(args, "OdOO", &oM, &rtol, &ob, &ow)) return NULL;
    Py_buffer M = {0}, bd = {0}, w = {0};
    PyObject *result = NULL;
    if (get(oM, &M, 3, 8, 0, "M") < 0 || get(ob, &bd, 1, 1, 1, "bad") < 0 || get(ow, &w, 1, 8, 1, "worst") < 0)
        goto done;
    const Py_ssize_t s = M.shape[0], k = M.shape[1];
    if (M.shape[2] != k || bd.shape[0] != s || w.shape[0] != s) {
        PyErr_SetString(PyExc_ValueError, "block_cross: inconsistent shapes");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    cross_range((const double *)M.buf, s, k, rtol, (uint8_t *)bd.buf, (double *)w.buf);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (Py_buffer **b = (Py_buffer *[]){&M, &bd, &w, NULL}; *b; b++)
        if ((*b)->obj) PyBuffer_Release(*b);
    return result;
}
