"""``python -m benchmarks evaluate``: how well each out-of-sample method places held-out objects.

For a dataset of N objects with full dissimilarities Δ:

1. choose n landmarks by max–min selection (docs/math.md §5; from the dataset's
   landmark pool if it has one) and fit the landmark map (classical MDS, §1);
2. draw m held-out objects among the others (seeded) and embed them from
   their dissimilarities to the landmarks with every method (docs/math.md §3):
   projection, single-object restricted reconstruction (RR), and block RR in
   consecutive blocks of k objects with their mutual dissimilarities; then
   the engine's other options (``option_maps``): the stress and L1 criteria,
   similarity input, landmark Isomap, the Cailliez correction and the
   SMACOF/Sammon landmark maps (each scored against its own landmark map);
3. score every map (columns of the table):

   * fidelity to full classical-MDS refits (same d), each aligned to the map
     by orthogonal Procrustes with translation, no scaling, fitted on the
     landmarks and evaluated on the held-out objects (``core.refit.procrustes``),
     as RMS distance / RMS radius of the landmark map. Three refits
     (``references``): landmarks + the object alone (what RR approximates),
     landmarks + its block of k (what block RR approximates), landmarks + all
     m held-out objects at once ("refit everything");
   * stress of the held-out objects' distances to the landmarks (raw
     Σ(‖y - x‖ - δ)², normalised by Σδ²) and the normalised stress of their
     mutual distances (all pairs; block RR sees only the pairs inside blocks);
   * trustworthiness and continuity (k nearest neighbours, Roy 2021, §1.3) of
     landmarks + held-out objects against Δ;

   plus the held-out set's residual-kernel statistics (docs/math.md §4): mean
   relative unexplained energy (β - ‖ŷ‖²)/β, mean exact k0 and k0/β, Tr(k0),
   the kernel-distance error bound √(2 Tr(k0)/(n + m)) and its exact value
   (the whole held-out set is one block, so K0 is known).

The "full refit (all)" row scores the all-objects refit itself (its fidelity to
itself is 0). The five-criteria note (docs/math.md, References) compares
out-of-sample criteria the same way.

    python -m benchmarks.evaluate [--datasets swiss_roll,digits] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence

import numpy as np

from streamembed.core.refit.strategies import maxmin_select
from streamembed.estimator import LandmarkMDS
from streamembed.core.runtime import single_blas_thread
from benchmarks.datasets import DATASETS, Dataset, DatasetUnavailable, available_datasets, load_dataset
from streamembed.quality import pairwise_stress, stress_to_reference, trustworthiness_continuity
from benchmarks.references import refit_reference, reference_error

__all__ = ["EvaluationSettings", "MethodRow", "DatasetReport", "evaluate_dataset", "format_report", "main"]


@dataclass(frozen=True)
class EvaluationSettings:
    """Sizes of one evaluation (see module docstring)."""

    n_landmarks: int = 100
    n_heldout: int = 400
    n_components: int = 2
    block_size: int = 8
    knn: int = 10
    seed: int = 0


@dataclass
class MethodRow:
    """One method's scores.

    Fidelity columns are RMS distances of the held-out objects to a refit
    reference after Procrustes alignment on the landmarks (``references``),
    divided by the RMS radius of the landmark map (unitless; 0 = identical):
    ``fidelity_object`` against landmarks + that object alone, ``fidelity_block``
    against landmarks + its block of k, ``fidelity_all`` against landmarks + all
    held-out objects. ``*_rmse`` are the same in distance units.
    """

    method: str
    fidelity_object: float
    fidelity_block: float
    fidelity_all: float
    rmse_object: float
    rmse_block: float
    rmse_all: float
    stress_raw: float
    stress_normalised: float
    mutual_stress_normalised: float
    trustworthiness: float
    continuity: float
    seconds: float


@dataclass
class DatasetReport:
    """All methods on one dataset, plus the held-out set's k0 statistics (docs/math.md §4)."""

    dataset: str
    description: str
    kind: str
    n_objects: int
    n_landmarks: int
    n_heldout: int
    settings: EvaluationSettings
    map_radius: float
    negative_share: float
    landmark_residual_all: float
    mean_relative_unexplained: float
    mean_k0: float
    mean_relative_k0: float
    trace_k0: float
    kernel_distance_bound: float
    kernel_distance_exact: float | None
    gap_ratio: float
    rows: list[MethodRow] = field(default_factory=list)

    def row(self, method: str) -> MethodRow:
        return next(r for r in self.rows if r.method.startswith(method))


