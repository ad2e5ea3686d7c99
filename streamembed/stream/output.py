"""The output record format: versions 1 and 2, their encoders, and reading either version back.

Version 2 (the default, ``output.schema_version = 2``) is built for its
readers and for its cost. One row per embedded object:

    ``id``             string
    ``y0`` … ``y{d-1}`` the coordinates, one column each, in the input's precision
                       (float32 for float32 rows, else float64): ``pandas.read_parquet``
                       gives a numeric matrix in one call,
                       ``df.filter(regex=r"^y\\d+$").to_numpy()``
    ``beta``, ``unexplained``, ``k0``, ``t``, ``unexplained_placed``, ``radius``
                       per-row numbers in the input's precision (:data:`SCALAR_COLUMNS`;
                       ``k0``/``t`` null where not computed / not RR; ``radius`` (map units,
                       docs/math.md §9) null where the model has no calibration for the method)
    ``flag_bits``      int32 bitmask; the bit of each flag name is in the schema
                       metadata (:data:`FLAG_BITS_KEY`, JSON ``{"ambiguous_sign": 1, …}``)
                       and in docs/formats.md. Bits are only ever added within version 2.
    ``model_version``  int64, the model that placed the row (a refit or a retained
                       model changes it within a file)
    ``method``         dictionary<int8, string> over :data:`METHOD_VALUES` (pandas: a
                       categorical)
    ``event_time``     timestamp[us, UTC], nullable
    ``processed_at``   timestamp[us, UTC], one value per input batch

and in the schema metadata: :data:`SCHEMA_VERSION_KEY` ``"2"``, the flag bits,
the y columns (:data:`Y_COLUMNS_KEY`, JSON list) and the model lineage
(:data:`LINEAGE_KEY`). Columns are only ever *added* within a version (a
reader selects by name and ignores the ones it does not know); a rename, a
removal, a changed type or a changed meaning is a new version.

Precision: a float32 row is placed by the float32 kernels, whose coordinates
and β are float32 values (stored exactly); ``unexplained`` and ``k0`` are
formed in float64 from them, and their error against the same row in float64
(about ε₃₂·E, docs/math.md §4.4) is larger than the float32 rounding of the
stored value, so nothing the computation knows is lost.

Version 1 (``output.schema_version = 1``: written on request, and read, for one more release): ``y``
fixed_size_list<float64, d>, ``beta``/``unexplained``/``k0``/``t`` float64,
``method`` string, ``flags`` list<string> of flag names. Migration: docs/formats.md,
"Record formats".
"""

from __future__ import annotations

import functools
import json
from typing import Any, Final
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from streamembed.core.flags import FLAG_NAMES
from streamembed.core.place.methods import output_methods
from streamembed.stream.arrow_build import numeric, strings
from streamembed.stream.records import SCHEMA_VERSION_KEY, TIMESTAMP_TYPE, output_schema

__all__ = [
    "OUTPUT_SCHEMA_VERSION",
    "DEFAULT_OUTPUT_VERSION",
    "OUTPUT_VERSIONS",
    "FLAG_BITS_KEY",
    "Y_COLUMNS_KEY",
    "LINEAGE_KEY",
    "METHOD_VALUES",
    "SCALAR_COLUMNS",
    "DICTIONARY_COLUMNS",
    "output_schema_v1",
    "output_schema_v2",
    "encode_output",
    "schema_version_of",
    "y_columns",
    "y_matrix",
    "flag_bits",
    "flag_names_of",
    "flag_lists",
    "methods_of",
    "as_version1",
]

#: The newest output version.
OUTPUT_SCHEMA_VERSION: Final[int] = 2
#: The output version written when none is asked for (``output.schema_version``, ``embed --schema-version``,
#: ``backfill``, the Kafka output messages). Version 1 is written on request for one more release.
DEFAULT_OUTPUT_VERSION: Final[int] = 2
#: Versions that can be written (``output.schema_version``) and read back here.
OUTPUT_VERSIONS: Final[tuple[int, ...]] = (1, 2)
#: Schema metadata: the bit of every flag name, JSON ``{"name": bit, ...}`` (version 2).
FLAG_BITS_KEY: Final[str] = "streamembed.flag_bits"
#: Schema metadata: the coordinate columns in order, JSON list (version 2).
Y_COLUMNS_KEY: Final[str] = "streamembed.y_columns"
#: Schema metadata: the lineage of the map the rows were placed on (version 2; absent if unknown).
LINEAGE_KEY: Final[str] = "streamembed.model_lineage"
#: The values of the ``method`` column, in dictionary order (one dictionary for every batch of a version-2 file):
#: the placement methods by their append-only output codes (``core.place.methods.PLACEMENT_METHODS``).
METHOD_VALUES: Final[tuple[str, ...]] = output_methods()
#: Per-row numeric columns after the coordinates, in the input's precision: (column, nullable). Each is the
#: ``EmbeddingResult`` attribute of the same name (NaN = null where nullable). A new per-row number is a new
#: entry here (and an attribute there): an added column, which version 2 allows.
SCALAR_COLUMNS: Final[tuple[tuple[str, bool], ...]] = (("beta", False), ("unexplained", False), ("k0", True),
                                                       ("t", True), ("unexplained_placed", True), ("radius", True))

