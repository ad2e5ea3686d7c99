"""Several blocks in one batch: decoding, one solver call, refusals per block, whole-block file chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from streamembed.stream.blocks import block_units
from streamembed.stream.codecs import decode_batch
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.readers import iter_file
from streamembed.stream.records import Reason

from .helpers import N_LANDMARKS, blocks_table, fitted, write_arrow, write_jsonl, write_parquet


def _placed(out) -> dict[str, np.ndarray]:
    tab = pa.Table.from_batches([out.output])
    ys = np.asarray(tab.column("y").to_pylist())
    return dict(zip(tab.column("id").to_pylist(), ys, strict=True))


def test_blocks_and_single_objects_of_one_batch_are_decoded_apart() -> None:
    table, A, mats = blocks_table([2, 3, 1], singles_between=1)
    dec = decode_batch(table, n_landmarks=N_LANDMARKS)
    assert not dec.dead and dec.blocks is not None
    assert dec.blocks.sizes.tolist() == [2, 3, 1]
    # rows: b0 (0, 1), single (2), b1 (3, 4, 5), single (6), b2 (7), single (8)
    assert dec.blocks.rows.tolist() == [0, 1, 3, 4, 5, 7]
    for got, want in zip(dec.blocks.cross, mats, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key_type", [pa.string(), pa.int64()])
def test_every_block_of_a_batch_is_placed_as_if_it_were_alone(key_type: pa.DataType) -> None:
    """One solver call for all blocks; each block's placement equals the block placed on its own, and the
    single objects get the configured method."""
    model = fitted()
    table, A, mats = blocks_table([2, 5, 3, 8], singles_between=2, key_type=key_type)
    out = BatchEmbedder(model, method="projection").process(table)
    assert out.dead == []
    got = _placed(out)
    assert len(got) == table.num_rows
    start = 0
    ids = table.column("id").to_pylist()
    for b, C in enumerate(mats):
        k = C.shape[0]
        rows = [i for i, x in enumerate(ids) if x.startswith(f"b{b}-")]
        alone = model.place(A[rows], C).y
        np.testing.assert_allclose(np.vstack([got[ids[i]] for i in rows]), alone, rtol=1e-9, atol=1e-9)
        start += k
    singles = [i for i, x in enumerate(ids) if x.startswith("s")]
    np.testing.assert_allclose(np.vstack([got[ids[i]] for i in singles]), model.place(A[singles]).y, rtol=1e-12)
    methods = dict(zip(pa.Table.from_batches([out.output]).column("id").to_pylist(),
                       pa.Table.from_batches([out.output]).column("method").to_pylist(), strict=True))
    assert {methods[ids[i]] for i in singles} == {"projection"}
    assert {m for x, m in methods.items() if x.startswith("b")} == {"block"}


def test_a_bad_block_is_refused_whole_and_the_others_are_placed() -> None:
    model = fitted()
    table, A, mats = blocks_table([3, 4, 2, 3])
    cross = table.column("cross").to_pylist()
    cross[3][1] += 5.0  # block 1, row 0: asymmetric
    cross[10] = cross[10][:2]  # block 3, row 1: wrong length
    table = table.set_column(table.schema.get_field_index("cross"), "cross", pa.array(cross, pa.list_(pa.float64())))
    out = BatchEmbedder(model).process(table)
    dead = {d.id: d for d in out.dead}
    assert set(dead) == {f"b1-{i}" for i in range(4)} | {f"b3-{i}" for i in range(3)}
    assert {d.reason for d in dead.values()} == {Reason.BAD_BLOCK}
    assert "symmetric" in dead["b1-0"].detail
    assert "block 'blk3'" in dead["b3-0"].detail and "expected k = 3" in dead["b3-0"].detail
    assert set(_placed(out)) == {f"b0-{i}" for i in range(3)} | {f"b2-{i}" for i in range(2)}


def test_a_split_block_an_oversized_block_and_stray_cross_rows_are_refused() -> None:
    model = fitted()
    table, _, _ = blocks_table([2, 2, 2, 6], keys=["x", "y", "x", "big"], singles_between=0)
    cross = table.column("cross").to_pylist()
    blocks = table.column("block").to_pylist()
    # a single object (null block) that carries cross anyway
    table = pa.concat_tables([table, pa.table({
        "id": ["stray"], "dissimilarities": pa.array([table.column("dissimilarities")[0].as_py()],
                                                     table.schema.field("dissimilarities").type),
        "cross": pa.array([cross[0]], pa.list_(pa.float64())), "block": pa.array([None], pa.string())})])
    assert blocks[:6] == ["x", "x", "y", "y", "x", "x"]
    out = BatchEmbedder(model, max_block_rows=5).process(table)
    dead = {d.id: d for d in out.dead}
    assert "split" in dead["b0-0"].detail and "split" in dead["b2-1"].detail
    assert "max_block_rows = 5" in dead["b3-0"].detail
    assert "null" in dead["stray"].detail
    assert set(_placed(out)) == {"b1-0", "b1-1"}


def test_a_member_that_fails_fails_its_block_only() -> None:
    model = fitted()
    table, _, _ = blocks_table([3, 3])
    ids = table.column("id").to_pylist()
    ids[4] = None
    table = table.set_column(0, "id", pa.array(ids, pa.string()))
    out = BatchEmbedder(model).process(table)
    reasons = sorted((d.row, d.reason) for d in out.dead)
    assert reasons == [(3, Reason.BAD_BLOCK), (4, Reason.MISSING_ID), (5, Reason.BAD_BLOCK)]
    assert "member at row 4 failed (missing_id)" in [d for d in out.dead if d.row == 3][0].detail
    assert set(_placed(out)) == {"b0-0", "b0-1", "b0-2"}


def test_bisection_never_splits_a_block() -> None:
    table, _, _ = blocks_table([2, 1, 2], singles_between=1)
    # rows: b0 b0 s b1 s b2 b2 s
    assert block_units(table).tolist() == [0, 2, 3, 4, 5, 7]
    assert block_units(table.drop_columns(["block"])).tolist() == [0]  # cross, no block: one block
    assert block_units(table.drop_columns(["block", "cross"])).tolist() == list(range(table.num_rows))


def test_a_poison_block_costs_only_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever placing one block raises, the batch is bisected at block boundaries: that block is dead
    (embed_failed), every other record is embedded."""
    from streamembed.core.model import LandmarkModel

    model = fitted()
    table, A, mats = blocks_table([2, 3, 2, 2], singles_between=1)
    real = LandmarkModel.place_blocks

    def explodes_on_size_3(self, A, cross, sizes=None, **kw):
        if any(np.shape(c)[0] == 3 for c in cross):
            raise RuntimeError("stand-in for a solver bug")
        return real(self, A, cross, sizes, **kw)

    monkeypatch.setattr(LandmarkModel, "place_blocks", explodes_on_size_3)
    out = BatchEmbedder(model).process(table)
    assert {d.id for d in out.dead} == {"b1-0", "b1-1", "b1-2"}
    assert {d.reason for d in out.dead} == {Reason.EMBED_FAILED}
    assert len(_placed(out)) == table.num_rows - 3


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "jsonl"])
def test_files_with_blocks_are_cut_at_block_boundaries_and_resume_the_same_way(tmp_path: Path, fmt: str) -> None:
    sizes = [3, 4, 1, 5, 2, 3, 7, 2, 2]
    table, _, _ = blocks_table(sizes, singles_between=1)
    path = tmp_path / f"b.{fmt}"
    if fmt == "parquet":
        write_parquet(path, table, row_group_size=4)
    elif fmt == "arrow":
        write_arrow(path, table, chunk=3)
    else:
        write_jsonl(path, table.to_pylist())
    chunks = list(iter_file(path, batch_rows=6, max_block_rows=8))
    assert not any(c.dead for c in chunks)
    got = [c.table.column("id").to_pylist() for c in chunks]
    assert sum(got, []) == table.column("id").to_pylist()
    for c in chunks:
        keys = c.table.column("block").to_pylist()
        assert c.table.num_rows <= 6 or len({k for k in keys if k is not None}) == 1
        # no block continues in the next chunk
        nxt = [d for d in chunks if d.start_row == c.end_row]
        if nxt and keys[-1] is not None:
            assert nxt[0].table.column("block")[0].as_py() != keys[-1]
    # a resume at any chunk boundary cuts the rest of the file the same way
    for c in chunks[1:]:
        again = list(iter_file(path, batch_rows=6, start_row=c.start_row, max_block_rows=8))
        assert [(d.start_row, d.end_row) for d in again] == [(d.start_row, d.end_row) for d in chunks
                                                             if d.start_row >= c.start_row]


