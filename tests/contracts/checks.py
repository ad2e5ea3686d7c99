"""Conformance checks run over every member of an extension axis (River's ``checks``, scikit-learn's
``check_estimator``): ``check_method``, ``check_metric``, ``check_trigger``, ``check_source``, ``check_sink``,
``check_index``, ``check_pipeline_index`` run every check of their axis on one member; ``*_CHECKS`` list them
for parametrised tests.

A member gets these by being registered, not by being listed: ``tests/contracts/test_*.py`` parametrise them
over the registries, and ``test_toy_members.py`` registers a toy metric and a toy trigger in one file and runs
the same checks on them. Each check takes the member and raises AssertionError naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from streamembed.config.core_args import core_args
from streamembed.config.schema import Config, DriftConfig, choices, sections
from streamembed.config.sources import COMMIT_STYLES, FILE_NAMINGS, SourceKind
from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import Metric, resolve_metric
from streamembed.core.model import LandmarkModel, fit_model
from streamembed.core.monitor.drift import DriftWindow, TriggerDecision
from streamembed.core.monitor.observation import MonitorSample
from streamembed.core.monitor.triggers import TRIGGERS, Trigger, TriggerKind
from streamembed.core.options import CRITERION_METHODS, METHODS
from streamembed.core.place.methods import PlacementMethod
from streamembed.core.registry import resolve_path
from streamembed.model_io import model_from_bytes, model_to_bytes
from streamembed.ops.metrics import EMBED_METHODS
from streamembed.quality import classical_mds
from streamembed.quality_indices import PipelineIndex, QualityIndex, Reference
from streamembed.stream.output import METHOD_VALUES
from streamembed.stream.sources.base import SourceBatch

Check = Callable[[Any], None]


def _dist(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(((P[:, None, :] - Q[None, :, :]) ** 2).sum(-1), 0.0))


# ----------------------------------------------------------------------------- placement methods

#: A Euclidean problem known exactly: 30 landmarks and 12 objects in the plane (in the map's span), a block of 6.
_RNG = np.random.default_rng(20240601)
LANDMARKS = _RNG.normal(size=(30, 2)) * np.array([3.0, 1.5])
OBJECTS = _RNG.normal(size=(12, 2)) * 2.0


def _model(landmarks: np.ndarray = LANDMARKS, landmark_map: str = "cmds") -> LandmarkModel:
    return fit_model(_dist(landmarks, landmarks), n_components=2, landmark_map=landmark_map)


def _place(model: LandmarkModel, spec: PlacementMethod, A: np.ndarray, C: np.ndarray | None = None) -> np.ndarray:
    """The method's placements of rows A (a block with mutual dissimilarities C for a block method)."""
    if spec.single:
        return model.place(A, method=spec.name).y
    return model.place(A, C if C is not None else _dist(OBJECTS, OBJECTS)[: A.shape[0], : A.shape[0]]).y


def check_method_is_derived_everywhere(spec: PlacementMethod) -> None:
    """Its name and output code are in every derived list: the output's dictionary at its code, the metrics'
    labels, and for a single-object method the option table's and the configuration's choices."""
    assert METHOD_VALUES[spec.code] == spec.name and spec.name in EMBED_METHODS, spec
    if spec.single:
        assert spec.name in METHODS and spec.name in choices("model.method"), spec
        assert (spec.name in CRITERION_METHODS) == (spec.maps == "any"), spec