#: The version-2 columns that repeat (per file, per batch, or mostly zero): the only ones worth a Parquet dictionary.
DICTIONARY_COLUMNS: Final[tuple[str, ...]] = ("flag_bits", "model_version", "method", "processed_at")

_METHOD_DICTIONARY = strings(METHOD_VALUES)
_METHOD_CODE = {name: i for i, name in enumerate(METHOD_VALUES)}
_METHOD_TYPE = pa.dictionary(pa.int8(), pa.string())
_FLAG_BITS_JSON = json.dumps({name: bit for bit, name in FLAG_NAMES.items()})


# --------------------------------------------------------------------------- schemas


def output_schema_v1(d: int) -> pa.Schema:
    """Version 1: ``y`` fixed_size_list<float64, d>; float64 numbers; ``method`` string; ``flags`` list of names."""
    return output_schema(d)


def _float_type(dtype: Any) -> pa.DataType:
    return pa.float32() if np.dtype(dtype) == np.float32 else pa.float64()


def output_schema_v2(d: int, dtype: Any = np.float64, *, lineage: str | None = None) -> pa.Schema:
    """Version 2 for a d-dimensional map and rows of ``dtype`` (float32 or float64; see the module doc)."""
    return _schema_v2(int(d), str(_float_type(dtype)), None if not lineage else str(lineage))


@functools.lru_cache(maxsize=64)
def _schema_v2(d: int, float_name: str, lineage: str | None) -> pa.Schema:
    """``output_schema_v2``, built once per map (a schema is immutable; every batch of a file shares it)."""
    ft = pa.float32() if float_name == "float" else pa.float64()
    ys = [f"y{j}" for j in range(d)]
    meta = {SCHEMA_VERSION_KEY: "2", FLAG_BITS_KEY: _FLAG_BITS_JSON, Y_COLUMNS_KEY: json.dumps(ys)}
    if lineage:
        meta[LINEAGE_KEY] = str(lineage)
    return pa.schema(
        [pa.field("id", pa.string(), nullable=False)]
        + [pa.field(name, ft, nullable=False) for name in ys]
        + [pa.field(name, ft, nullable=nullable) for name, nullable in SCALAR_COLUMNS]
        + [
            pa.field("flag_bits", pa.int32(), nullable=False),
            pa.field("model_version", pa.int64(), nullable=False),
            pa.field("method", _METHOD_TYPE, nullable=False),
            pa.field("event_time", TIMESTAMP_TYPE),
            pa.field("processed_at", TIMESTAMP_TYPE, nullable=False),
        ],
        metadata=meta,
    )


# --------------------------------------------------------------------------- encoding


def _nullable(x: np.ndarray, dtype: Any) -> pa.Array:
    """A float Arrow array of ``dtype`` with NaN as null.

    The validity bitmap is packed by numpy: ``pa.array(mask=)`` is 40x slower.
    """
    x = np.ascontiguousarray(x, dtype=dtype)
    nan = np.isnan(x)
    n_null = int(np.count_nonzero(nan))
    if n_null == 0:
        return numeric(x)
    if n_null == x.size:
        return pa.nulls(x.size, _float_type(dtype))
    valid = np.packbits(~nan, bitorder="little")
    return pa.Array.from_buffers(_float_type(dtype), x.size, [pa.py_buffer(valid), pa.py_buffer(x)], null_count=n_null)


def _timestamps(m: int, us: int) -> pa.Array:
    return pa.Array.from_buffers(TIMESTAMP_TYPE, m, [None, pa.py_buffer(np.full(m, us, dtype=np.int64))])


