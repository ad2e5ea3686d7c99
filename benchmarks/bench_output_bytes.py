"""Output schema versions 1 and 2: bytes written per row and the CPU of encoding, on the same placed rows.

    python -m benchmarks.bench_output_bytes [--objects 300000] [--landmarks 500] [--dims 10] [--repeat 3]

The rows (float32 dissimilarities of Gaussian points to 500 landmarks) are
placed once per version by the ``BatchEmbedder`` in batches of 8,192, as
``streamembed embed`` does; the outputs are then written with the
``ParquetSink`` (zstd, 65,536-row groups) and timed alone: CPU seconds of
the thread that builds the Arrow batches (``encode``) and of the write,
including the write-behind thread (process CPU). The table gives bytes per
row of the published file and the medians over ``--repeat`` runs; the file
is also read back with pyarrow, pandas (a numeric ``y`` matrix in one call)
and, when installed, DuckDB.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.spatial.distance import cdist


from streamembed import LandmarkMDS
from streamembed.stream.codecs import encode_result
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.output import y_matrix
from streamembed.stream.sinks import ParquetSink


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=300_000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    L = rng.standard_normal((args.landmarks, 20)) * 3.0
    est = LandmarkMDS(n_components=args.dims).fit(cdist(L, L))
    m, step = args.objects, 8192
    A = np.empty((m, args.landmarks), dtype=np.float32)
    for s in range(0, m, 65536):
        e = min(m, s + 65536)
        A[s:e] = cdist(rng.standard_normal((e - s, 20)) * 3.0, L)
    ids = pa.array([f"o{i}" for i in range(m)], pa.string())
    tables = [pa.table({"id": ids[s:s + step],
                        "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A[s:s + step].ravel()),
                                                                             args.landmarks)})
              for s in range(0, m, step)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-bytes-") as tmp:
        for version in (1, 2):
            emb = BatchEmbedder(est.model_, output_version=version)
            encode, write, size = [], [], 0
            done = [emb.process(t) for t in tables]
            outs = [d.output for d in done]
            for _ in range(args.repeat):
                t0 = time.thread_time()  # the encoding alone, on this thread: the same results encoded again
                for d, t in zip(done, tables, strict=False):
                    encode_result(t.column("id").combine_chunks(), d.results[0], model_version=1,
                                  event_time=pa.nulls(t.num_rows, pa.timestamp("us", tz="UTC")),
                                  processed_at_us=0, bit_names=emb.bit_names, version=version,
                                  dtype=np.float32, lineage="x")
                encode.append(time.thread_time() - t0)
                sink = ParquetSink(Path(tmp) / f"v{version}", final_name="out.parquet")
                c0 = time.process_time()
                for o in outs:
                    sink.write(o, "x")
                path = sink.flush("x")
                write.append(time.process_time() - c0)
                size = path.stat().st_size
            table = pq.read_table(path)
            readers = [f"pyarrow {table.num_rows} rows"]
            try:
                import pandas as pd

                df = pd.read_parquet(path)
                Y = df.filter(regex=r"^y\d+$").to_numpy() if version == 2 else np.stack(df["y"].to_numpy())
                readers.append(f"pandas y {Y.shape} {Y.dtype}")
                assert np.array_equal(Y, y_matrix(table))
            except ImportError:
                pass
            try:
                import duckdb

                q = "SELECT count(*), avg(y0) FROM read_parquet(?)" if version == 2 else \
                    "SELECT count(*), avg(y[1]) FROM read_parquet(?)"
                n, _ = duckdb.execute(q, [str(path)]).fetchone()
                readers.append(f"duckdb {n} rows")
            except ImportError:
                pass
            rows.append((version, size / m, statistics.median(encode), statistics.median(write), "; ".join(readers)))
    print(f"{m:,} rows, float32 input, d = {args.dims}, projection; zstd Parquet; medians of {args.repeat}\n")
    print("| output version | bytes per row | encode CPU s | write CPU s (zstd, all threads) | read back |")
    print("| --- | ---: | ---: | ---: | --- |")
    for version, bpr, enc, wr, readers in rows:
        print(f"| {version} | {bpr:.1f} | {enc:.3f} | {wr:.3f} | {readers} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
