"""A model as bytes: in memory (``model_io.model_to_bytes`` / ``model_from_bytes``) against a temporary file.

    python -m benchmarks.bench_model_bytes [--landmarks 200,1000] [--dims 10] [--repeat 5] [--workdir DIR]

Before the bytes API the model topic and the Dask backfill wrote a model to
a temporary directory to get its bytes, and wrote bytes to one to load them
(``save_model`` then ``read_bytes``; ``write_bytes`` then ``load_model``). Both
ways are timed here in one run on the same fitted model (dissimilarity input:
the file holds the (n, n) landmark dissimilarities, so its size grows as n²),
best of ``--repeat``, with ``--workdir`` as the temporary files' directory
(default: the system's). Only the ratios mean something on a shared machine.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from scipy.spatial.distance import cdist

from benchmarks.timing import best_time
from streamembed import LandmarkMDS
from streamembed.model_io import load_model, model_from_bytes, model_to_bytes, save_model


def _through_a_file(model: object, workdir: str | None) -> tuple[object, object]:
    """The old way: (to bytes, from bytes) through a temporary directory."""
    def to_bytes() -> bytes:
        with tempfile.TemporaryDirectory(prefix="bench-model-", dir=workdir) as d:
            path = Path(d) / "model.npz"
            save_model(model, path)  # type: ignore[arg-type]
            return path.read_bytes()

    def from_bytes(data: bytes) -> object:
        with tempfile.TemporaryDirectory(prefix="bench-model-", dir=workdir) as d:
            path = Path(d) / "model.npz"
            path.write_bytes(data)
            return load_model(path)

    return to_bytes, from_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--landmarks", default="200,1000", help="comma-separated landmark counts")
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", default=None, help="directory of the temporary files (default: the system's)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print("| landmarks | bytes | to bytes, file (ms) | to bytes, memory (ms) | ratio | from bytes, file (ms) "
          "| from bytes, memory (ms) | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.landmarks.split(",")):
        L = rng.standard_normal((n, 20)) * 3.0
        model = LandmarkMDS(n_components=args.dims).fit(cdist(L, L)).model_
        data = model_to_bytes(model)
        file_to, file_from = _through_a_file(model, args.workdir)
        assert file_to() == data  # the same archive either way (fixed timestamps)
        t_file_to = best_time(file_to, args.repeat)
        t_mem_to = best_time(lambda: model_to_bytes(model), args.repeat)  # noqa: B023 - called in this iteration
        t_file_from = best_time(lambda: file_from(data), args.repeat)  # noqa: B023
        t_mem_from = best_time(lambda: model_from_bytes(data), args.repeat)  # noqa: B023
        print(f"| {n} | {len(data):,} | {t_file_to * 1e3:.2f} | {t_mem_to * 1e3:.2f} | {t_file_to / t_mem_to:.2f} "
              f"| {t_file_from * 1e3:.2f} | {t_mem_from * 1e3:.2f} | {t_file_from / t_mem_from:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