def _split(D: np.ndarray, s: EvaluationSettings, pool: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    N = D.shape[0]
    pool = np.arange(N) if pool is None else np.asarray(pool)
    n = min(s.n_landmarks, pool.size, N - 2)
    landmarks = pool[maxmin_select(n, D=D[np.ix_(pool, pool)], first=0)]
    rest = np.setdiff1d(np.arange(N), landmarks)
    rng = np.random.default_rng(s.seed)
    m = min(s.n_heldout, rest.size)
    heldout = rng.permutation(rest)[:m]
    return landmarks, heldout


def embed_blocks(est: LandmarkMDS, A: np.ndarray, C: np.ndarray, k: int) -> np.ndarray:
    """Block RR in consecutive blocks of k rows: A (m, n), C (m, m) -> (m, d)."""
    Y = np.empty((A.shape[0], est.n_components))
    with single_blas_thread():
        for start in range(0, A.shape[0], k):
            sl = slice(start, min(start + k, A.shape[0]))
            Y[sl] = est.embed(A[sl], C[sl, sl]).y
    return Y


#: Neighbours of the landmark Isomap row.
ISOMAP_NEIGHBORS = 10


def option_maps(est: LandmarkMDS, D: np.ndarray, L: np.ndarray, H: np.ndarray, s: EvaluationSettings,
                maps: dict[str, np.ndarray], landmarks: dict[str, np.ndarray], timings: dict[str, float]) -> None:
    """Rows of the engine's other options (README "Methods"), added to ``maps`` in place.

    * ``stress``, ``l1``: the other out-of-sample criteria on the same map (docs/math.md §3.4);
    * ``similarity (linear kernel)``: the same data as the kernel k(x, y) = -½(δ²(x, y) - δ²(x, o)
      - δ²(y, o)) about the first landmark o (Trosset et al. 2025, §3): must equal projection;
    * ``isomap (k=10)``: landmark Isomap (Ghojogh et al. 2020, §4), projection; NaN when the graph falls apart;
    * ``cailliez``: the additive-constant correction (Ghojogh et al. 2020, §4.2), projection;
    * ``smacof map + stress``, ``sammon map + stress``: metric-MDS landmark maps (Ghojogh et al. 2020, §2.2–3).

    Rows with their own landmark map record it in ``landmarks``; ``seconds`` is the embedding time.
    """
    d = s.n_components
    A = D[np.ix_(H, L)]

    def timed(name: str, model: LandmarkMDS, rows: np.ndarray, **kw) -> None:
        t0 = time.perf_counter()
        maps[name] = model.embed(rows, **kw).y
        timings[name] = time.perf_counter() - t0
        if model is not est:
            landmarks[name] = model.embedding_

    timed("stress", est, A, method="stress")
    timed("l1", est, A, method="l1")
    o = L[0]
    D2 = np.square(D)
    kernel = lambda Ii, Jj: -0.5 * (D2[np.ix_(Ii, Jj)] - D2[Ii, o][:, None] - D2[Jj, o][None, :])  # noqa: E731
    sim = LandmarkMDS(n_components=d, input="similarity", random_state=s.seed).fit(kernel(L, L))
    timed("similarity (linear kernel)", sim, kernel(H, L), self_similarity=D2[H, o])
    name = f"isomap (k={ISOMAP_NEIGHBORS})"
    try:
        iso = LandmarkMDS(n_components=d, geodesic_neighbors=min(ISOMAP_NEIGHBORS, L.size - 1)).fit(D[np.ix_(L, L)])
        timed(name, iso, A)
    except ValueError:  # a disconnected neighbour graph: no geodesics between its pieces
        name += ": n/a, graph disconnected"
        maps[name], timings[name] = np.full((H.size, d), np.nan), float("nan")
        landmarks[name] = np.full((L.size, d), np.nan)
    timed("cailliez", LandmarkMDS(n_components=d, correction="cailliez").fit(D[np.ix_(L, L)]), A)
    for kind in ("smacof", "sammon"):
        try:
            refined = LandmarkMDS(n_components=d, method="stress", landmark_map=kind).fit(D[np.ix_(L, L)])
        except ValueError:  # Sammon needs distinct landmarks
            continue
        timed(f"{kind} map + stress", refined, A)


def evaluate_dataset(ds: Dataset, settings: EvaluationSettings = EvaluationSettings()) -> DatasetReport:
    """Embed held-out objects of ``ds`` with every method and score them (module docstring)."""
    s = settings
    D = ds.dissimilarities()
    L, H = _split(D, s, ds.landmark_pool)
    d = s.n_components
    est = LandmarkMDS(n_components=d, random_state=s.seed).fit(D[np.ix_(L, L)])
    X = est.embedding_
    A = D[np.ix_(H, L)]
    C = D[np.ix_(H, H)]

    timings: dict[str, float] = {}
    maps: dict[str, np.ndarray] = {}
    maps_landmarks: dict[str, np.ndarray] = {}  # rows whose landmark map is not ``est``'s
    t0 = time.perf_counter()
    proj = est.embed(A, method="projection", k0_rows="all")
    timings["projection"] = time.perf_counter() - t0
    maps["projection"] = proj.y
    t0 = time.perf_counter()
    maps["restricted"] = est.embed(A, method="restricted").y
    timings["restricted"] = time.perf_counter() - t0
    block_name = f"block RR (k={s.block_size})"
    t0 = time.perf_counter()
    maps[block_name] = embed_blocks(est, A, C, s.block_size)
    timings[block_name] = time.perf_counter() - t0

    option_maps(est, D, L, H, s, maps, maps_landmarks, timings)

    t0 = time.perf_counter()
    ref_all = refit_reference(D, L, H, d, None)
    timings["full refit"] = time.perf_counter() - t0
    refs = {"object": refit_reference(D, L, H, d, 1), "block": refit_reference(D, L, H, d, s.block_size),
            "all": ref_all}
    full_L, full_H = ref_all[0].landmarks, ref_all[0].objects
    maps_and_landmarks = {name: (maps_landmarks.get(name, X), Y) for name, Y in maps.items()}
    maps_and_landmarks["full refit (all)"] = (full_L, full_H)
    radius = float(np.sqrt(((X - X.mean(axis=0)) ** 2).sum(axis=1).mean()))

    S = np.concatenate([L, H])
    D_S = D[np.ix_(S, S)]
    rows: list[MethodRow] = []
    lm_all = float("nan")
    for name, (XL, Y) in maps_and_landmarks.items():
        if not np.isfinite(Y).all():  # an option that does not apply to this dataset
            rows.append(MethodRow(name, *([float("nan")] * 12)))
            continue
        err = {key: reference_error(XL, Y, ref) for key, ref in refs.items()}
        lm_all = err["all"][1] if name == "projection" else lm_all
        st = stress_to_reference(Y, XL, A)
        mutual = pairwise_stress(Y, C) if Y.shape[0] > 1 else None
        T, Cc = trustworthiness_continuity(D_S, np.vstack([XL, Y]), k=s.knn)
        rows.append(
            MethodRow(
                method=name,
                fidelity_object=err["object"][0] / radius,
                fidelity_block=err["block"][0] / radius,
                fidelity_all=err["all"][0] / radius,
                rmse_object=err["object"][0],
                rmse_block=err["block"][0],
                rmse_all=err["all"][0],
                stress_raw=st.raw,
                stress_normalised=st.normalised,
                mutual_stress_normalised=mutual.normalised if mutual is not None else float("nan"),
                trustworthiness=T,
                continuity=Cc,
                seconds=timings["full refit" if name.startswith("full") else name],
            )
        )

    _, bounds = est.residuals(A, C=C, k0_rows="all")
    beta = proj.beta
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_k0 = np.where(beta > 0, proj.k0 / beta, np.nan)
    return DatasetReport(
        dataset=ds.name,
        description=ds.description,
        kind=ds.kind,
        n_objects=ds.n_objects,
        n_landmarks=int(L.size),
        n_heldout=int(H.size),
        settings=s,
        negative_share=float(est.negative_share_),
        map_radius=radius,
        landmark_residual_all=lm_all,
        mean_relative_unexplained=float(np.nanmean(proj.relative_unexplained)),
        mean_k0=float(np.nanmean(proj.k0)),
        mean_relative_k0=float(np.nanmean(rel_k0)),
        trace_k0=float(bounds.trace_k0),
        kernel_distance_bound=float(bounds.kernel_distance_bound),
        kernel_distance_exact=None if bounds.kernel_distance_exact is None else float(bounds.kernel_distance_exact),
        gap_ratio=float(bounds.gap_ratio),
        rows=rows,
    )


# --------------------------------------------------------------------------- output


def format_report(rep: DatasetReport) -> str:
    """The report as a Markdown table with a short header (the form used in README)."""
    s = rep.settings
    exact = "n/a" if rep.kernel_distance_exact is None else f"{rep.kernel_distance_exact:.4g}"
    bound = f"{rep.kernel_distance_bound:.4g} (exact {exact})"
    ratio = f"{rep.gap_ratio:.3g}"
    if not np.isfinite(rep.kernel_distance_bound):
        # k0 is PSD only for Euclidean data (docs/math.md §4.1): no bound applies.
        bound = "n/a (k0 not PSD: non-Euclidean input)"
    if np.isnan(rep.gap_ratio):
        ratio = "n/a (k0 not PSD)"
    lines = [
        f"### {rep.dataset} ({rep.kind}): {rep.description}",
        "",
        f"N={rep.n_objects}, landmarks={rep.n_landmarks} (max-min), held-out={rep.n_heldout}, d={s.n_components}, "
        f"block k={s.block_size}, kNN k={s.knn}, seed={s.seed}; landmark map RMS radius {rep.map_radius:.4g}; "
        f"negative eigenvalue share {rep.negative_share:.3f}.",
        f"Held-out residuals (docs/math.md §4): mean relative unexplained {rep.mean_relative_unexplained:.3f}, "
        f"mean k0 {rep.mean_k0:.4g} (k0/beta {rep.mean_relative_k0:.3f}), Tr(k0) {rep.trace_k0:.4g}, "
        f"kernel-distance error bound {bound}, ||k0||/eigengap {ratio}; "
        f"landmark Procrustes residual to the all-objects refit {rep.landmark_residual_all:.3g}.",
        "",
        "| method | fid. refit L+object | fid. refit L+block | fid. refit L+all | raw stress | norm. stress "
        "| mutual norm. stress | trustw. | contin. | seconds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rep.rows:
        lines.append(
            f"| {r.method} | {r.fidelity_object:.4f} | {r.fidelity_block:.4f} | {r.fidelity_all:.4f} | "
            f"{r.stress_raw:.4g} | "
            f"{r.stress_normalised:.5f} | {r.mutual_stress_normalised:.5f} | {r.trustworthiness:.4f} | "
            f"{r.continuity:.4f} | {r.seconds:.3f} |"
        )
    return "\n".join(lines)


def report_to_dict(rep: DatasetReport) -> dict:
    """JSON-ready dict (NaN and inf become null)."""
    return _clean(asdict(rep))


def _clean(obj):
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks evaluate",
        description="Compare projection, restricted reconstruction, block RR and the other options (stress, L1, "
                    "similarity input, Isomap, Cailliez, SMACOF/Sammon maps) against a full classical MDS refit.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="datasets: " + ", ".join(DATASETS)
        + "\n(digits, iris, wine, breast_cancer need scikit-learn: pip install 'streamembed[eval]')",
    )
    p.add_argument("--datasets", default="all",
                   help="comma-separated names, 'all' (installed ones), 'real' or 'synthetic'")
    p.add_argument("--landmarks", type=int, default=100, metavar="N", help="landmarks chosen by max-min (default 100)")
    p.add_argument("--heldout", type=int, default=400, metavar="M", help="held-out objects (default 400)")
    p.add_argument("-d", "--n-components", type=int, default=2, metavar="D", help="map dimension (default 2)")
    p.add_argument("--block", type=int, default=8, metavar="K", help="objects per block for block RR (default 8)")
    p.add_argument("--knn", type=int, default=10, metavar="K",
                   help="neighbours for trustworthiness/continuity (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed for the held-out sample (default 0)")
    p.add_argument("--json", metavar="PATH", help="also write the reports to this JSON file")
    p.add_argument("--list", action="store_true", help="list the datasets and exit")
    g = p.add_argument_group("drift benchmark", "python -m benchmarks drift: drift detectors and refit landmark "
                             "selection on streams with a known change (benchmarks.drift_bench; peers need River)")
    g.add_argument("--drift", action="store_true", help="run the drift benchmark instead of the embedding evaluation")
    g.add_argument("--drift-objects", type=int, metavar="T", help="objects per stationary stream (default 10,000,000)")
    g.add_argument("--drift-replicates", type=int, metavar="R", help="streams per change scenario (default 20)")
    g.add_argument("--drift-horizon", type=int, metavar="H", help="objects after the change (default 400,000)")
    g.add_argument("--drift-figure", metavar="PNG",
                   help="also draw delay vs false alarms per detector (needs matplotlib)")
    g.add_argument("--no-peers", action="store_true", help="skip River's detectors and the MMD test")
    g.add_argument("--drift-quick", action="store_true", help="small sizes for a smoke test (minutes -> seconds)")
    return p


def _resolve(spec: str) -> list[str]:
    avail = available_datasets()
    if spec == "all":
        return avail
    if spec in ("real", "synthetic"):
        from benchmarks.datasets import REAL, SYNTHETIC

        return [n for n in (REAL if spec == "real" else SYNTHETIC) if n in avail]
    return [x.strip() for x in spec.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks evaluate``; returns the exit code (0 ok, 2 bad arguments)."""
    args = build_parser().parse_args(argv)
    if args.drift:
        from benchmarks import drift_bench

        return drift_bench.main(objects=args.drift_objects, replicates=args.drift_replicates,
                                horizon=args.drift_horizon,
                                json_path=args.json, figure=args.drift_figure, peers=not args.no_peers, seed=args.seed,
                                quick=args.drift_quick)
    if args.list:
        avail = set(available_datasets())
        for name, fn in DATASETS.items():
            doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "plane with off-span noise sd 1"
            print(f"{name:20} {'' if name in avail else '(needs scikit-learn) '}{doc}")
        return 0
    settings = EvaluationSettings(args.landmarks, args.heldout, args.n_components, args.block, args.knn, args.seed)
    reports = []
    for name in _resolve(args.datasets):
        try:
            ds = load_dataset(name)
        except KeyError as exc:
            print(f"python -m benchmarks evaluate: {exc.args[0]}", file=sys.stderr)
            return 2
        except DatasetUnavailable as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        rep = evaluate_dataset(ds, settings)
        reports.append(rep)
        print(format_report(rep), end="\n\n", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([report_to_dict(r) for r in reports], fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