def check_method_places_in_span_objects_exactly(spec: PlacementMethod) -> None:
    """Objects in the landmarks' plane land where they are, up to the map's rigid motion (docs/math.md §3):
    every distance among placements and landmarks equals the true one. A method that says its placements are
    convex combinations of the landmarks (``spec.convex``, a smoother) is held to that instead: every placement
    is Σ w_s y_s with w ≥ 0, Σ w = 1 (a non-negative least-squares fit reproduces it), and a landmark lands on
    itself."""
    model = _model()
    Z = OBJECTS[:6]
    Y = _place(model, spec, _dist(Z, LANDMARKS), _dist(Z, Z))
    if spec.convex:
        _assert_convex(Y, model.embedding, spec.name)
        np.testing.assert_allclose(_place(model, spec, _dist(LANDMARKS[:5], LANDMARKS)), model.embedding[:5],
                                   atol=1e-9, err_msg=spec.name)
        return
    got = _dist(np.vstack([Y, model.embedding]), np.vstack([Y, model.embedding]))
    true = _dist(np.vstack([Z, LANDMARKS]), np.vstack([Z, LANDMARKS]))
    np.testing.assert_allclose(got, true, atol=1e-5 * true.max(), err_msg=spec.name)


def _assert_convex(Y: np.ndarray, X: np.ndarray, name: str) -> None:
    """Every row of Y (m, d) is a convex combination of the rows of X (n, d): NNLS on [Xᵀ; w·1ᵀ] reproduces [y; w]."""
    from scipy.optimize import nnls

    w = 1e3 * float(np.abs(X).max())  # weighs the Σ = 1 row so that NNLS cannot trade it for a closer fit
    M = np.vstack([X.T, np.full((1, X.shape[0]), w)])
    for y in Y:
        weights, residual = nnls(M, np.append(y, w))
        assert residual <= 1e-8 * w and abs(weights.sum() - 1.0) <= 1e-9, (name, residual, weights.sum())


def check_method_ignores_the_landmark_order(spec: PlacementMethod) -> None:
    """A map fitted on the same landmarks in another order places the same objects at the same mutual
    distances (the map may turn)."""
    perm = np.random.default_rng(1).permutation(LANDMARKS.shape[0])
    Z = OBJECTS[:6]
    A = _dist(Z, LANDMARKS)
    Y = _place(_model(), spec, A, _dist(Z, Z))
    Yp = _place(_model(LANDMARKS[perm]), spec, A[:, perm], _dist(Z, Z))
    np.testing.assert_allclose(_dist(Yp, Yp), _dist(Y, Y), atol=1e-7 * _dist(Y, Y).max(), err_msg=spec.name)


def check_method_places_each_object_alone(spec: PlacementMethod) -> None:
    """A single-object method places a row as it does within a batch (``transform(A)[i] == transform(A[i:i+1])``);
    a block method places the block as a whole (nothing to check)."""
    if not spec.single:
        return
    model = _model()
    A = _dist(OBJECTS + 0.3 * np.random.default_rng(2).normal(size=OBJECTS.shape), LANDMARKS)  # off the map too
    Y = _place(model, spec, A)
    for i in (0, 5, 11):
        np.testing.assert_allclose(_place(model, spec, A[i:i + 1])[0], Y[i], rtol=1e-9, atol=1e-9, err_msg=spec.name)


def check_method_survives_a_save_and_load(spec: PlacementMethod) -> None:
    """A model written and read back places bit for bit as the one it was."""
    model = _model()
    Z = OBJECTS[:6]
    A, C = _dist(Z, LANDMARKS), _dist(Z, Z)
    again = model_from_bytes(model_to_bytes(model))
    assert np.array_equal(_place(again, spec, A, C), _place(model, spec, A, C)), spec.name


def check_method_takes_the_maps_it_says(spec: PlacementMethod) -> None:
    """A method that needs the classical-MDS map refuses a refined one by name; one that places on any map
    places on a SMACOF map."""
    refined = _model(landmark_map="smacof")
    Z = OBJECTS[:4]
    if spec.maps == "any":
        assert np.isfinite(_place(refined, spec, _dist(Z, LANDMARKS), _dist(Z, Z))).all(), spec.name
        return
    try:
        _place(refined, spec, _dist(Z, LANDMARKS), _dist(Z, Z))
    except InputError as exc:
        assert ("block" if not spec.single else spec.name) in str(exc), (spec.name, str(exc))
    else:
        raise AssertionError(f"{spec.name} placed on a refined map; it says it needs the classical-MDS map")