def flag_lists(flags: np.ndarray, bit_names: Sequence[str]) -> pa.ListArray:
    """uint32 bitmasks (m,) -> list<string> of flag names in bit order (version 1), vectorised."""
    flags = np.asarray(flags, dtype=np.uint32)
    m = flags.shape[0]
    names = strings(bit_names)
    if not flags.any():
        return pa.ListArray.from_arrays(numeric(np.zeros(m + 1, np.int32)), strings(()))
    bits = (flags[:, None] & (np.uint32(1) << np.arange(32, dtype=np.uint32))[None, :]) != 0  # (m, 32)
    offsets = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(bits.sum(axis=1), out=offsets[1:])
    _, which = np.nonzero(bits)  # row-major: per row, bits in increasing order
    return pa.ListArray.from_arrays(numeric(offsets), names.take(numeric(which)))


def _scalar(result: Any, name: str, m: int) -> np.ndarray:
    """The result's per-row ``name`` (m,), or NaN (null) where a result has none (``unexplained_placed``)."""
    values = getattr(result, name, None)
    return np.full(m, np.nan) if values is None else np.asarray(values)


def _method_column(method: str, m: int) -> pa.DictionaryArray:
    code = _METHOD_CODE.get(str(method))
    if code is None:
        raise ValueError(f"method {method!r} is not one of the output's methods {METHOD_VALUES}")
    return pa.DictionaryArray.from_arrays(numeric(np.full(m, code, dtype=np.int8)), _METHOD_DICTIONARY)


