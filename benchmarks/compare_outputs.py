"""This checkout's outputs against an older checkout's, bit for bit, on a corpus of every method and input option.

    python -m benchmarks.compare_outputs --before /path/to/an/older/checkout [--after CHECKOUT] [--json F]
                                         [--schema-version {1,2}]

Each tree fits its own model (``streamembed fit``: model files are not
comparable across schema versions) from the same dissimilarities, then embeds
the same input file (``streamembed embed --k0-rows all``), and every output
column is compared: ``id``, ``method``, ``flags`` exactly, ``y``, ``beta``,
``unexplained``, ``k0``, ``t`` bit for bit (as raw IEEE bytes, so NaN equals
NaN and -0.0 differs from 0.0). Dead letters are compared by id and reason.

Both trees write output version 1 (``--schema-version``, default 1: float64
numbers, so bit-for-bit compares everything each tree computed); a tree
too old to know ``embed --schema-version`` writes version 1 anyway. With
``--schema-version 2`` both trees must know it, and the version-2 files are
compared through ``stream.output.as_version1`` (their float32 numbers widened).

The corpus: Euclidean points (a 2-D map of 5-D points, with exact landmark
rows, far rows and bad rows mixed in) and L1 dissimilarities (non-Euclidean),
under projection, RR, stress, L1, geodesic input, Cailliez's correction,
SMACOF and Sammon maps, in float32 and float64; and blocks of 8 with their
mutual dissimilarities. Block RR is reported with its largest difference
instead: its solver was replaced (batched trust region with a duality
certificate instead of multi-start L-BFGS), so agreement there is to the
solvers' tolerance, not bitwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.spatial.distance import cdist

HERE = Path(__file__).resolve().parents[1]
COLUMNS_EXACT = ("id", "method", "flags")
BLOCK_FILES = 6
COLUMNS_BITS = ("y", "beta", "unexplained", "k0", "t")

#: (name, fit flags, embed flags)
CASES = [
    ("projection", [], []),
    ("restricted", ["--method", "restricted"], ["--method", "restricted"]),
    ("stress", ["--method", "stress"], ["--method", "stress"]),
    ("l1", ["--method", "l1"], ["--method", "l1"]),
    ("geodesic", ["--geodesic-neighbors", "12"], []),
    ("cailliez", ["--correction", "cailliez"], []),
    ("smacof", ["--landmark-map", "smacof", "--method", "stress"], ["--method", "stress"]),
    ("sammon", ["--landmark-map", "sammon", "--method", "stress"], ["--method", "stress"]),
]


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env.update(PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1")
    return env


def _knows_schema_version(tree: Path) -> bool:
    """Whether the tree's ``embed`` takes ``--schema-version`` (older trees write version 1 only)."""
    r = subprocess.run([sys.executable, "-m", "streamembed", "embed", "--help"], env=_env(tree), capture_output=True,
                       text=True, timeout=120)
    return "--schema-version" in r.stdout


def _version_args(tree: Path, version: int) -> list[str]:
    if _knows_schema_version(tree):
        return ["--schema-version", str(version)]
    if version != 1:
        raise SystemExit(f"{tree}: embed has no --schema-version (it writes version 1 only)")
    return []


def _run(tree: Path, args: list[str], cwd: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "streamembed", *args], env=_env(tree), cwd=cwd, capture_output=True,
                       text=True, timeout=600)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{tree}: streamembed {' '.join(args)} exited {r.returncode}:\n{r.stderr[-2000:]}")


