"""`streamembed embed` and the directory daemon against the I/O-only ceiling and a hand-written script.

    python -m benchmarks.bench_file_ceiling [--objects 300000] [--landmarks 500] [--dims 10] [--repeat 5]
                                            [--formats arrows,parquet-fsb,parquet-list] [--no-daemon]
                                            [--tree PATH] [--embed-args ARGS] [--daemon-mmap auto|always|never]
                                            [--json OUT.json]

Every command is a whole process (``python``, this interpreter, ``PYTHONPATH``
= the tree), run one after the other on the same input in the page cache, in
rounds; each round runs every command once, in a rotating order, and the
ratios are taken within a round (the machine is shared: only ratios of one
round mean anything; the table gives their median and range over the rounds).
Per input format (Arrow IPC stream; Parquet in the fast ``fixed_size_binary``
layout; Parquet ``fixed_size_list<float32>``):

* ``embed``: ``streamembed embed IN -m model.npz -o OUT --progress never``;
* ``ceiling``: the I/O-only ceiling (:data:`CEILING`): memory-map the input,
  read it, and write an output of the same rows *and schema* as ``embed``'s
  with no computation, laid out as ``embed``'s own file (read from it): the
  columns it writes all null are written null, the others' float columns are
  copies of input columns (they compress like real values; a zero output
  compresses to nothing), strings are the ids, the rest constants; zstd
  Parquet with the columns ``embed`` dictionary-encodes dictionary-encoded
  and its row-group size. (Until issue 36 it wrote the null columns as real
  floats, the ids with a dictionary and a row group per input batch: 0.2
  CPU-s more than ``embed``'s writing at 1M x 200, a ceiling too low.) It does
  not fsync its output, which ``embed`` does (its atomic publication);
* ``bound``: the least any ``embed`` must do (:data:`BOUND`), in ``embed``'s
  own pipeline: the ceiling with its Parquet writing on a thread of its own
  (as ``embed``'s sink), plus loading the model and the compiled projection
  of every row on the reading thread (``embed``'s own kernel), with no
  checks, flags, monitors or output columns of its own. ``ceiling / bound`` is
  the best ``ceiling / embed`` this machine allows; ``bound / embed`` says
  how much of that ``embed``'s checks, monitors and columns cost;
* ``script``: the 15-line program a user would write (:data:`SCRIPT`):
  memory-mapped read, ``LandmarkMDS.transform`` per record batch, write id +
  float32 ``y`` as zstd Parquet;
* ``daemon`` (Arrow IPC only): ``streamembed run`` on a directory holding the
  file, batch mode (``directory.exit_when_idle``), the default drift monitor,
  whole process; ``daemon-startup`` is the same command on an empty directory.

The inputs are published as the docs ask producers to (written under another
name, renamed into place), so ``embed``'s default (``--mmap auto``) maps them as
the script and the ceiling do; ``--embed-args "--mmap never"`` measures the copy
that a file written in place gets.

Targets (issue 36): ``ceiling / embed >= 0.8`` and ``script / embed >= 1.2``
for Arrow IPC and fast-layout Parquet, ``ceiling / daemon >= 0.7``.

Every command runs with compiled bytecode, as an installed package does: the
children get ``PYTHONPYCACHEPREFIX`` (a directory of the run) and never
``PYTHONDONTWRITEBYTECODE``, and one unrecorded round compiles what each
imports. (With ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in the tree,
every process compiled streamembed's modules from source: 0.3 CPU-s each for
``embed`` and the script, none for the ceiling.) Besides wall times the table
gives the ratios of CPU times (user + system of the child process): on a
loaded machine they move less than wall times, and a ratio of CPU times above
the wall ratio says how much ``embed`` gains from its second core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parents[1]

#: The I/O-only ceiling: read IN (memory-mapped), write OUT with the schema of SCHEMA_FROM, no computation.
#: Every array is built from buffers: ``pa.array`` of a NumPy array or of Python values, and ``to_numpy``,
#: import pandas (0.25-0.5 CPU-s), which is no part of reading and writing; the last line checks it did not.
CEILING = r"""
import sys, numpy as np, pyarrow as pa, pyarrow.ipc as ipc, pyarrow.parquet as pq
src, out, schema_from = sys.argv[1:4]
schema = pq.read_schema(schema_from)
meta = pq.ParquetFile(schema_from).metadata  # embed's own output: its null columns, dictionaries, row groups
group = meta.row_group(0)
empty = {group.column(i).path_in_schema for i in range(group.num_columns)
         if all(meta.row_group(g).column(i).statistics is not None
                and meta.row_group(g).column(i).statistics.null_count == meta.row_group(g).num_rows
                for g in range(meta.num_row_groups))}