METHOD_CHECKS: list[Check] = [check_method_is_derived_everywhere, check_method_places_in_span_objects_exactly,
                              check_method_ignores_the_landmark_order, check_method_places_each_object_alone,
                              check_method_survives_a_save_and_load, check_method_takes_the_maps_it_says]


def check_method(spec: PlacementMethod) -> None:
    for check in METHOD_CHECKS:
        check(spec)


# ----------------------------------------------------------------------------- metrics

#: Real words for the string metrics' samples (distinct, of several lengths, with shared prefixes and suffixes).
WORDS = ("landmark", "landmarks", "landscape", "lantern", "embedding", "embedded", "bedding", "streaming", "stream",
         "dream", "metric", "matrix", "mattress", "series", "serious", "warping", "wrapping", "distance", "instance",
         "refit", "profit", "drift", "draft", "shift", "kernel", "colonel", "residual", "individual")


def objects_of(kind: str, n: int, seed: int = 0) -> Any:
    """``n`` sample objects of a metric's kind (vectors: small non-negative integers, no row constant or zero, so
    that every scipy metric is defined on them; booleans: 0/1 with a one and a zero in every row; strings: real
    words (as bytes for an odd seed); series: random walks of 5 to 30 values; objects: strings and series)."""
    rng = np.random.default_rng(seed)
    if kind == "strings":
        picked = rng.choice(len(WORDS), size=n, replace=n > len(WORDS))
        return [WORDS[i].encode() if seed % 2 else WORDS[i] for i in picked.tolist()]  # odd seeds: bytes
    if kind == "series":
        return [rng.normal(size=int(rng.integers(5, 31))).cumsum() for _ in range(n)]
    if kind == "objects":
        return objects_of("series", n, seed)
    if kind == "vectors":
        X = rng.integers(0, 4, size=(n, 6)).astype(np.float64)
        X[:, 0], X[:, 1] = 1.0, 3.0  # every row positive somewhere and not constant
        return X
    if kind == "booleans":
        B = rng.integers(0, 2, size=(n, 8)).astype(np.float64)
        B[:, 0], B[:, 1] = 1.0, 0.0
        return B
    raise AssertionError(f"no sample objects of kind {kind!r}: add them to tests/contracts/checks.objects_of")


def check_metric_resolves_by_name(metric: Metric) -> None:
    """``metric=`` with its name finds it (every place that takes a metric resolves it the same way)."""
    assert resolve_metric(metric.name) is metric, metric.name


def check_metric_is_a_dissimilarity(metric: Metric) -> None:
    """(len(a), len(b)) finite non-negative float64; zero between an object and itself; symmetric."""
    a, b = metric.objects(objects_of(metric.takes, 9, 1)), metric.objects(objects_of(metric.takes, 5, 2))
    D = metric(a, b)
    assert D.shape == (9, 5) and D.dtype == np.float64, (metric.name, D.shape, D.dtype)
    assert np.isfinite(D).all() and (D >= 0).all(), metric.name
    W = metric.pairwise(a)
    assert W.shape == (9, 9) and np.allclose(W, W.T, rtol=1e-12, atol=1e-12), metric.name
    assert np.allclose(np.diagonal(W), 0.0, atol=1e-12), metric.name


def check_metric_rows_are_independent(metric: Metric) -> None:
    """An object's dissimilarities do not depend on the others it is compared with (a streamed object's row
    cannot depend on its batch), and ``pairwise`` agrees with ``between``."""
    a, b = metric.objects(objects_of(metric.takes, 8, 3)), metric.objects(objects_of(metric.takes, 6, 4))
    D = metric(a, b)
    for i in (0, 3, 7):
        np.testing.assert_allclose(metric(a[i:i + 1], b)[0], D[i], rtol=1e-12, atol=1e-12, err_msg=metric.name)
    np.testing.assert_allclose(metric.pairwise(a)[:3], metric(a[:3], a), rtol=1e-9, atol=1e-12,
                               err_msg=metric.name)


