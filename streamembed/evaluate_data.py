"""How close each landmark choice comes to a classical MDS of *your* objects (``streamembed evaluate --features``).

``evaluate_landmarks`` takes an (N, N) dissimilarity matrix, or N feature
vectors with a metric (``core.inputs.metrics``), and for every landmark selection × landmark
count × placement method × seed (docs/landmarks.md):

1. chooses the landmarks among all N objects (``core.refit.landmarks.select_landmarks``,
   seeds 0 … seeds − 1: the seed ``streamembed fit --seed`` takes);
2. fits the landmark map (classical MDS of the landmarks, docs/math.md §1)
   and places the reference objects with the method (projection or restricted
   reconstruction, docs/math.md §3; landmarks among them land on their own
   map positions);
3. compares the placements with the full classical MDS of the reference
   objects by every index of ``quality_indices.INDICES`` (one column and one
   JSON key each; the built-in ones, computed by ``quality``):

   * **Procrustes**: RMS distance after the best rotation/reflection and
     translation, as a share of the full map's RMS radius (0 = the same map);
   * **trustworthiness** with k nearest neighbours, beside the full map's own
     (a landmark map cannot do better than the best d-plane by much);
   * **Spearman** ρ of map distances with the input dissimilarities;
   * **subspace**: sine of the largest principal angle between the landmark
     map and the full map as d-dimensional subspaces of R^N; when it is large
     for every selection and the full map's λ_d ≈ λ_{d+1}, the full map's own
     plane is unstable and no landmark set can be expected to find it.

The reference objects are all N when N ≤ ``reference_max`` (default 3,000:
the full map costs O(N²) memory and an N × N eigenproblem); above, a seeded
uniform sample of ``reference_max`` objects, whose classical MDS stands in
for the full one (landmarks are still chosen among all N). Figures are
medians and ranges over the seeds. ``LandmarkReport.recommendation`` names
the selection and count with the lowest median Procrustes share.

On request (``indices``, feature input only), the indices of ``quality_indices.PIPELINE_INDICES`` — Roy's
trustability and consistency (docs/math.md §8) — for the full classical MDS (``LandmarkReport.full_indices``)
and for every row (``SelectionRow.requested``, the row's JSON ``"indices"``): each of the *pipeline* that made
the map, on the reference objects' features, refitted as the index needs — the full map by
``quality.cmds_pipeline``, a row by ``consistency_index.landmark_pipeline`` with its selection, landmark count
and method at seed 0 (the seed of the recommended landmark ids; landmarks chosen among the reference objects).
"""

from __future__ import annotations

import math
import time
from typing import Any
from dataclasses import asdict, dataclass, field
from collections.abc import Callable, Sequence

import numpy as np

from .core.inputs import validation
from .core.errors import InputError
from .core.inputs.metrics import DEFAULT_METRIC, Metric, resolve_metric
from .core.place.methods import evaluated_methods
from .core.refit.landmarks import DEFAULT_LANDMARK_SELECTION, LANDMARK_SELECTIONS, select_landmarks
from .estimator import LandmarkMDS
from .core.runtime import single_blas_thread
from .consistency_index import landmark_pipeline
from .quality import classical_mds, cmds_pipeline, spearman_agreement, trustworthiness
from .quality_indices import INDICES, PipelineIndex, PipelineRun, Reference, measure_requested, requested_indices

__all__ = ["Spread", "SelectionRow", "LandmarkReport", "evaluate_landmarks", "REFERENCE_MAX", "EVALUATED_METHODS"]

#: Largest reference set whose full classical MDS is computed (a seeded random sample above).
REFERENCE_MAX = 3000
#: Placement methods ``evaluate_landmarks`` compares (``core.place.methods``: the ones marked ``evaluated``).
EVALUATED_METHODS: tuple[str, ...] = evaluated_methods()


