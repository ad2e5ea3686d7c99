"""Read one file in chunks, whatever its format (:func:`iter_file`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from streamembed.core.options import MAX_BLOCK_ROWS
from streamembed.stream.readers.arrow_ipc import iter_arrow
from streamembed.stream.readers.base import FORMATS, FileChanged, ReadChunk, file_format, unreadable
from streamembed.stream.readers.chunking import whole_blocks
from streamembed.stream.readers.jsonl import iter_jsonl
from streamembed.stream.readers.opening import Input, open_input
from streamembed.stream.readers.parquet import iter_parquet


def iter_file(
    path: str | os.PathLike[str],
    *,
    batch_rows: int,
    start_row: int = 0,
    max_block_rows: int = MAX_BLOCK_ROWS,
    name: str | None = None,
    final: bool = True,
    opened: Input | None = None,
    progressive: bool = False,
    mapping: str = "never",
) -> Iterator[ReadChunk]:
    """Chunks of ``path`` from ``start_row`` on; ``name`` is used in dead letters.

    ``opened`` is the file already opened by :func:`open_input` (else it is
    opened here, with ``progressive`` when ``final``, and an OSError or
    FileChanged while opening becomes an ``unreadable_file`` dead letter). A
    streamed or progressively read file that changes while read raises
    FileChanged between chunks. ``mapping``: see :func:`open_input`.
    """
    name = name if name is not None else str(path)
    fmt = file_format(path)
    if fmt is None:
        yield unreadable(name, start_row, f"unknown file extension {Path(path).suffix!r} (expected one of "
                                          f"{', '.join(sorted(FORMATS))})")
        return
    if opened is None:
        try:
            opened = open_input(path, progressive=progressive and final, mapping=mapping)
        except (OSError, FileChanged) as exc:
            yield unreadable(name, start_row, f"cannot read: {exc}")
            return
    reader = {"parquet": iter_parquet, "arrow": iter_arrow, "jsonl": iter_jsonl}[fmt]
    try:
        chunks = reader(opened, batch_rows, start_row, max_block_rows, name, final)
        for chunk in whole_blocks(chunks, batch_rows, max_block_rows):
            opened.check()
            yield chunk
        opened.finish()  # read progressively: the whole file was this one version
        opened.check()  # a mapped file: the same version to its end
    finally:
        opened.close()