def check_metric_fits_and_embeds(metric: Metric) -> None:
    """A feature model fits with it and turns new objects into input rows by it."""
    from streamembed import LandmarkMDS

    L, Z = objects_of(metric.takes, 14, 5), objects_of(metric.takes, 4, 6)
    est = LandmarkMDS(n_components=2).fit_features(L, metric=metric.name)
    rows = est.dissimilarities_to_landmarks(Z)
    np.testing.assert_array_equal(rows, metric(metric.objects(Z), metric.objects(L)))
    assert est.transform(Z).shape == (4, 2), metric.name


def check_metric_survives_a_save_and_load(metric: Metric) -> None:
    """A model fitted with it keeps its landmarks' objects through its file: the model read back computes the same
    input rows (objects are stored as fixed arrays, never pickled)."""
    from streamembed import LandmarkMDS

    L, Z = objects_of(metric.takes, 14, 7), objects_of(metric.takes, 3, 8)
    model = LandmarkMDS(n_components=2).fit_features(L, metric=metric.name).model_
    again = model_from_bytes(model_to_bytes(model))
    np.testing.assert_array_equal(again.dissimilarities_to_landmarks(Z), model.dissimilarities_to_landmarks(Z))


def check_metric_refuses_other_objects(metric: Metric) -> None:
    """Objects it does not take are refused by a message naming the metric."""
    other = {"vectors": np.zeros(3), "booleans": np.full((2, 3), 0.5), "strings": [[1.0, 2.0]],
             "series": ["text"], "objects": [None]}.get(metric.takes, 3.0)
    try:
        metric.objects(other)
    except InputError as exc:
        assert metric.name in str(exc), (metric.name, str(exc))
    else:
        raise AssertionError(f"metric {metric.name!r} took objects that are not {metric.takes}")


METRIC_CHECKS: list[Check] = [check_metric_resolves_by_name, check_metric_is_a_dissimilarity,
                              check_metric_rows_are_independent, check_metric_fits_and_embeds,
                              check_metric_survives_a_save_and_load,
                              check_metric_refuses_other_objects]


def check_metric(metric: Metric) -> None:
    for check in METRIC_CHECKS:
        check(metric)


# ----------------------------------------------------------------------------- triggers

#: The settings the trigger checks build every kind with: the defaults, a short baseline and no cooldown.
TRIGGER_SETTINGS = DriftConfig(baseline_objects=20_000, cooldown_seconds=60.0, min_objects=5000)
BATCH = 1000


#: The spread of the objects along the map's 2 axes and 6 more monitored axes (a stationary stream).
AXES_SD = np.array([3.0, 2.5, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5])


def _stream(trigger: Trigger, batches: int, scale: float, start: float, seed: int) -> Iterator[TriggerDecision]:
    """Feed ``batches`` batches of χ²(3)-like unexplained energies (times ``scale``) with a window of them, and a
    ``MonitorSample``: projections on 8 leading axes whose off-map axes carry ``scale``² times their variance
    (scale > 1: the map's plane turns away from the traffic) and a coverage check per batch that falls by
    0.1 per unit of scale above 1; one batch per second from ``start``."""
    rng = np.random.default_rng(seed)
    window = DriftWindow(np.array([4.0, 2.0]), 2, 30, max_objects=10_000)
    sd = AXES_SD * np.r_[1.0, 1.0, np.full(AXES_SD.size - 2, 2.0 * scale if scale > 1 else 1.0)]
    for i in range(batches):
        u = scale * rng.chisquare(3, size=BATCH)
        beta = u + rng.chisquare(6, size=BATCH)
        now = start + i
        window.add(now, u / beta, unexplained=u)
        sample = MonitorSample(2, rng.normal(size=(BATCH, sd.size)) * sd,
                               float(np.clip(0.9 - 0.1 * (scale - 1.0) + rng.normal(0, 0.03), 0, 1)), 150)
        yield trigger.observe(now, window.statistics(now), BATCH, u, result=None, sample=sample)


