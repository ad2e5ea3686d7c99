"""Throughput of `streamembed embed` (Parquet in, Parquet out) vs the core's in-memory `est.embed`.

    python -m benchmarks.bench_embed_file [--objects 1000000] [--landmarks 500] [--dims 10]

Writes a float32 Parquet file of m objects x n landmarks (uncompressed: random
floats do not compress), fits a landmark model, then times, in the same run:

* in-memory: ``est.embed(A)`` on the whole (m, n) float32 array (projection);
* file: ``streamembed embed in.parquet -m model.npz -o out.parquet`` (in
  process via ``streamembed.cli.main``: read, decode, validate, embed, encode,
  write zstd Parquet, atomic rename).

The input file is in the page cache (just written), so "file" measures
decoding and encoding, not the disk. Compare only the ratio (docs/performance.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.spatial.distance import cdist


def make_input(path: Path, m: int, n: int, p: int, landmarks: np.ndarray, rng: np.random.Generator,
               chunk: int = 65536) -> np.ndarray:
    """Write m objects to ``path`` in row groups of ``chunk``; returns the (m, n) float32 matrix."""
    A = np.empty((m, n), dtype=np.float32)
    schema = pa.schema([("id", pa.string()), ("dissimilarities", pa.list_(pa.float32(), n))])
    with pq.ParquetWriter(path, schema, compression="none") as w:
        for s in range(0, m, chunk):
            e = min(m, s + chunk)
            Z = rng.standard_normal((e - s, p)) * 3.0
            A[s:e] = cdist(Z, landmarks)
            ids = pa.array([f"o{i}" for i in range(s, e)])
            col = pa.FixedSizeListArray.from_arrays(pa.array(A[s:e].reshape(-1)), n)
            w.write_table(pa.table([ids, col], schema=schema), row_group_size=chunk)
    return A


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=1_000_000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--features", type=int, default=20, help="dimension of the synthetic feature space")
    ap.add_argument("--batch-rows", type=int, default=8192)
    ap.add_argument("--workdir", default=None, help="where to write the files (default: a temp dir)")
    ap.add_argument("--no-ipc", dest="ipc", action="store_false",
                    help="skip the comparison run with the same data as an Arrow IPC stream")
    args = ap.parse_args()

    from streamembed import LandmarkMDS
    from streamembed.cli import main as cli_main

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmpdir = Path(tmp)
        L = rng.standard_normal((args.landmarks, args.features)) * 3.0
        est = LandmarkMDS(n_components=args.dims).fit(cdist(L, L))
        est.save(tmpdir / "model.npz")
        t0 = time.perf_counter()
        A = make_input(tmpdir / "in.parquet", args.objects, args.landmarks, args.features, L, rng)
        size = (tmpdir / "in.parquet").stat().st_size
        print(f"input: {args.objects:,} x {args.landmarks} float32, {size / 1e9:.2f} GB Parquet "
              f"(written in {time.perf_counter() - t0:.1f} s)")

        est.embed(A[:4096])  # warm-up: kernels, buffers, thread pool
        mem_times = []
        for _ in range(3):
            t0 = time.perf_counter()
            est.embed(A)
            mem_times.append(time.perf_counter() - t0)
        t_mem = min(mem_times)
        del A

        out = tmpdir / "out.parquet"
        file_times = []
        for _ in range(2):
            t0 = time.perf_counter()
            rc = cli_main(["embed", str(tmpdir / "in.parquet"), "-m", str(tmpdir / "model.npz"), "-o", str(out),
                           "--batch-rows", str(args.batch_rows), "--progress", "never"])
            file_times.append(time.perf_counter() - t0)
            assert rc == 0
        t_file = min(file_times)
        rows = pq.ParquetFile(out).metadata.num_rows
        assert rows == args.objects, rows

        # where the time goes: decoding the Parquet input alone, and the same run from Arrow IPC
        t0 = time.perf_counter()
        for _ in pq.ParquetFile(tmpdir / "in.parquet", memory_map=True).iter_batches(batch_size=args.batch_rows):
            pass
        t_decode = time.perf_counter() - t0
        t_ipc = None
        if args.ipc:
            ipc_path = tmpdir / "in.arrows"
            with pa.OSFile(str(ipc_path), "wb") as sink, \
                    pa.ipc.new_stream(sink, pq.ParquetFile(tmpdir / "in.parquet").schema_arrow) as w:
                for b in pq.ParquetFile(tmpdir / "in.parquet").iter_batches(batch_size=args.batch_rows):
                    w.write_batch(b)
            (tmpdir / "in.parquet").unlink()
            t0 = time.perf_counter()
            rc = cli_main(["embed", str(ipc_path), "-m", str(tmpdir / "model.npz"), "-o", str(out),
                           "--batch-rows", str(args.batch_rows), "--progress", "never"])
            t_ipc = time.perf_counter() - t0
            assert rc == 0

    mem_rate = args.objects / t_mem
    file_rate = args.objects / t_file
    print(f"in-memory est.embed : {t_mem:7.3f} s  {mem_rate / 1e6:6.2f} M objects/s")
    print(f"streamembed embed   : {t_file:7.3f} s  {file_rate / 1e6:6.2f} M objects/s  (Parquet in and out)")
    print(f"ratio file / memory : {file_rate / mem_rate:.2f}")
    print(f"  of which: decoding the Parquet input alone takes {t_decode:.3f} s "
          f"({args.objects / t_decode / 1e6:.2f} M rows/s, pyarrow list-column decoding)")
    if t_ipc is not None:
        print(f"  same data as an Arrow IPC stream: {t_ipc:.3f} s, {args.objects / t_ipc / 1e6:.2f} M objects/s, "
              f"ratio {args.objects / t_ipc / mem_rate:.2f}")


if __name__ == "__main__":
    sys.exit(main())
