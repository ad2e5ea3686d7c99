"""Read input files (Parquet, Arrow IPC, JSON lines) in batches of rows, safely.

One module per job: :mod:`.base` (the chunk, the file version, the failures),
:mod:`.opening` (one version of a file: mapped, snapshot, streamed),
:mod:`.slabs` (the reusable read buffers), :mod:`.progressive` (reading while
decoding), :mod:`.chunking` (chunk boundaries that survive a resume), one
module per format (:mod:`.parquet`, :mod:`.arrow_ipc` with
:mod:`.ipc_framing`, :mod:`.jsonl`) and :mod:`.dispatch` (:func:`iter_file`).

Failures never raise otherwise than :class:`FileChanged` between chunks: an
unreadable file or the unreadable rest of a file becomes a
:class:`~streamembed.stream.codecs.DeadRecord`. A file that ends in an
*incomplete tail* — an Arrow stream cut inside a message, an Arrow or Parquet
file without its footer, a last JSON line without its newline that does not
parse — may still be being written: with ``final=False`` the reader reports it
in the last chunk's ``tail`` instead of dead-lettering it, and the caller
decides when to wait and when to give up.
"""

from streamembed.stream.readers.base import (
    FORMATS,
    SNAPSHOT_BYTES,
    FileChanged,
    ReadChunk,
    Signature,
    file_format,
    signature,
)
from streamembed.stream.readers.dispatch import iter_file
from streamembed.stream.readers.jsonl import parse_json_lines
from streamembed.stream.readers.opening import open_input

__all__ = ["ReadChunk", "FileChanged", "Signature", "signature", "open_input", "file_format", "iter_file",
           "parse_json_lines", "FORMATS", "SNAPSHOT_BYTES"]
