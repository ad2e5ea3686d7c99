"""One suite of checks run over every placement method and model option.

As River's ``checks/`` run the same generic checks over every estimator,
every option below (each method, each landmark map with the methods it
allows, similarity input, landmark Isomap, Cailliez's correction; blocks via
``embed(A, C)``) goes through the same properties:

* in-span exactness (docs/math.md §6): objects in the plane of planar
  Euclidean landmarks are placed at their true distances from every landmark
  — where it applies (not to geodesic distances, which are not the plane's);
* landmark-permutation invariance: fitting on permuted landmarks and
  embedding the correspondingly permuted rows gives the same placements, up
  to the map's rotation or reflection (compared through distances to the
  landmarks);
* batch independence of single-object placements:
  ``embed(A).y[i] == embed(A[i:i+1]).y[0]`` (with its flags);
* save/load round-trip: a reloaded model places every row identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from streamembed import LandmarkMDS

from ..conftest import euclidean


@dataclass(frozen=True)
class Option:
    """One model option: its parameters, the kind of input it takes, and which checks apply."""

    name: str
    params: dict = field(default_factory=dict)
    #: "dissimilarity", "similarity" (linear kernel rows + k(z, z)), "city_block" (non-Euclidean) or
    #: "grid" (city block between integer points: tied dissimilarities)
    data: str = "dissimilarity"
    block: bool = False  # embed(A, C): block restricted reconstruction
    in_span: bool = True  # in-span exactness applies


OPTIONS = [
    Option("projection", {"method": "projection"}),
    Option("restricted", {"method": "restricted"}),
    Option("stress", {"method": "stress"}),
    Option("l1", {"method": "l1"}),
    Option("block", {"method": "restricted"}, block=True),
    Option("smacof+stress", {"method": "stress", "landmark_map": "smacof"}),
    Option("smacof+l1", {"method": "l1", "landmark_map": "smacof"}),
    Option("sammon+stress", {"method": "stress", "landmark_map": "sammon"}),
    Option("sammon+l1", {"method": "l1", "landmark_map": "sammon"}),
    Option("similarity+projection", {"input": "similarity"}, data="similarity"),
    Option("similarity+restricted", {"input": "similarity", "method": "restricted"}, data="similarity"),
    Option("similarity+stress", {"input": "similarity", "method": "stress"}, data="similarity"),
    Option("similarity+block", {"input": "similarity", "method": "restricted"}, data="similarity", block=True),
    Option("geodesic+projection", {"geodesic_neighbors": 6}, in_span=False),
    Option("geodesic+restricted", {"geodesic_neighbors": 6, "method": "restricted"}, in_span=False),
    Option("geodesic+l1", {"geodesic_neighbors": 6, "method": "l1"}, in_span=False),
    Option("geodesic+block", {"geodesic_neighbors": 6, "method": "restricted"}, block=True, in_span=False),
    Option("geodesic+projection, tied", {"geodesic_neighbors": 3}, data="grid", in_span=False),
    Option("geodesic+stress, tied", {"geodesic_neighbors": 3, "method": "stress"}, data="grid", in_span=False),
    Option("cailliez+projection", {"correction": "cailliez"}, data="city_block"),
    Option("cailliez+restricted", {"correction": "cailliez", "method": "restricted"}, data="city_block"),
    Option("cailliez+stress", {"correction": "cailliez", "method": "stress"}, data="city_block"),
    Option("cailliez+block", {"correction": "cailliez", "method": "restricted"}, data="city_block", block=True),
]
IDS = [o.name for o in OPTIONS]


@dataclass
class Problem:
    """Fit input (n, n), arrivals' rows A (m, n) or (m, n + 1), their mutual C (m, m), and the truth."""

    fit_input: np.ndarray
    A: np.ndarray
    C: np.ndarray
    true_distances: np.ndarray  # (m, n) distances of the arrivals to the landmarks in feature space

    def permuted(self, perm: np.ndarray) -> Problem:
        """The same problem with the landmarks in the order ``perm`` (a k(z, z) column stays last)."""
        n = perm.size
        cols = np.concatenate([perm, np.arange(n, self.A.shape[1])])
        return Problem(self.fit_input[np.ix_(perm, perm)], self.A[:, cols], self.C, self.true_distances[:, perm])


def make_problem(option: Option, in_span: bool, seed: int = 0, n: int = 14, m: int = 6) -> Problem:
    """Landmarks in R² (in span) or R⁴ (off span), arrivals likewise, as the option's input kind."""
    rng = np.random.default_rng(seed)
    p = 2 if in_span else 4
    L = rng.normal(size=(n, p)) * [3.0, 2.0, 1.0, 0.7][:p]
    Z = rng.normal(size=(m, p)) * [3.0, 2.0, 1.0, 0.7][:p]
    if option.data == "similarity":
        K_rows = Z @ L.T
        A = K_rows if option.block else np.hstack([K_rows, np.square(Z).sum(axis=1)[:, None]])
        return Problem(L @ L.T, A, Z @ Z.T, euclidean(Z, L))
    cb = lambda P, Q: np.abs(P[:, None, :] - Q[None, :, :]).sum(axis=-1).astype(np.float64)  # noqa: E731
    if option.data == "city_block" and not in_span:
        return Problem(cb(L, L), cb(Z, L), cb(Z, Z), cb(Z, L))
    if option.data == "grid":
        L = rng.permutation(np.unique(rng.integers(0, 5, size=(4 * n, 3)), axis=0))[:n]
        Z = rng.integers(0, 5, size=(m, 3))
        return Problem(cb(L, L), cb(Z, L), cb(Z, Z), cb(Z, L))
    return Problem(euclidean(L, L), euclidean(Z, L), euclidean(Z, Z), euclidean(Z, L))