def build(kind: TriggerKind) -> Trigger:
    return kind.build(core_args(TRIGGER_SETTINGS))


def check_trigger_satisfies_the_protocol(kind: TriggerKind) -> None:
    """What it builds is a Trigger of its own kind, registered under it, answering every question with a number
    of the right type before it has seen anything."""
    t = build(kind)
    assert isinstance(t, Trigger) and t.kind == kind.name and TRIGGERS[kind.name] is kind, kind.name
    assert isinstance(t.watches, str) and t.watches, kind.name
    assert isinstance(t.statistic, float) and isinstance(t.threshold, float), kind.name
    ert = t.expected_run_objects
    assert ert is None or (isinstance(ert, float) and ert > 0), kind.name
    assert t.warning is None or isinstance(t.warning, str), kind.name


def check_trigger_is_quiet_on_a_stationary_stream(kind: TriggerKind) -> None:
    """150,000 objects from one distribution: no refit (its decisions are TriggerDecisions with reasons)."""
    t = build(kind)
    for d in _stream(t, 150, 1.0, 0.0, seed=7):
        assert isinstance(d, TriggerDecision) and isinstance(d.reason, str), kind.name
        assert not d.fire, (kind.name, d)


def check_trigger_fires_on_a_persistent_rise(kind: TriggerKind) -> None:
    """The stream leaving the map for good (the unexplained energy fourfold, the traffic's plane turned, the
    coverage fallen) fires within 50,000 objects, saying why, at a value above its threshold; after ``refitted``
    the new level is the baseline and it is quiet again."""
    t = build(kind)
    for _ in _stream(t, 40, 1.0, 0.0, seed=8):
        pass
    fired = [d for d in _stream(t, 50, 4.0, 40.0, seed=9) if d.fire]
    assert fired, f"{kind.name} never fired on a fourfold unexplained energy"
    assert fired[0].reason and fired[0].value >= fired[0].threshold, (kind.name, fired[0])
    t.refitted(200.0)
    assert not any(d.fire for d in _stream(t, 100, 4.0, 200.0, seed=10)), kind.name


def check_trigger_cools_down(kind: TriggerKind) -> None:
    """A refit that was not installed (``cooldown``) holds it for ``drift.cooldown_seconds`` whatever the stream
    does meanwhile (whether it keeps its baseline is the kind's: the CUSUM does, the rule takes a new one)."""
    t = build(kind)
    for _ in _stream(t, 40, 1.0, 0.0, seed=11):
        pass
    t.cooldown(40.0)
    assert not any(d.fire for d in _stream(t, 50, 3.0, 40.0, seed=12)), kind.name  # 50 s < 60 s of cooldown


def check_trigger_is_deterministic(kind: TriggerKind) -> None:
    """The same stream gives the same decisions."""
    a = [(d.fire, d.value) for d in _stream(build(kind), 60, 1.5, 0.0, seed=14)]
    b = [(d.fire, d.value) for d in _stream(build(kind), 60, 1.5, 0.0, seed=14)]
    assert a == b or all(x[0] == y[0] and (x[1] == y[1] or (math.isnan(x[1]) and math.isnan(y[1])))
                         for x, y in zip(a, b, strict=True)), kind.name


TRIGGER_CHECKS: list[Check] = [check_trigger_satisfies_the_protocol, check_trigger_is_quiet_on_a_stationary_stream,
                               check_trigger_fires_on_a_persistent_rise, check_trigger_cools_down,
                               check_trigger_is_deterministic]


def check_trigger(kind: TriggerKind) -> None:
    for check in TRIGGER_CHECKS:
        check(kind)


# ----------------------------------------------------------------------------- sources