def encode_output(
    ids: pa.Array,
    result: Any,
    *,
    model_version: int,
    event_time: pa.Array,
    processed_at_us: int,
    version: int = DEFAULT_OUTPUT_VERSION,
    dtype: Any = np.float64,
    lineage: str | None = None,
    bit_names: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """The output rows of an :class:`~streamembed.core.result.EmbeddingResult` (valid rows only), in ``version``.

    ``dtype`` (version 2): the precision of the rows the result was placed
    from (float32 or float64), that of the float columns. ``bit_names``
    (version 1): the name of each of the 32 flag bits.
    ``processed_at_us``: microseconds since the epoch (UTC), shared by the batch.
    """
    y = np.asarray(result.y)
    m, d = y.shape
    if version == 1:
        if bit_names is None:
            raise ValueError("version 1 output needs the flag bit names")
        cols = [
            ids,
            numeric(np.full(m, model_version, dtype=np.int64)),
            pa.DictionaryArray.from_arrays(numeric(np.zeros(m, np.int32)), strings([str(result.method)])
                                           ).cast(pa.string()),
            pa.FixedSizeListArray.from_arrays(numeric(np.ascontiguousarray(y, dtype=np.float64).reshape(-1)), d),
            numeric(np.asarray(result.beta, dtype=np.float64)),
            numeric(np.asarray(result.unexplained, dtype=np.float64)),
            _nullable(result.k0, np.float64),
            _nullable(result.t, np.float64),
            flag_lists(result.flags, bit_names),
            event_time,
            _timestamps(m, processed_at_us),
            _nullable(_scalar(result, "unexplained_placed", m), np.float64),
        ]
        return pa.RecordBatch.from_arrays(cols, schema=output_schema_v1(d))
    if version != 2:
        raise ValueError(f"output schema version {version} is not one of {OUTPUT_VERSIONS}")
    dt = np.float32 if np.dtype(dtype) == np.float32 else np.float64
    yt = np.ascontiguousarray(np.asarray(y, dtype=dt).T)  # (d, m): one transposed copy, each column a view
    cols = [ids]
    cols += [numeric(yt[j]) for j in range(d)]
    for name, nullable in SCALAR_COLUMNS:
        values = getattr(result, name, None)
        if values is None:  # a result without this number (``unexplained_placed``): all null
            cols.append(pa.nulls(m, _float_type(dt)))
        else:
            cols.append(_nullable(values, dt) if nullable else numeric(np.asarray(values, dtype=dt)))
    cols += [
        numeric(np.asarray(result.flags).astype(np.int32)),
        numeric(np.full(m, model_version, dtype=np.int64)),
        _method_column(result.method, m),
        event_time,
        _timestamps(m, processed_at_us),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=output_schema_v2(d, dt, lineage=lineage))


# --------------------------------------------------------------------------- reading either version


def schema_version_of(schema: pa.Schema) -> int:
    """The output version a schema declares (1 when unstated: files written before the key existed)."""
    meta = schema.metadata or {}
    raw = meta.get(SCHEMA_VERSION_KEY.encode())
    try:
        return int(raw) if raw is not None else 1
    except ValueError:
        return 1


def y_columns(schema: pa.Schema) -> list[str]:
    """Names of the coordinate columns of a version-2 schema, in order."""
    meta = schema.metadata or {}
    raw = meta.get(Y_COLUMNS_KEY.encode())
    if raw is not None:
        return list(json.loads(raw))
    names = [n for n in schema.names if n[:1] == "y" and n[1:].isdigit()]
    return sorted(names, key=lambda n: int(n[1:]))


def y_matrix(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """(m, d) coordinates of output rows of either version (float32 or float64, as stored)."""
    m = table.num_rows
    if schema_version_of(table.schema) == 1:
        col = table.column("y")
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        return col.flatten().to_numpy(zero_copy_only=False).reshape(m, col.type.list_size)
    names = y_columns(table.schema)
    out = np.empty((m, len(names)), dtype=table.schema.field(names[0]).type.to_pandas_dtype() if names else np.float64)
    for j, name in enumerate(names):
        out[:, j] = table.column(name).to_numpy()
    return out


def flag_bits(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """(m,) uint32 flag bitmasks of output rows of either version."""
    if schema_version_of(table.schema) != 1:
        return table.column("flag_bits").to_numpy().astype(np.uint32)
    bit_of = {name: bit for bit, name in FLAG_NAMES.items()}
    bit_of.update({f"bit{b}": 1 << b for b in range(32)})  # the names version 1 gave bits the core does not name
    out = np.zeros(table.num_rows, dtype=np.uint32)
    for i, names in enumerate(table.column("flags").to_pylist()):  # version 1 only: a loop over rows
        out[i] = sum(bit_of.get(name, 0) for name in set(names))
    return out


def _bit_names(schema: pa.Schema) -> list[str]:
    """The name of each of the 32 flag bits of a version-2 schema (its metadata; ``bitN`` where unnamed)."""
    raw = (schema.metadata or {}).get(FLAG_BITS_KEY.encode())
    bits = json.loads(raw) if raw is not None else {name: bit for bit, name in FLAG_NAMES.items()}
    names = [f"bit{b}" for b in range(32)]
    for name, value in bits.items():
        b = int(value).bit_length() - 1
        if 0 <= b < 32:
            names[b] = str(name)
    return names


def flag_names_of(table: pa.Table | pa.RecordBatch) -> list[list[str]]:
    """The flag names of every output row of either version (version 2: from the schema's bit map)."""
    if schema_version_of(table.schema) == 1:
        return table.column("flags").to_pylist()
    return flag_lists(flag_bits(table), _bit_names(table.schema)).to_pylist()


def methods_of(table: pa.Table | pa.RecordBatch) -> pa.Array:
    """The ``method`` column as plain strings (either version)."""
    col = table.column("method")
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def as_version1(table: pa.Table | pa.RecordBatch) -> pa.Table:
    """Output rows of either version as version 1 (the migration's other direction, for readers not yet migrated).

    Version-2 numbers are widened to float64 (exactly), ``method`` becomes a
    string, ``flag_bits`` the list of names, the coordinates the ``y`` list;
    columns version 1 does not have are dropped.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if schema_version_of(table.schema) == 1:
        return table
    table = table.combine_chunks()
    m = table.num_rows
    Y = np.ascontiguousarray(y_matrix(table), dtype=np.float64)
    d = Y.shape[1]

    def f64(name: str) -> pa.Array:
        return table.column(name).chunk(0).cast(pa.float64()) if m else pa.array([], pa.float64())

    cols = [
        table.column("id"),
        table.column("model_version"),
        methods_of(table),
        pa.FixedSizeListArray.from_arrays(pa.array(Y.reshape(-1)), d),
        f64("beta"),
        f64("unexplained"),
        f64("k0"),
        f64("t"),
        flag_lists(flag_bits(table), _bit_names(table.schema)),
        table.column("event_time"),
        table.column("processed_at"),
        f64("unexplained_placed") if "unexplained_placed" in table.column_names else pa.nulls(m, pa.float64()),
    ]
    return pa.Table.from_arrays([pa.chunked_array([c]) if isinstance(c, pa.Array) else c for c in cols],
                                schema=output_schema_v1(d))