@dataclass(frozen=True)
class Spread:
    """A figure over the seeds: median and range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Spread:
        v = np.asarray(values, dtype=np.float64)
        return cls(float(np.median(v)), float(v.min()), float(v.max()))

    def __str__(self) -> str:
        return f"{self.median:.3f} ({self.low:.3f}–{self.high:.3f})"


@dataclass(frozen=True)
class SelectionRow:
    """One selection × landmark count × method over the seeds: ``indices`` holds a ``Spread`` per quality index
    (``quality_indices.INDICES``), also read as attributes (``row.procrustes``) and by name (``row["spearman"]``)."""

    selection: str
    n_landmarks: int
    method: str
    indices: dict[str, Spread]
    seconds: float  # median wall time of the selection alone
    seeds: int
    requested: dict[str, Any] | None = None  # the pipeline indices asked for (``quality_indices.PIPELINE_INDICES``)

    def __getitem__(self, index: str) -> Spread:
        return self.indices[index]

    def __getattr__(self, index: str) -> Spread:
        try:
            spread: Spread = object.__getattribute__(self, "indices")[index]
        except KeyError:
            raise AttributeError(index) from None
        return spread

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON keys: selection, n_landmarks, method, one per index, seconds, seeds (and "indices", the
        pipeline indices, when they were asked for)."""
        out = {"selection": self.selection, "n_landmarks": self.n_landmarks, "method": self.method,
               **{name: asdict(s) for name, s in self.indices.items()}, "seconds": self.seconds, "seeds": self.seeds}
        if self.requested is not None:
            out["indices"] = self.requested
        return out


@dataclass
class LandmarkReport:
    """The table of ``evaluate_landmarks`` and the full classical MDS it was measured against."""

    name: str
    n_objects: int
    n_reference: int
    reference: str  # "all objects" or how the sample was drawn
    n_components: int
    knn: int
    full_trustworthiness: float
    full_spearman: float
    full_eigenvalues: list[float]  # top d + 2 eigenvalues of the reference's centred kernel
    rows: list[SelectionRow] = field(default_factory=list)
    full_indices: dict[str, Any] | None = None  # the pipeline indices of the full classical MDS, when asked for
    requested: list[PipelineIndex] = field(default_factory=list)

    def best(self, method: str | None = None) -> SelectionRow:
        """The row with the lowest median Procrustes share (fewer landmarks win a tie)."""
        rows = [r for r in self.rows if method is None or r.method == method]
        if not rows:
            raise InputError("the report has no rows")
        return min(rows, key=lambda r: (round(r.procrustes.median, 3), r.n_landmarks,
                                        r.selection != DEFAULT_LANDMARK_SELECTION))

    def recommendation(self) -> str:
        """One line: the best setting, how close it comes, and what max–min (or the worst choice) gives."""
        b = self.best()
        gap = self.full_trustworthiness - b.trustworthiness.median
        near = "equal to" if abs(gap) < 5e-4 else (f"within {gap:.3f} of" if gap > 0 else f"{-gap:.3f} above")
        line = (f"{b.n_landmarks} landmarks by {b.selection} ({b.method}): Procrustes {b.procrustes.median:.3f} "
                f"(seeds {b.procrustes.low:.3f}–{b.procrustes.high:.3f}), trustworthiness {near} full CMDS "
                f"({b.trustworthiness.median:.3f} vs {self.full_trustworthiness:.3f})")
        same = [r for r in self.rows if r.n_landmarks == b.n_landmarks and r.method == b.method and r is not b]
        worst = max(same, key=lambda r: r.procrustes.median, default=None)
        other = next((r for r in same if r.selection == "maxmin"), worst)
        if other is not None:
            line += f"; {other.selection} would give {other.procrustes.median:.3f}"
        if b.subspace.median > 0.5 and self.eigengap() < 0.1:
            line += (f" (the full map's λ{self.n_components} and λ{self.n_components + 1} differ by "
                     f"{100 * self.eigengap():.0f} %: its plane itself is unstable)")
        return line

    def eigengap(self) -> float:
        """(λ_d − λ_{d+1}) / λ_d of the reference's full classical MDS (small: an unstable d-plane)."""
        d = self.n_components
        w = self.full_eigenvalues
        return float((w[d - 1] - w[d]) / w[d - 1]) if len(w) > d and w[d - 1] > 0 else float("nan")

    def to_markdown(self) -> str:
        """The table in Markdown, one row per selection × count × method (median (min–max) over seeds)."""
        w = ", ".join(f"{x:.4g}" for x in self.full_eigenvalues)
        lines = [
            f"{self.name}: N = {self.n_objects}, reference {self.reference} ({self.n_reference} objects), "
            f"d = {self.n_components}; full classical MDS: trustworthiness (k = {self.knn}) "
            f"{self.full_trustworthiness:.3f}, Spearman {self.full_spearman:.3f}, top eigenvalues {w}.",
            "",
            "| selection | landmarks | method | " + "".join(f"{i.column} | " for i in INDICES) + "selection s |",
            "| --- | ---: | --- | " + "---: | " * len(INDICES) + "---: |",
        ]
        for r in self.rows:
            lines.append(f"| {r.selection} | {r.n_landmarks} | {r.method} | "
                         + "".join(f"{r[i.name]} | " for i in INDICES) + f"{r.seconds:.2f} |")
        if self.full_indices is not None:
            lines += ["", *self._indices_markdown()]
        return "\n".join(lines)

    def _indices_markdown(self) -> list[str]:
        """The pipeline indices' table: the full classical MDS, then every row (at seed 0)."""
        keys = [k for index in self.requested for k in index.keys]
        columns = [c for index in self.requested for c in index.columns]
        lines = [f"Indices of the pipelines (docs/math.md §8) on the {self.n_reference} reference objects' features, "
                 f"d = {self.n_components}; landmark maps at seed 0:", "",
                 "| map | landmarks | method | " + " | ".join(columns) + " |",
                 "| --- | ---: | --- | " + " | ".join(["---:"] * len(columns)) + " |"]
        shown = [("full classical MDS", str(self.n_reference), "—", self.full_indices or {})]
        shown += [(r.selection, str(r.n_landmarks), r.method, r.requested or {}) for r in self.rows]
        for name, count, method, values in shown:
            lines.append(f"| {name} | {count} | {method} | " + " | ".join(_cell(values.get(k)) for k in keys) + " |")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN becomes None)."""
        out = asdict(self)
        del out["requested"]
        if self.full_indices is None:
            del out["full_indices"]
        out["rows"] = [r.as_dict() for r in self.rows]
        out["recommendation"] = self.recommendation() if self.rows else ""
        finite: dict[str, Any] = _finite(out)
        return finite


def _cell(value: Any) -> str:
    """A pipeline index's value in the table: 4 significant digits, "i, j" for an argmax, — for none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