dictionary = [group.column(i).path_in_schema for i in range(group.num_columns)
              if "RLE_DICTIONARY" in group.column(i).encodings or "PLAIN_DICTIONARY" in group.column(i).encodings]
rows_per_group = group.num_rows
if src.endswith(".parquet"):
    batches = pq.ParquetFile(pa.memory_map(src)).iter_batches(batch_size=65536)
else:
    f = pa.memory_map(src)
    r = ipc.open_file(f) if f.read(6) == b"ARROW1" else None
    batches = (r.get_batch(i) for i in range(r.num_record_batches)) if r else (f.seek(0), ipc.open_stream(f))[1]
def values(col, m):
    if pa.types.is_fixed_size_binary(col.type):
        return np.frombuffer(col.buffers()[1], np.float32, m * col.type.byte_width // 4).reshape(m, -1)
    n = col.type.list_size
    return np.frombuffer(col.buffers()[2], np.float32, m * n, 4 * n * col.offset).reshape(m, n)
def array(t, a):
    return pa.Array.from_buffers(t, len(a), [None, pa.py_buffer(np.ascontiguousarray(a))])
def text(words):
    data = "".join(words).encode()
    offsets = np.cumsum([0] + [len(w.encode()) for w in words]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(words), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
writer, k, pending, held = pq.ParquetWriter(out, schema, compression="zstd", use_dictionary=dictionary), 0, [], 0
for b in batches:
    m = b.num_rows
    A = values(b.column(b.schema.get_field_index("dissimilarities")), m)
    cols = []
    for f in schema:
        t = f.type
        if f.name in empty:
            cols.append(pa.nulls(m, t))
        elif pa.types.is_string(t):
            cols.append(b.column(b.schema.get_field_index("id")))
        elif pa.types.is_fixed_size_list(t):
            v = A[:, :t.list_size].astype(t.value_type.to_pandas_dtype()).ravel()
            cols.append(pa.FixedSizeListArray.from_arrays(array(t.value_type, v), t.list_size))
        elif pa.types.is_floating(t):
            cols.append(array(t, A[:, k % A.shape[1]].astype(t.to_pandas_dtype()))); k += 1
        elif pa.types.is_dictionary(t):
            codes = array(t.index_type, np.zeros(m, t.index_type.to_pandas_dtype()))
            cols.append(pa.DictionaryArray.from_arrays(codes, text(["projection"])))
        elif pa.types.is_list(t):
            empty = pa.Array.from_buffers(t.value_type, 0, [None, pa.py_buffer(np.zeros(1, np.int32)), None])
            cols.append(pa.Array.from_buffers(t, m, [None, pa.py_buffer(np.zeros(m + 1, np.int32))], children=[empty]))
        else:
            cols.append(array(t, np.zeros(m, np.int64 if pa.types.is_timestamp(t) else t.to_pandas_dtype())))
    k = 0
    pending.append(pa.RecordBatch.from_arrays(cols, schema=schema)); held += m
    if held >= rows_per_group:
        writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=max(held, rows_per_group))
        pending, held = [], 0
if pending:
    writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=max(held, rows_per_group))