def check_source_kind_is_declared(kind: SourceKind) -> None:
    """Its builder (and preflight) import, its settings section exists, its commit style and file naming are
    known, and ``source.kind`` offers it."""
    assert callable(resolve_path(kind.builder, kind.name)), kind.name
    if kind.preflight is not None:
        assert callable(resolve_path(kind.preflight, kind.name)), kind.name
    assert kind.section is None or kind.section in sections(), kind
    assert kind.commits in COMMIT_STYLES and kind.files in FILE_NAMINGS, kind
    assert kind.name in choices("source.kind"), kind.name


def check_source(make: Callable[[], Any], name: str = "", resumable: bool = True) -> None:
    """Sources ``make()`` builds satisfy the loop's protocol: batches with JSON positions, and (a ``resumable``
    one: every daemon source) a new source restored to a batch's position (a restart) goes on with the batch
    after it."""
    source = make()
    what = name or type(source).__name__
    assert isinstance(source.name, str) and source.name, what
    batches: list[SourceBatch] = []
    for _ in range(200):
        batch = source.poll()
        if batch is not None:
            assert isinstance(batch, SourceBatch) and isinstance(batch.label, str) and batch.label, what
            json.dumps(batch.position)  # what the checkpoint stores
            batches.append(batch)
        if len(batches) == 3 or source.exhausted:
            break
    assert len(batches) >= 2, f"{what} gave fewer than 2 batches"
    assert isinstance(source.wait_hint(), float) and source.wait_hint() >= 0.0, what
    assert isinstance(source.caught_up, bool) and isinstance(source.exhausted, bool), what
    source.commit(batches[0].position)
    source.close()
    if not resumable:
        return
    restarted = make()
    restarted.restore(json.loads(json.dumps(batches[0].position)))
    again = next((b for b in (restarted.poll() for _ in range(200)) if b is not None), None)
    assert again is not None and again.label == batches[1].label, (what, again, batches[1].label)
    restarted.close()


def build_sample_source(kind: SourceKind, tmp: Path) -> Any:
    """A source of ``kind`` built by its builder from a configuration that needs no service."""
    from streamembed.stream.sources.base import SourceContext

    cfg = Config()
    cfg.source.kind = kind.name
    cfg.source.batch_rows = 64
    cfg.generator.n_features = 4
    cfg.generator.intrinsic_dims = 2
    cfg.generator.rate = 0.0
    cfg.directory.path = str(tmp)
    cfg.directory.settle_seconds = 0.0
    L = np.random.default_rng(0).normal(size=(12, 4))
    model = fit_model(_dist(L, L), n_components=2, features=L, metric="euclidean")
    return resolve_path(kind.builder, kind.name)(cfg, SourceContext(model)).source


# ----------------------------------------------------------------------------- sinks

def _output_rows() -> Any:
    """Three output rows as the loop writes them (version 2), from a small fitted model."""
    import pyarrow as pa

    from streamembed.stream.output import encode_output
    from streamembed.stream.records import TIMESTAMP_TYPE

    res = _model().place(_dist(OBJECTS[:3], LANDMARKS))
    return encode_output(pa.array(["a", "b", "c"]), res, model_version=1, event_time=pa.nulls(3, TIMESTAMP_TYPE),
                         processed_at_us=1_700_000_000_000_000)


def _write(sink: Any, takes: str, label: str) -> int:
    from streamembed.stream.codecs import DeadRecord
    from streamembed.stream.records import Reason

    if takes == "output":
        sink.write(_output_rows(), label)
    else:
        sink.write([DeadRecord(Reason.BAD_ID, "x"), DeadRecord(Reason.MISSING_ID, "y"),
                    DeadRecord(Reason.BAD_ID, "z")], label, model_version=1)
    return 3


def _published(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.name.startswith("."))