class _Rows:
    """Dissimilarity blocks of the user's objects: from the matrix, or computed from features."""

    def __init__(self, D: np.ndarray | None, X: np.ndarray | None, metric: str | Metric):
        if (D is None) == (X is None):
            raise InputError("evaluate_landmarks needs exactly one of D (dissimilarities) or X (features)")
        self.D: np.ndarray | None = None
        self.X: np.ndarray | None = None
        if D is not None:
            D = validation.check_array(D, "D")
            if D.ndim != 2 or D.shape[0] != D.shape[1]:
                raise InputError(f"D must be a square (N, N) dissimilarity matrix, got shape {D.shape}")
            if (D < 0).any():
                raise InputError("D holds negative dissimilarities")
            if not np.allclose(D, D.T, rtol=1e-6, atol=1e-9 * float(np.abs(D).max() or 1.0)):
                raise InputError("D is not symmetric")
            self.D = D
            self.N = int(D.shape[0])
        else:
            self.X = validation.check_array(X, "X")
            self.N = int(self.X.shape[0])
        self.metric = None if X is None else resolve_metric(metric)

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        if self.D is not None:
            return np.ascontiguousarray(self.D[np.ix_(rows, cols)], dtype=np.float64)
        X, metric = self.X, self.metric
        assert X is not None and metric is not None  # one of D and X (__init__)
        return metric(X[rows], X[cols])


