"""The built-in source (``source.kind = "generator"``): objects drawn from a Gaussian mixture, with optional drift.

Feature space R^p. The mixture's ``clusters`` components live in a random
q-dimensional subspace (q = ``intrinsic_dims`` < p) plus isotropic noise of
``noise_std`` in all p directions, so landmarks drawn from it span (almost)
only that subspace. Drift, as a function of the object index s (not of wall
time, so a replay is identical):

* ``drift_speed``: each component mean moves along its own direction inside
  the subspace by ``drift_speed`` feature units per 100,000 objects;
* ``new_cluster_after`` > 0: from object index s on, a new component appears
  (one object in clusters+1) centred ``new_cluster_offset`` units *off* the
  subspace - outside the landmarks' span, so its residual k0 is large.

Batch i is drawn from ``numpy.random.default_rng([seed, i])`` alone, so the
source resumes from a checkpoint (``{"next_batch": i}``) and regenerating
batch i gives the same objects. :func:`build_source` is the kind's builder (``config.sources``).
"""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from streamembed.config.schema import Config, GeneratorConfig, RunConfig
from streamembed.core.options import BATCH_ROWS
from streamembed.exits import StartupError
from streamembed.stream.origin import RowOrigin
from streamembed.stream.records import TIMESTAMP_TYPE
from streamembed.stream.sources.base import SourceBatch, SourceContext, SourceSetup

__all__ = ["GaussianMixtureStream", "GeneratorSource", "build_source"]

_FIT_STREAM = 0x5EED  # rng stream for landmark-fitting samples (distinct from batch indices >= 0)