def fit(option: Option, problem: Problem) -> LandmarkMDS:
    return LandmarkMDS(2, **option.params).fit(problem.fit_input)


def place(est: LandmarkMDS, option: Option, problem: Problem):
    return est.embed(problem.A, problem.C) if option.block else est.embed(problem.A)


def _scale(y: np.ndarray) -> float:
    return 1.0 + float(np.abs(y).max())


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.in_span], ids=[o.name for o in OPTIONS if o.in_span])
def test_in_span_objects_are_placed_exactly(option: Option) -> None:
    problem = make_problem(option, in_span=True)
    est = fit(option, problem)
    res = place(est, option, problem)
    # at their true distance from every landmark (the frame of the map is arbitrary)
    np.testing.assert_allclose(euclidean(res.y, est.embedding_), problem.true_distances, atol=1e-6 * _scale(res.y))


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_placements_do_not_depend_on_landmark_order(option: Option) -> None:
    problem = make_problem(option, in_span=False, seed=1)
    perm = np.random.default_rng(7).permutation(problem.fit_input.shape[0])
    a = fit(option, problem)
    lam = a.spectrum_.eigenvalues
    assert lam[1] - lam[2] > 1e-3 * lam[0]  # a unique 2-D subspace, so the comparison means something
    swapped = problem.permuted(perm)
    b = fit(option, swapped)
    ya, yb = place(a, option, problem).y, place(b, option, swapped).y
    np.testing.assert_allclose(euclidean(yb, b.embedding_), euclidean(ya, a.embedding_)[:, perm],
                               atol=1e-7 * _scale(ya))


@pytest.mark.parametrize("option", [o for o in OPTIONS if not o.block], ids=[o.name for o in OPTIONS if not o.block])
def test_single_object_placements_are_batch_independent(option: Option) -> None:
    problem = make_problem(option, in_span=False, seed=2)
    est = fit(option, problem)
    whole = est.embed(problem.A)
    for i in range(problem.A.shape[0]):
        alone = est.embed(problem.A[i : i + 1])
        np.testing.assert_allclose(alone.y[0], whole.y[i], rtol=1e-10, atol=1e-10 * _scale(whole.y))
        assert alone.flags[0] == whole.flags[i]


@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_a_saved_and_loaded_model_places_identically(option: Option, tmp_path) -> None:
    problem = make_problem(option, in_span=False, seed=3)
    est = fit(option, problem)
    est.save(tmp_path / "model.npz")
    back = LandmarkMDS.load(tmp_path / "model.npz")
    before, after = place(est, option, problem), place(back, option, problem)
    np.testing.assert_array_equal(after.y, before.y)
    np.testing.assert_array_equal(after.flags, before.flags)
    assert after.method == before.method


# ----------------------------------------------------------------- threads sharing one model

BATCHES, ROWS, L1_ROWS, BLOCKS = 6, 200, 30, 12


def _batches(option: Option) -> tuple[Problem, list[tuple]]:
    """The fit problem and ``BATCHES`` distinct calls' inputs against its landmarks:
    ``ROWS`` single rows each (fewer for L1, the slowest criterion), or ``BLOCKS`` blocks of 6 rows
    with their mutual C."""
    per = 6 * BLOCKS if option.block else (L1_ROWS if option.params.get("method") == "l1" else ROWS)
    problem = make_problem(option, in_span=False, seed=1, n=14, m=BATCHES * per)  # same landmarks for any m
    out = []
    for b in range(BATCHES):
        rows = slice(b * per, (b + 1) * per)
        if option.block:
            out.append((problem.A[rows], [problem.C[s:s + 6, s:s + 6] for s in range(b * per, (b + 1) * per, 6)]))
        else:
            out.append((problem.A[rows],))
    return problem, out


def _run(est: LandmarkMDS, option: Option, args: tuple) -> list[np.ndarray]:
    res = est.embed_blocks(*args, k0_rows="all") if option.block else est.embed(args[0], k0_rows="all")
    return [res.y, res.beta, res.unexplained, res.k0, res.t, res.flags, res.valid]


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
@pytest.mark.parametrize("option", OPTIONS, ids=IDS)
def test_threads_sharing_a_model_give_bit_identical_results(option: Option, backend: str, monkeypatch) -> None:
    # core/model.py: a model can be handed to threads; on either backend (the numpy one is what runs
    # without the C extension) 2 and 4 threads placing batches concurrently must reproduce one thread's
    # results bit for bit (no shared scratch buffer, no race on the lazily built kernels).
    from concurrent.futures import ThreadPoolExecutor

    from streamembed.core.place import projection
    from streamembed.core.place import restricted

    if backend == "numpy":
        monkeypatch.setattr(projection, "_native", None)
        monkeypatch.setattr(restricted, "_native", None)
    elif projection._native is None:
        pytest.skip("streamembed.core._native was not built (no C compiler)")
    problem, batches = _batches(option)
    alone = fit(option, problem)
    assert alone.model_.kernel(2, np.dtype(np.float64)).backend == backend
    reference = [_run(alone, option, args) for args in batches]
    for threads in (2, 4):
        est = fit(option, problem)  # fresh: its kernels are built lazily by the racing threads
        with ThreadPoolExecutor(max_workers=threads) as pool:
            got = list(pool.map(lambda args, est=est: _run(est, option, args), batches * 2))
        for want, have in zip(reference * 2, got, strict=True):
            for a, b in zip(want, have, strict=True):
                np.testing.assert_array_equal(b, a)