writer.close()
assert "pandas" not in sys.modules, "the ceiling imported pandas"
"""

#: The least any ``embed`` must do, in ``embed``'s own pipeline: the ceiling's reading and writing, the Parquet
#: writing on a thread of its own (as ``embed``'s sink does), plus loading the model and the compiled projection of
#: every row (``embed``'s own kernel) on the reading thread - no checks, no flags, no monitors, no output columns
#: of its own. ``ceiling / bound`` is the best ``ceiling / embed`` this machine allows a pipelined ``embed``.
_WRITER = ('writer, k, pending, held = pq.ParquetWriter(out, schema, compression="zstd", use_dictionary=dictionary), '
           '0, [], 0')
BOUND = CEILING.replace(
    "src, out, schema_from = sys.argv[1:4]\n",
    "src, out, schema_from = sys.argv[1:4]\n"
    "import queue, threading\n"
    "from streamembed.model_io import load_model\n"
    "model = load_model(sys.argv[4])\n"
    "project = model.placer.kernel(model.n_components, np.float32)\n",
).replace(
    '    A = values(b.column(b.schema.get_field_index("dissimilarities")), m)\n',
    '    A = values(b.column(b.schema.get_field_index("dissimilarities")), m)\n'
    '    project(A)\n',
).replace(
    _WRITER,
    _WRITER.replace("writer, ", "parquet, ", 1) + "\n"
    "class Behind:  # write_table and close on a thread of their own, at most two tables queued (embed's sink)\n"
    "    def __init__(self, w):\n"
    "        self.w, self.q = w, queue.Queue(2)\n"
    "        self.t = threading.Thread(target=self.run); self.t.start()\n"
    "    def run(self):\n"
    "        while (item := self.q.get()) is not None:\n"
    "            self.w.write_table(item[0], row_group_size=item[1])\n"
    "    def write_table(self, table, row_group_size):\n"
    "        self.q.put((table, row_group_size))\n"
    "    def close(self):\n"
    "        self.q.put(None); self.t.join(); self.w.close()\n"
    "writer = Behind(parquet)\n",
)
assert BOUND.count("project(A)") == 1 and "load_model" in BOUND and "\nparquet, k, pending" in BOUND

#: The program a user would write: memory-mapped read, LandmarkMDS.transform, write id + float32 y (zstd Parquet).
SCRIPT = r"""
import sys, numpy as np, pyarrow as pa, pyarrow.ipc as ipc, pyarrow.parquet as pq
from streamembed import LandmarkMDS
src, model, out = sys.argv[1:4]
est = LandmarkMDS.load(model)
if src.endswith(".parquet"):
    batches = pq.ParquetFile(pa.memory_map(src)).iter_batches(batch_size=65536)
else:
    f = pa.memory_map(src)
    r = ipc.open_file(f) if f.read(6) == b"ARROW1" else None
    batches = (r.get_batch(i) for i in range(r.num_record_batches)) if r else (f.seek(0), ipc.open_stream(f))[1]
