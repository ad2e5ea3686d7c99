"""Reading one Arrow IPC file: progressive (``embed``) against a whole-file snapshot (the directory source).

    python -m benchmarks.bench_progressive_arrow [--rows 300000] [--width 500] [--message-rows 10000] [--repeats 6]

Writes an Arrow IPC stream and file of ``--rows`` rows of ``--width`` float32
dissimilarities (600 MB by default; kept in the temporary directory's page
cache, so this measures reading and decoding, not the disk), then reads each
with :func:`streamembed.stream.readers.iter_file` in 8192-row chunks, with
``progressive=True`` (pyarrow's stream reader over the pooled slabs,
``stream/readers/ipc_framing.py``) and without (one snapshot read, then
decoding), alternating the order between repeats. Reports wall and CPU time
to read every chunk and the time to the first chunk (min-max over repeats),
and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from streamembed.stream.readers import iter_file


def write(path: Path, rows: int, width: int, message_rows: int, file_format: bool) -> Path:
    rng = np.random.default_rng(0)
    schema = pa.schema([("id", pa.string()), ("dissimilarities", pa.list_(pa.float32(), width))])
    with pa.OSFile(str(path), "wb") as sink:
        w = (ipc.new_file if file_format else ipc.new_stream)(sink, schema)
        for a in range(0, rows, message_rows):
            n = min(message_rows, rows - a)
            values = pa.array(rng.random((n, width), dtype=np.float32).ravel())
            w.write_batch(pa.record_batch([pa.array([f"x{i}" for i in range(a, a + n)]),
                                           pa.FixedSizeListArray.from_arrays(values, width)], schema))
        w.close()
    return path


def read(path: Path, progressive: bool, rows: int) -> tuple[float, float, float]:
    """(wall s, CPU s, s to the first chunk) to read every chunk of ``path``."""
    t0, c0 = time.perf_counter(), time.process_time()
    first, got = None, 0
    for chunk in iter_file(path, batch_rows=8192, progressive=progressive):
        if first is None:
            first = time.perf_counter() - t0
        assert not chunk.dead and chunk.table is not None
        got += chunk.table.num_rows
    assert got == rows
    return time.perf_counter() - t0, time.process_time() - c0, float(first or 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--width", type=int, default=500)
    ap.add_argument("--message-rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-progressive-") as tmp:
        files = {kind: write(Path(tmp) / f"in.{ext}", args.rows, args.width, args.message_rows, kind == "file")
                 for kind, ext in (("stream", "arrows"), ("file", "arrow"))}
        for rep in range(args.repeats):
            for kind, path in files.items():
                modes = (("progressive", True), ("snapshot", False))
                for mode, progressive in modes if rep % 2 == 0 else modes[::-1]:
                    results.setdefault((kind, mode), []).append(read(path, progressive, args.rows))
    print("| IPC | read | wall s | CPU s | first chunk ms |")
    print("|---|---|---|---|---|")
    for (kind, mode), values in results.items():
        v = np.array(values)
        wall, cpu, first = (f"{v[:, j].min() * k:.{d}f}-{v[:, j].max() * k:.{d}f}" for j, k, d in
                            ((0, 1, 3), (1, 1, 3), (2, 1e3, 1)))
        print(f"| {kind} | {mode} | {wall} | {cpu} | {first} |")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