def evaluate_landmarks(
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    metric: str = DEFAULT_METRIC,
    *,
    landmarks: Sequence[int] = (100, 200),
    selections: Sequence[str] = LANDMARK_SELECTIONS,
    methods: Sequence[str] = EVALUATED_METHODS,
    seeds: int = 5,
    n_components: int = 2,
    knn: int = 10,
    reference_max: int = REFERENCE_MAX,
    name: str = "data",
    progress: Callable[[str], None] | None = None,
    candidates: int | None = None,
    indices: Sequence[str] = (),
    consistency_centres: int | None = None,
    index_progress: Callable[[str, int, int], None] | None = None,
) -> LandmarkReport:
    """The landmark-selection table for the user's objects (module docstring).

    Args:
        D: (N, N) dissimilarities (not squared), or X: (N, p) features with a ``metric`` (``core.inputs.metrics``).
        landmarks: landmark counts to try; counts ≥ N are dropped (at least one must remain).
        selections: strategies of ``core.refit.landmarks.select_landmarks``.
        methods: placement methods among ``EVALUATED_METHODS``.
        seeds: seeds 0 … seeds − 1 of each selection (figures are medians and ranges over them).
        n_components: map dimensions d.
        knn: neighbours of trustworthiness.
        reference_max: above this many objects, the full classical MDS is computed on a seeded
            random sample of this many (module docstring).
        name: what the report calls the data.
        progress: called with one line per selection × count as it finishes (e.g. ``print`` to stderr).
        candidates: passed to ``select_landmarks`` (landmark sets "max-variance" compares; None: its default).
        indices: names of ``quality_indices.PIPELINE_INDICES`` to compute too (features X only; module docstring).
        consistency_centres: M, the consistency index's M-centre lower bound (None: all R·p candidates).
        index_progress: called with (the map, refits done, refits in all) as the indices' refits proceed.
    Returns:
        ``LandmarkReport`` (``to_markdown``, ``recommendation``, ``to_dict``).
    Raises:
        InputError: malformed input, unknown selection or method, or no usable landmark count.
    """
    data = _Rows(D, X, metric)
    N = data.N
    bad = [s for s in selections if s not in LANDMARK_SELECTIONS]
    if bad or not selections:
        raise InputError(f"selections must be among {LANDMARK_SELECTIONS}, got {list(selections)}")
    bad = [m for m in methods if m not in EVALUATED_METHODS]
    if bad or not methods:
        raise InputError(f"methods must be among {EVALUATED_METHODS}, got {list(methods)}")
    if seeds < 1:
        raise InputError(f"seeds must be ≥ 1, got {seeds}")
    d = int(n_components)
    counts = sorted({int(n) for n in landmarks if d + 1 <= int(n) < N})
    if not counts:
        raise InputError(f"no landmark count among {list(landmarks)} lies between d + 1 = {d + 1} and N − 1 = {N - 1}")
    say = progress or (lambda line: None)
    asked = requested_indices(list(indices))
    if asked and data.X is None:
        raise InputError(f"the indices {', '.join(i.name for i in asked)} need feature vectors (X, `evaluate "
                         f"--features`): they compare each map with the features themselves (docs/math.md §8), "
                         f"which dissimilarities do not give")

    if reference_max >= N:
        ref, how = np.arange(N), "all objects"
    else:
        ref = np.sort(np.random.default_rng(0).choice(N, size=reference_max, replace=False))
        how = f"a uniform random sample (seed 0) of {reference_max} of the {N}"
    D_ref = data.block(ref, ref)
    t0 = time.perf_counter()
    full = classical_mds(D_ref, d)
    k = min(knn, max(1, (2 * ref.size - 2) // 3))
    against = Reference(D_ref, full, k)
    report = LandmarkReport(
        name=name, n_objects=N, n_reference=int(ref.size), reference=how, n_components=d, knn=k,
        full_trustworthiness=trustworthiness(against.ranks, full.Y, k),
        full_spearman=spearman_agreement(against.pairs, full.Y), full_eigenvalues=[float(x) for x in full.eigenvalues])
    say(f"{name}: full classical MDS of {ref.size} objects in {time.perf_counter() - t0:.1f} s: trustworthiness "
        f"{report.full_trustworthiness:.3f}, eigengap (λ{d} − λ{d + 1})/λ{d} = {report.eigengap():.3f}")
    X_ref = None if data.X is None else np.asarray(data.X[ref], dtype=np.float64)

    def measured(label: str, pipeline: Any) -> dict[str, Any]:
        tick = None if index_progress is None else (lambda done, total: index_progress(label, done, total))
        assert X_ref is not None
        return measure_requested(asked, PipelineRun(X_ref, pipeline, d, consistency_centres, tick))

    if asked:
        report.requested = asked
        report.full_indices = measured("full classical MDS", cmds_pipeline(str(metric)))

    for n in counts:
        for sel in selections:
            figures: dict[str, list[list[float]]] = {m: [] for m in methods}
            seconds = []
            for seed in range(seeds):
                t0 = time.perf_counter()
                L = select_landmarks(sel, n, D=data.D, X=data.X, metric=metric, seed=seed, n_components=d,
                                     candidates=candidates)
                seconds.append(time.perf_counter() - t0)
                with single_blas_thread():  # landmark-sized eigenproblems: BLAS threads would only contend
                    est = LandmarkMDS(n_components=d, random_state=seed).fit(data.block(L, L))
                A = data.block(ref, L)
                for m in methods:
                    Y = est.embed(A, method=m).y
                    figures[m].append([index.measure(against, Y) for index in INDICES])
            for m in methods:
                f = np.asarray(figures[m])
                spreads = {index.name: Spread.of(f[:, c]) for c, index in enumerate(INDICES)}
                row = SelectionRow(sel, n, m, spreads, seconds=float(np.median(seconds)), seeds=seeds,
                                   requested=measured(f"{sel} {n} landmarks, {m}", landmark_pipeline(
                                       n_landmarks=n, landmark_selection=sel, method=m, random_state=0,
                                       metric=metric)) if asked else None)
                report.rows.append(row)
                say(f"{name}: {sel} {n} landmarks, {m}: Procrustes {row.procrustes}, trustworthiness "
                    f"{row.trustworthiness}, Spearman {row.spearman}")
    return report