ids, ys = [], []
for b in batches:
    col = b.column(b.schema.get_field_index("dissimilarities"))
    if pa.types.is_fixed_size_binary(col.type):
        A = np.frombuffer(col.buffers()[1], np.float32, len(col) * col.type.byte_width // 4).reshape(len(col), -1)
    else:
        A = col.flatten().to_numpy().reshape(len(col), -1)
    ys.append(est.transform(A).astype(np.float32)); ids.append(b.column(b.schema.get_field_index("id")))
Y = np.concatenate(ys)
y = pa.FixedSizeListArray.from_arrays(pa.array(Y.ravel()), Y.shape[1])
pq.write_table(pa.table({"id": pa.chunked_array(ids), "y": y}), out, compression="zstd")
"""


#: Where the children keep their bytecode (set by ``main`` to a directory of the run).
PYCACHE: dict[str, str] = {}


def _env(tree: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")
           and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(tree)
    env.update(PYCACHE)
    env.update(more)
    return env


def _run(tree: Path, args: list[str], cwd: Path, ok: tuple[int, ...] = (0,), **env: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process (``nice``d as the caller is)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *args], env=_env(tree, **env), cwd=cwd, capture_output=True, text=True,
                       timeout=1800)
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in ok:
        raise RuntimeError(f"{' '.join(args[:4])} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return seconds, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def make_inputs(base: Path, m: int, n: int, d: int, formats: list[str], in_place: bool = False) -> dict[str, Path]:
    """The model and the input files (the same rows in every format); published by rename, or written in place."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(0)
    L = rng.standard_normal((n, 20)) * 3.0
    np.save(base / "D.npy", cdist(L, L))
    A = np.empty((m, n), dtype=np.float32)
    for s in range(0, m, 65536):
        e = min(m, s + 65536)
        A[s:e] = cdist(rng.standard_normal((e - s, 20)) * 3.0, L)
    ids = pa.array([f"o{i}" for i in range(m)], pa.string())
    paths = {}
    for fmt in formats:
        if fmt == "arrows":
            table = pa.table({"id": ids, "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.ravel()), n)})
            paths[fmt] = base / "in.arrows"
            with pa.OSFile(str(_unpublished(paths[fmt])), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
                for b in table.to_batches(max_chunksize=8192):
                    w.write_batch(b)
        else:
            if fmt == "parquet-fsb":
                col = pa.FixedSizeBinaryArray.from_buffers(pa.binary(4 * n), m, [None, pa.py_buffer(A)])
            else:
                col = pa.FixedSizeListArray.from_arrays(pa.array(A.ravel()), n)
            paths[fmt] = base / f"in-{fmt}.parquet"
            pq.write_table(pa.table({"id": ids, "dissimilarities": col}), _unpublished(paths[fmt]),
                           compression="none", row_group_size=65536, use_dictionary=["id"])
    for path in paths.values():  # published as the docs ask producers to: written aside, renamed into place
        if in_place:
            os.replace(_unpublished(path), path)
            os.utime(path)  # written in place: its last write is its last change (ctime == mtime)
        else:
            _publish(path)
    return paths


def _publish(path: Path) -> None:
    """fsync the file written aside and rename it into place, as a producer that wants it durable does. (A rename
    in the same tick of the kernel's coarse clock as the last write leaves ctime == mtime, and ``auto`` would take
    the file for one written in place: the fsync makes the gap, as it does for a real producer.)"""
    aside = _unpublished(path)
    fd = os.open(aside, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(aside, path)
    st = path.stat()
    if st.st_ctime_ns <= st.st_mtime_ns:
        print(f"warning: {path.name} does not look published by rename (ctime == mtime): embed will copy it",
              file=sys.stderr)


def _unpublished(path: Path) -> Path:
    """Where an input is written before it is renamed into place (a name no reader picks up)."""
    return path.with_name(f".{path.name}.tmp")


def report(times: dict[str, list[float]], cpu: dict[str, list[float]], formats: list[str], daemon: bool,
           title: str) -> dict[str, object]:
    """Print the table (median and range of the within-round ratios); return them."""
    def ratios(num: str, den: str, of: dict[str, list[float]] = times) -> list[float]:
        return [a / b for a, b in zip(of[num], of[den], strict=True)]

    def cell(r: list[float]) -> str:
        return f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"

    print(title + "\n")
    print("| input | embed s (median) | ceiling s | bound s | script s | ceiling / embed (median, range) | "
          "ceiling / bound | bound / embed | script / embed (median, range) | CPU s: embed, ceiling, bound, "
          "script | CPU ceiling / embed | CPU script / embed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary: dict[str, object] = {"times": times, "cpu": cpu}
    for fmt in formats:
        e, c, b, s = (f"{fmt} {w}" for w in ("embed", "ceiling", "bound", "script"))
        rc, rs, rb, be = ratios(c, e), ratios(s, e), ratios(c, b), ratios(b, e)
        cc, cs = ratios(c, e, cpu), ratios(s, e, cpu)
        summary[fmt] = {"ceiling_over_embed": rc, "script_over_embed": rs, "cpu_ceiling_over_embed": cc,
                        "cpu_script_over_embed": cs, "ceiling_over_bound": rb, "bound_over_embed": be}
        print(f"| {fmt} | {statistics.median(times[e]):.2f} | {statistics.median(times[c]):.2f} | "
              f"{statistics.median(times[b]):.2f} | {statistics.median(times[s]):.2f} | {cell(rc)} | {cell(rb)} | "
              f"{cell(be)} | {cell(rs)} | {statistics.median(cpu[e]):.2f}, {statistics.median(cpu[c]):.2f}, "
              f"{statistics.median(cpu[b]):.2f}, {statistics.median(cpu[s]):.2f} | {cell(cc)} | {cell(cs)} |")
    if "arrows" in formats and daemon:
        rd = ratios("arrows ceiling", "arrows daemon")
        net = [c / max(dm - st, 1e-3) for c, dm, st in zip(times["arrows ceiling"], times["arrows daemon"],
                                                            times["arrows daemon-startup"], strict=True)]
        cd = ratios("arrows ceiling", "arrows daemon", cpu)
        summary["daemon"] = {"ceiling_over_daemon": rd, "ceiling_over_daemon_net_of_startup": net,
                             "cpu_ceiling_over_daemon": cd}
        print(f"\ndirectory daemon (arrows, whole process): {statistics.median(times['arrows daemon']):.2f} s, "
              f"start-up alone {statistics.median(times['arrows daemon-startup']):.2f} s; ceiling / daemon "
              f"{cell(rd)}; net of start-up {cell(net)}; CPU s daemon {statistics.median(cpu['arrows daemon']):.2f}, "
              f"start-up {statistics.median(cpu['arrows daemon-startup']):.2f}; CPU ceiling / daemon {cell(cd)}")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=300_000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--formats", default="arrows,parquet-fsb,parquet-list")
    ap.add_argument("--no-daemon", dest="daemon", action="store_false")
    ap.add_argument("--tree", type=Path, default=HERE, help="the checkout whose streamembed runs (default: this one)")
    ap.add_argument("--embed-args", default="",
                    help="extra arguments for streamembed embed (e.g. '--schema-version 1')")
    ap.add_argument("--daemon-mmap", choices=("auto", "always", "never"),
                    help="directory.mmap for the daemon (default: its own default)")
    ap.add_argument("--written-in-place", action="store_true",
                    help="inputs written in place (ctime = mtime), not published by rename")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tree = args.tree.resolve()
    formats = [f for f in args.formats.split(",") if f]
    m = args.objects
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        base = Path(tmp)
        PYCACHE["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
        paths = make_inputs(base, m, args.landmarks, args.dims, formats, args.written_in_place)
        model = base / "model.npz"
        _run(tree, ["-m", "streamembed", "fit", "--dissimilarities", str(base / "D.npy"), "--n-components",
                    str(args.dims), "-o", str(model)], base)
        (base / "dir").mkdir()
        (base / "empty").mkdir()
        if "arrows" in paths:
            os.link(paths["arrows"], base / "dir" / "in.arrows")
        daemon_env = {"STREAMEMBED_MODEL__PATH": str(model), "STREAMEMBED_SOURCE__KIND": "directory",
                      "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0", "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
                      "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_LOGGING__LEVEL": "WARNING"}
        if args.daemon_mmap:
            daemon_env["STREAMEMBED_DIRECTORY__MMAP"] = args.daemon_mmap
        extra = args.embed_args.split()

        def commands(fmt: str, rnd: int) -> dict[str, list]:
            src, out = str(paths[fmt]), base / f"out-{fmt}-{rnd}"
            cmds = {
                f"{fmt} embed": [["-m", "streamembed", "embed", src, "-m", str(model), "-o", f"{out}-embed.parquet",
                                  "--progress", "never", *extra], {}],
                f"{fmt} ceiling": [["-c", CEILING, src, f"{out}-ceiling.parquet", str(base / f"schema-{fmt}.parquet")],
                                   {}],
                f"{fmt} script": [["-c", SCRIPT, src, str(model), f"{out}-script.parquet"], {}],
                f"{fmt} bound": [["-c", BOUND, src, f"{out}-bound.parquet", str(base / f"schema-{fmt}.parquet"),
                                  str(model)], {}],
            }
            if fmt == "arrows" and args.daemon:
                cmds["arrows daemon"] = [["-m", "streamembed", "run"], dict(
                    STREAMEMBED_DIRECTORY__PATH=str(base / "dir"), STREAMEMBED_OUTPUT__ROOT=str(base / f"root-{rnd}"),
                    **daemon_env)]
                cmds["arrows daemon-startup"] = [["-m", "streamembed", "run"], dict(
                    STREAMEMBED_DIRECTORY__PATH=str(base / "empty"),
                    STREAMEMBED_OUTPUT__ROOT=str(base / f"empty-{rnd}"), **daemon_env)]
            return cmds

        for fmt in formats:  # warm-up: the page cache, and the output schema the ceiling copies
            warm = base / f"schema-{fmt}.parquet"
            _run(tree, ["-m", "streamembed", "embed", str(paths[fmt]), "-m", str(model), "-o", str(warm),
                        "--progress", "never", *extra], base)
            got = pq.ParquetFile(warm).metadata.num_rows
            if got != m:
                raise RuntimeError(f"embed wrote {got} of {m} rows")
        for rnd in range(-1, args.repeat):  # round -1 compiles every command's bytecode and is not recorded
            order = [(name, cmd) for fmt in formats for name, cmd in commands(fmt, rnd).items()]
            k = rnd % len(order)
            for name, (cmd, env) in order[k:] + order[:k]:
                wall, used = _run(tree, cmd, base, ok=(0, 1), **env)
                if rnd >= 0:
                    times.setdefault(name, []).append(wall)
                    cpu.setdefault(name, []).append(used)
            for p in base.glob(f"out-*-{rnd}-*.parquet"):
                p.unlink()
            for p in base.glob(f"root-{rnd}"):
                shutil.rmtree(p)
            print(f"round {rnd + 1}/{args.repeat} done", file=sys.stderr, flush=True)

    where = "written in place" if args.written_in_place else "published by rename"
    summary = report(times, cpu, formats, args.daemon, f"{m:,} objects x {args.landmarks} landmarks float32, "
                     f"projection, d = {args.dims}; inputs {where}; {args.repeat} rounds; tree {tree}; "
                     f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