def test_a_file_block_longer_than_max_block_rows_is_refused_not_half_placed(tmp_path: Path) -> None:
    model = fitted()
    table, _, _ = blocks_table([2, 12, 2])
    path = write_parquet(tmp_path / "b.parquet", table, row_group_size=5)
    embedder = BatchEmbedder(model, max_block_rows=8)
    placed, dead = set(), {}
    for c in iter_file(path, batch_rows=4, max_block_rows=8):
        out = embedder.process(c.table, row_base=c.start_row)
        placed |= set(_placed(out)) if out.output is not None else set()
        dead.update({d.id: d.reason for d in out.dead})
    assert placed == {"b0-0", "b0-1", "b2-0", "b2-1"}
    assert set(dead) == {f"b1-{i}" for i in range(12)} and set(dead.values()) == {Reason.BAD_BLOCK}


def test_a_jsonl_block_file_with_a_bad_line_keeps_its_blocks(tmp_path: Path) -> None:
    """A line that forces the line-by-line parse must not lose the 'block' key of the others."""
    model = fitted()
    table, _, _ = blocks_table([3, 2])
    path = write_jsonl(tmp_path / "b.jsonl", table.to_pylist(), raw_lines=[b"{not json"])
    chunks = list(iter_file(path, batch_rows=100, max_block_rows=8))
    assert [d.reason for c in chunks for d in c.dead] == [Reason.UNDECODABLE]
    out = BatchEmbedder(model).process(chunks[0].table, rows=chunks[0].rows)
    assert out.dead == [] and set(_placed(out)) == {"b0-0", "b0-1", "b0-2", "b1-0", "b1-1"}
    assert set(pa.Table.from_batches([out.output]).column("method").to_pylist()) == {"block"}