class GaussianMixtureStream:
    """Deterministic draws from a drifting Gaussian mixture (see module doc)."""

    def __init__(self, spec: GeneratorConfig) -> None:
        if not 1 <= spec.intrinsic_dims < spec.n_features:
            raise ValueError("intrinsic_dims must be in [1, n_features)")
        self.spec = spec
        rng = np.random.default_rng([spec.seed, 0xBA5E])
        q, p, k = spec.intrinsic_dims, spec.n_features, spec.clusters
        Q, _ = np.linalg.qr(rng.standard_normal((p, q + 1)))
        self.basis = Q[:, :q]  # (p, q) orthonormal: the mixture's subspace
        self.off_span = Q[:, q]  # (p,) unit vector orthogonal to it
        self.means = spec.cluster_spread * rng.standard_normal((k, q))  # (k, q)
        d = rng.standard_normal((k, q))
        self.drift_dirs = d / np.linalg.norm(d, axis=1, keepdims=True)  # (k, q)
        self.new_mean = spec.new_cluster_offset * self.off_span  # (p,)

    def sample(self, first_index: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """(count, p) float64 objects with indices first_index .. first_index+count-1."""
        s = self.spec
        idx = first_index + np.arange(count)
        comp = rng.integers(0, s.clusters, size=count)
        shift = (s.drift_speed * idx / 100_000.0)[:, None] * self.drift_dirs[comp]  # (count, q)
        latent = self.means[comp] + shift + s.cluster_std * rng.standard_normal((count, s.intrinsic_dims))
        X = latent @ self.basis.T + s.noise_std * rng.standard_normal((count, s.n_features))
        if s.new_cluster_after > 0:
            new = (idx >= s.new_cluster_after) & (rng.random(count) < 1.0 / (s.clusters + 1))
            if new.any():
                X[new] = (self.new_mean + s.cluster_std * rng.standard_normal((int(new.sum()), s.n_features)))
        return X

    def fit_sample(self, count: int) -> np.ndarray:
        """(count, p) objects from the undrifted mixture, to choose landmarks from."""
        rng = np.random.default_rng([self.spec.seed, _FIT_STREAM])
        s = self.spec
        comp = rng.integers(0, s.clusters, size=count)
        latent = self.means[comp] + s.cluster_std * rng.standard_normal((count, s.intrinsic_dims))
        return latent @ self.basis.T + s.noise_std * rng.standard_normal((count, s.n_features))


class GeneratorSource:
    """A :class:`~streamembed.stream.sources.Source` of generated objects.

    Emits ``id``, ``features`` (fixed_size_list<float64, p>) and
    ``event_time`` (now); or, with ``to_dissimilarities`` given,
    ``dissimilarities`` (fixed_size_list<float32, n>) computed by it.
    ``rate`` objects/s (0 = as fast as the loop goes). Position:
    ``{"next_batch": i}``.
    """

    name = "generator"

    def __init__(
        self,
        stream: GaussianMixtureStream,
        *,
        batch_rows: int = BATCH_ROWS,
        rate: float = 0.0,
        id_prefix: str = GeneratorConfig.id_prefix,
        to_dissimilarities: Callable[[np.ndarray], np.ndarray] | None = None,
        max_batches: int = RunConfig.max_batches,
    ) -> None:
        self.stream = stream
        self.batch_rows = int(batch_rows)
        self.rate = float(rate)
        self.id_prefix = id_prefix
        self.to_dissimilarities = to_dissimilarities
        self.max_batches = int(max_batches)
        self._next = 0
        self._t0 = time.monotonic()
        self._produced = 0

    def restore(self, state: Any) -> None:
        if not state:
            return
        nxt = state.get("next_batch") if isinstance(state, dict) else None
        if not isinstance(nxt, int) or isinstance(nxt, bool) or nxt < 0:
            raise ValueError(f"the generator position must be {{\"next_batch\": n >= 0}}, got {state!r:.200}")
        self._next = nxt

    def commit(self, position: Any) -> None:
        """Positions are kept by the checkpoint file."""

    def batch(self, i: int) -> pa.Table:
        """Batch i (deterministic in seed and i, except ``event_time``)."""
        import pyarrow.compute as pc  # (0.1 s to import: only where it is used)

        rng = np.random.default_rng([self.stream.spec.seed, i])
        first = i * self.batch_rows
        X = self.stream.sample(first, self.batch_rows, rng)
        m = X.shape[0]
        ids = pc.binary_join_element_wise(
            pa.array(np.full(m, f"{self.id_prefix}-{self.stream.spec.seed}-", dtype=object), pa.string()),
            pc.cast(pa.array(np.arange(first, first + m, dtype=np.int64)), pa.string()),
            "",
        )
        now = np.full(m, time.time_ns() // 1000, dtype="datetime64[us]")
        cols: dict[str, pa.Array] = {"id": ids}
        if self.to_dissimilarities is None:
            cols["features"] = pa.FixedSizeListArray.from_arrays(pa.array(X.reshape(-1)), X.shape[1])
        else:
            got = self.to_dissimilarities(X)
            version = None
            if isinstance(got, tuple):  # (A, the model version whose landmarks A refers to)
                got, version = got
            A = np.ascontiguousarray(got, dtype=np.float32)
            cols["dissimilarities"] = pa.FixedSizeListArray.from_arrays(pa.array(A.reshape(-1)), A.shape[1])
            if version is not None:
                cols["landmark_version"] = pa.array(np.full(m, int(version), dtype=np.int64))
        cols["event_time"] = pa.array(now).cast(TIMESTAMP_TYPE)
        return pa.table(cols)

    def poll(self) -> SourceBatch | None:
        if self.exhausted:
            return None
        if self.rate > 0 and self._produced / self.rate > time.monotonic() - self._t0:
            return None
        i = self._next
        table = self.batch(i)
        self._next += 1
        self._produced += table.num_rows
        return SourceBatch(table, {"next_batch": self._next}, f"{self.name}-{i:012d}",
                           origin=RowOrigin(None, None, i * self.batch_rows))

    def wait_hint(self) -> float:
        if self.rate <= 0:
            return 0.0
        return max(0.0, min(1.0, self._produced / self.rate - (time.monotonic() - self._t0)))

    @property
    def caught_up(self) -> bool:
        """A generator always has more: waiting for the rate is not being caught up."""
        return self.exhausted

    @property
    def exhausted(self) -> bool:
        return self.max_batches > 0 and self._next >= self.max_batches

    def close(self) -> None:
        pass


def build_source(cfg: Config, context: SourceContext) -> SourceSetup:
    """The generator source of ``cfg`` (``[generator]``): features, or their dissimilarities to the landmarks of
    the model in use (``generator.emit``; they follow refits when the run has a model registry).

    Raises:
        StartupError: the model was not fitted from ``generator.n_features``-dimensional features.
    """
    g, model, registry = cfg.generator, context.model, context.registry
    feats = model.features
    if feats is None or feats.shape[1] != g.n_features:
        have = "no landmark features" if feats is None else f"{feats.shape[1]} features"
        raise StartupError(f"source.kind = 'generator' needs a model fitted from {g.n_features}-dimensional "
                           f"feature vectors (generator.n_features), but model.path = {cfg.model.path!r} has "
                           f"{have}: leave model.path empty or fit the model with `streamembed fit --features`")
    to_diss: Callable[[np.ndarray], Any] | None = None
    if g.emit == "dissimilarities":
        if registry is None:
            to_diss = model.dissimilarities_to_landmarks
        else:
            def to_diss(X: np.ndarray) -> tuple[np.ndarray, int]:
                current = registry.current  # follow refits: stamp the landmark version used
                return current.dissimilarities_to_landmarks(X), int(current.version)
    return SourceSetup(GeneratorSource(GaussianMixtureStream(g), batch_rows=cfg.source.batch_rows, rate=g.rate,
                                       id_prefix=g.id_prefix, to_dissimilarities=to_diss))