def check_sink(sink: Any, takes: str, directory: Path, files: bool = True) -> None:
    """A sink as the loop uses it: of its base (``OutputSink`` for ``takes="output"``, else ``DeadSink``), pending
    rows counted from the first write and cleared by ``flush`` (a file sink then publishes a file in
    ``directory``) and by the callable of ``seal``; ``close`` drops what was not flushed."""
    import pyarrow as pa

    from streamembed.stream.sinks import DeadSink, OutputSink

    what = type(sink).__name__
    assert isinstance(sink, OutputSink if takes == "output" else DeadSink), what
    assert sink.pending_rows == 0 and sink.pending_age == 0.0, what
    assert isinstance(sink.accepts(pa.schema([("id", pa.string())]), "L1"), bool), what
    n = _write(sink, takes, "L1")
    assert sink.pending_rows == n and sink.pending_age >= 0.0, what
    sink.flush("L1")
    assert sink.pending_rows == 0 and sink.pending_age == 0.0, what
    published = _published(directory)
    assert bool(published) == files, (what, published)
    _write(sink, takes, "L2")
    sink.seal("L2")()  # handed over as one unit, made durable by the callable
    assert sink.pending_rows == 0 and len(_published(directory)) >= len(published), what
    _write(sink, takes, "L3")
    sink.close()  # never flushed: nothing of L3 is published
    assert not [p for p in _published(directory) if "L3" in p.name], what


# ----------------------------------------------------------------------------- quality indices

def check_index(index: QualityIndex) -> None:
    """A finite number; the full map scores best against itself; a turned copy scores the same (every index
    compares maps up to rigid motion); a noisy map scores no better."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3)) * np.array([3.0, 1.0, 0.3])
    D = _dist(X, X)
    full = classical_mds(D, 2)
    ref = Reference(D, full, 5)
    best = index.measure(ref, full.Y)
    c, s = math.cos(0.7), math.sin(0.7)
    turned = index.measure(ref, full.Y @ np.array([[c, -s], [s, c]]) + 5.0)
    noisy = index.measure(ref, full.Y + rng.normal(size=full.Y.shape))
    assert all(isinstance(v, float) and math.isfinite(v) for v in (best, turned, noisy)), index.name
    assert math.isclose(turned, best, rel_tol=1e-9, abs_tol=1e-9), (index.name, best, turned)
    assert (noisy >= best - 1e-12) if index.better == "lower" else (noisy <= best + 1e-12), (index.name, best, noisy)


def check_pipeline_index(index: PipelineIndex) -> None:
    """An index computed on request: exactly its declared keys, in order, JSON-ready (numbers finite or None);
    the same again on a second run (deterministic); the same for shifted features with their columns reordered
    (nothing depends on the origin or the columns' order: Roy's candidates perturb each coordinate, so a rotation
    may change them); any progress it reports counts up to its total."""
    from streamembed.quality import cmds_pipeline
    from streamembed.quality_indices import PipelineRun, measure_requested

    rng = np.random.default_rng(4)
    X = rng.normal(size=(16, 3)) * np.array([3.0, 1.0, 0.3]) + np.c_[np.sin(np.arange(16.0)), np.zeros((16, 2))]
    calls: list[tuple[int, int]] = []
    got = measure_requested([index], PipelineRun(X, cmds_pipeline(), 2, 4, lambda done, total: calls.append(
        (done, total))))
    assert tuple(got) == index.keys, (index.name, list(got))
    json.dumps(got, allow_nan=False)
    again = index.measure(PipelineRun(X, cmds_pipeline(), 2, 4))
    assert again == got, index.name
    turned = index.measure(PipelineRun(X[:, [2, 0, 1]] + 7.0, cmds_pipeline(), 2, 4))
    for key in index.keys:
        if isinstance(got[key], float):
            assert math.isclose(turned[key], got[key], rel_tol=1e-6, abs_tol=1e-9), (index.name, key)
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and all(d <= t for d, t in calls) and (not calls or dones[-1] == calls[-1][1])