def _corpus(base: Path, rng: np.random.Generator) -> dict[str, tuple[Path, Path, Path]]:
    """name -> (landmark dissimilarities .npy, input Parquet, block input Parquet)."""
    out = {}
    for metric in ("euclidean", "cityblock"):
        P = rng.standard_normal((420, 5)) * [3, 2, 1, 0.3, 0.1]
        L, Z = P[:120], P[120:]
        D = cdist(L, L, metric)
        A = cdist(Z, L, metric)
        A[:5] = D[:5]  # objects at landmarks
        A[5:8] *= 40.0  # far out
        ids = [f"o{i}" for i in range(len(A))]
        rows = [list(map(float, a)) for a in A]
        rows[8] = rows[8][:-1]  # wrong length
        rows[9][3] = float("nan")  # non-finite
        rows[10][4] = -1.0  # negative
        np.save(base / f"{metric}-D.npy", D)
        for dtype in ("float64", "float32"):
            vals = pa.array(rows, pa.list_(pa.float64() if dtype == "float64" else pa.float32()))
            pq.write_table(pa.table({"id": ids, "dissimilarities": vals}), base / f"{metric}-{dtype}.parquet")
        k = 8
        m = BLOCK_FILES * k
        C = cdist(Z[:m], Z[:m], metric)
        cross = [list(map(float, C[i, (i // k) * k:(i // k + 1) * k])) for i in range(m)]
        blocks = base / f"{metric}-blocks"
        blocks.mkdir()
        for j in range(BLOCK_FILES):  # one block per file: the layout every version reads
            s = slice(j * k, (j + 1) * k)
            pq.write_table(pa.table({"id": ids[s], "dissimilarities": pa.array([list(map(float, a)) for a in A[s]]),
                                     "cross": cross[s]}), blocks / f"block-{j:03d}.parquet")
        out[metric] = (base / f"{metric}-D.npy", base / f"{metric}-float64.parquet", blocks)
    return out


def _bits(col: pa.ChunkedArray) -> np.ndarray:
    """A float column (or fixed-size list of floats) as raw bytes, nulls as a sentinel."""
    arr = col.combine_chunks()
    if pa.types.is_fixed_size_list(arr.type) or pa.types.is_list(arr.type):
        arr = arr.flatten()
    filled = np.asarray(arr.fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)
    return filled.view(np.uint64)


def _dead(root: Path) -> list[tuple[str, str]]:
    return sorted((str(i), str(r)) for f in root.glob("*.parquet") for i, r in
                  zip(pq.read_table(f).column("id").to_pylist(), pq.read_table(f).column("reason").to_pylist(),
                      strict=True))


def compare(before: Path, after: Path, schema_version: int = 1) -> list[dict]:
    rows: list[dict] = []
    version = {before: _version_args(before, schema_version), after: _version_args(after, schema_version)}
    with tempfile.TemporaryDirectory(prefix="compare-outputs-") as tmp:
        base = Path(tmp)
        corpus = _corpus(base, np.random.default_rng(0))
        for metric, (D, _, blocks) in corpus.items():
            for name, fit_flags, embed_flags in CASES:
                for dtype in ("float64", "float32"):
                    inp = base / f"{metric}-{dtype}.parquet"
                    tables, deads = {}, {}
                    for tree_name, tree in (("before", before), ("after", after)):
                        work = base / f"{metric}-{name}-{dtype}-{tree_name}"
                        work.mkdir()
                        _run(tree, ["fit", "--dissimilarities", str(D), "--landmarks", "120", "--selection", "first",
                                    "--n-components", "2", *fit_flags, "-o", "model.npz"], work)
                        _run(tree, ["embed", str(inp), "-m", "model.npz", "-o", "out.parquet", "--k0-rows", "all",
                                    "--dead-letter", "dead", *embed_flags, *version[tree]], work)
                        tables[tree_name] = _as_v1(pq.read_table(work / "out.parquet"))
                        deads[tree_name] = _dead(work / "dead")
                    rows.append(_compare_tables(f"{metric} {name} {dtype}", tables["before"], tables["after"],
                                                deads["before"], deads["after"], bitwise=True))
            tables = {}
            for tree_name, tree in (("before", before), ("after", after)):
                work = base / f"{metric}-blocks-{tree_name}"
                work.mkdir()
                _run(tree, ["fit", "--dissimilarities", str(D), "--landmarks", "120", "--selection", "first",
                            "--n-components", "2", "--method", "restricted", "-o", "model.npz"], work)
                parts = []
                for f in sorted(blocks.glob("*.parquet")):  # one call per file: older versions take one input
                    _run(tree, ["embed", str(f), "-m", "model.npz", "-o", f"out-{f.stem}.parquet", "--k0-rows", "all",
                                "--method", "restricted", *version[tree]], work)
                    parts.append(_as_v1(pq.read_table(work / f"out-{f.stem}.parquet")))
                tables[tree_name] = pa.concat_tables(parts, promote_options="permissive")
            rows.append(_compare_tables(f"{metric} block RR k=8 float64", tables["before"], tables["after"], [], [],
                                        bitwise=False))
    return rows


def _as_v1(table: pa.Table) -> pa.Table:
    """Output of either version as version 1 (a tree that writes version 2 compares with one that writes 1)."""
    if (table.schema.metadata or {}).get(b"streamembed.schema_version", b"1") == b"1":
        return table
    from streamembed.stream.output import as_version1

    return as_version1(table)


def _compare_tables(case: str, b: pa.Table, a: pa.Table, dead_b: list, dead_a: list, bitwise: bool) -> dict:
    res: dict = {"case": case, "rows": a.num_rows, "dead letters": len(dead_a)}
    problems = []
    if b.num_rows != a.num_rows:
        problems.append(f"rows {b.num_rows} -> {a.num_rows}")
    if dead_b != dead_a:
        problems.append(f"dead letters differ: {sorted(set(dead_b) ^ set(dead_a))[:5]}")
    if not problems:
        for c in COLUMNS_EXACT:
            if c in b.column_names and b.column(c).to_pylist() != a.column(c).to_pylist():
                problems.append(f"{c} differs")
        worst = 0.0
        for c in COLUMNS_BITS:
            xb, xa = _bits(b.column(c)), _bits(a.column(c))
            if bitwise and not np.array_equal(xb, xa):
                problems.append(f"{c}: {int((xb != xa).sum())} values differ")
            fb, fa = xb.view(np.float64), xa.view(np.float64)
            both = np.isfinite(fb) & np.isfinite(fa)
            if both.any():
                scale = max(1.0, float(np.abs(fb[both]).max()))
                worst = max(worst, float(np.abs(fb[both] - fa[both]).max()) / scale)
        res["largest difference (relative)"] = worst
    res["identical"] = not problems and (res.get("largest difference (relative)", 1.0) == 0.0 or not bitwise)
    res["problems"] = "; ".join(problems)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=HERE, help="the newer checkout (default: this one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--schema-version", type=int, choices=(1, 2), default=1,
                    help="output version both trees write (default 1: float64 numbers, compared bit for bit)")
    args = ap.parse_args(argv)
    rows = compare(args.before.resolve(), args.after.resolve(), args.schema_version)
    print("| case | rows | dead letters | bit for bit | largest difference (relative) | problems |")
    print("| --- | ---: | ---: | --- | ---: | --- |")
    for r in rows:
        bitwise = "—" if "block RR" in r["case"] else ("yes" if r["identical"] else "NO")
        print(f"| {r['case']} | {r['rows']} | {r['dead letters']} | {bitwise} | "
              f"{r.get('largest difference (relative)', float('nan')):.3g} | {r['problems']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
