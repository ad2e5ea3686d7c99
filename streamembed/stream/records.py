"""Record formats: the public contract of the streaming layer.

Input rows (one per object)
    ``id``                string, required, non-empty
    ``dissimilarities``   list / large_list / fixed_size_list of float32 or float64,
                          length n (the model's landmarks, in the model's landmark order)
    ``features``          feature mode only, instead of ``dissimilarities``: list of
                          float (length p); the engine computes the dissimilarities
    ``object``            the object itself (string, binary, or list<float64>), instead
                          of or beside ``dissimilarities``: without them the engine
                          computes them by the model's metric against the landmarks'
                          objects; beside them it keeps the object for refits
                          (:mod:`streamembed.stream.objects`, docs/objects.md)
    ``landmark_version``  int64, optional; the model version whose landmark order the
                          row follows; null/absent means "the current model"
    ``landmarks``         list of string (integers are read as their decimal text),
                          optional: the landmark ids of the row's columns, in column
                          order; it must be a permutation of the ids of the model
                          the row follows (applied by one gather), else the row is
                          refused (``landmark_mismatch``). Arrow and Parquet inputs
                          may name the order of every row at once instead: a JSON list
                          of ids under the key ``streamembed.landmarks`` in the
                          metadata of the ``dissimilarities`` field or of the schema
                          (:mod:`streamembed.stream.landmark_order`)
    ``event_time``        timestamp, optional (JSON lines: ISO 8601 string)
    ``block``             optional, string or integer: rows sharing a value form one block
                          (they must be consecutive); null for a single object
    ``cross``             a block member's k dissimilarities to the block's k rows, in
                          row order (the k x k matrix is symmetric, zero diagonal);
                          without a ``block`` column, a batch whose rows carry
                          ``cross`` is ONE block (a file or message of its own)

Output rows (one per embedded object): see :mod:`streamembed.stream.output`
(version 2 by default; :func:`output_schema` is version 1).
Dead letters (one per rejected record): see :func:`dead_letter_schema`.

Nothing here does I/O; the schemas are built by functions so ``d`` is explicit.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

import pyarrow as pa

from streamembed.core.inputs.validation import ProblemCode

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_KEY",
    "REASONS",
    "Reason",
    "INPUT_ID",
    "INPUT_DISSIMILARITIES",
    "INPUT_FEATURES",
    "INPUT_OBJECT",
    "INPUT_LANDMARK_VERSION",
    "INPUT_LANDMARKS",
    "LANDMARKS_KEY",
    "INPUT_EVENT_TIME",
    "INPUT_CROSS",
    "INPUT_BLOCK",
    "TIMESTAMP_TYPE",
    "output_schema",
    "dead_letter_schema",
]

#: Version of the input and dead-letter record formats (and of version-1 output). Bump on any change a
#: reader could notice (a renamed/removed column or a changed type). The output format has versions of its
#: own (:mod:`streamembed.stream.output`: 2 by default, 1 on request).
SCHEMA_VERSION: Final[int] = 1
#: Parquet key-value metadata key that carries :data:`SCHEMA_VERSION`.
SCHEMA_VERSION_KEY: Final[str] = "streamembed.schema_version"

INPUT_ID: Final[str] = "id"
INPUT_DISSIMILARITIES: Final[str] = "dissimilarities"
INPUT_FEATURES: Final[str] = "features"
INPUT_OBJECT: Final[str] = "object"
INPUT_LANDMARK_VERSION: Final[str] = "landmark_version"
INPUT_LANDMARKS: Final[str] = "landmarks"
#: Arrow field or schema metadata key naming the landmark order of every row (a JSON list of ids).
LANDMARKS_KEY: Final[str] = "streamembed.landmarks"
INPUT_EVENT_TIME: Final[str] = "event_time"
INPUT_CROSS: Final[str] = "cross"
INPUT_BLOCK: Final[str] = "block"

#: All timestamps written by the engine: microseconds, UTC.
TIMESTAMP_TYPE: Final[pa.DataType] = pa.timestamp("us", tz="UTC")


class Reason(StrEnum):
    """The bounded set of reasons a record can fail: the dead letters' ``reason``, the metric's label values.

    The one definition: metrics, the generated references and the dead-letter
    codes derive from it; the core's :class:`ProblemCode` members are included
    by reference (a row the core refuses becomes a dead letter of its code).
    """

    MISSING_ID = "missing_id"  #: id absent, null or empty
    BAD_ID = "bad_id"  #: id present but not a string (a number, a list, ...)
    WRONG_LENGTH = "wrong_length"  #: list length != n landmarks (or p features)
    MISSING_VECTOR = "missing_vector"  #: no dissimilarities (or features) value at all: absent or null
    NON_FINITE = ProblemCode.NON_FINITE  #: NaN, +-inf or a null element
    NEGATIVE = ProblemCode.NEGATIVE  #: a negative dissimilarity
    NON_NUMERIC = "non_numeric"  #: the list holds something that is not a number
    BAD_BLOCK = ProblemCode.BAD_BLOCK  #: invalid ``cross`` matrix, or another member of the block failed
    UNKNOWN_LANDMARK_VERSION = "unknown_landmark_version"  #: landmark_version not served
    #: the row names its landmark order, and it is not a permutation of the model's landmark ids
    LANDMARK_MISMATCH = "landmark_mismatch"
    UNDECODABLE = "undecodable"  #: not UTF-8 / not JSON / truncated Arrow data / bad column type
    UNREADABLE_FILE = "unreadable_file"  #: the file could not be opened or parsed at all
    OUT_OF_RANGE = ProblemCode.OUT_OF_RANGE  #: finite, but so large that its squares would overflow the arithmetic
    REJECTED = ProblemCode.REJECTED  #: the core refused the row (``errors="mask"``) for another reason
    EMBED_FAILED = "embed_failed"  #: embedding raised on this record (a bug, contained to the record)
    QUARANTINED = "quarantined"  #: the daemon crashed on this batch run.max_batch_attempts times in a row
    TOO_LARGE = "too_large"  #: a message (or its output) larger than the client may fetch or the broker accepts
    #: the row's ``object`` is one the metric cannot take (wrong type, too long, empty, a NaN in a series)
    BAD_OBJECT = "bad_object"
    #: the metric failed on the batch's objects (it raised, or returned a wrong shape, NaN or negative values)
    METRIC_FAILED = "metric_failed"
    #: an unversioned row that names no landmarks, after a refit, when no served version is the one it follows
    AMBIGUOUS_LANDMARKS = "ambiguous_landmarks"


#: Every reason, in a fixed order (metrics pre-create a series per reason).
REASONS: Final[tuple[Reason, ...]] = tuple(Reason)


def _with_version(fields: list[pa.Field]) -> pa.Schema:
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION)})


def output_schema(d: int) -> pa.Schema:
    """Schema of embedded rows for a d-dimensional map in output version 1 (``output.schema_version = 1``).

    ``y`` is fixed_size_list<float64, d>; ``k0`` is null where not computed;
    ``t`` is null for the projection method; ``flags`` lists flag names;
    ``unexplained_placed`` (β - ‖y‖² of the placement itself, where it differs
    from ``unexplained``, the projection's β - ‖ŷ‖²) is null for projection.
    Version 2: :func:`streamembed.stream.output.output_schema_v2`.
    """
    return _with_version(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("model_version", pa.int64(), nullable=False),
            pa.field("method", pa.string(), nullable=False),
            pa.field("y", pa.list_(pa.float64(), d), nullable=False),
            pa.field("beta", pa.float64(), nullable=False),
            pa.field("unexplained", pa.float64(), nullable=False),
            pa.field("k0", pa.float64()),
            pa.field("t", pa.float64()),
            pa.field("flags", pa.list_(pa.string()), nullable=False),
            pa.field("event_time", TIMESTAMP_TYPE),
            pa.field("processed_at", TIMESTAMP_TYPE, nullable=False),
            pa.field("unexplained_placed", pa.float64()),
        ]
    )


def dead_letter_schema() -> pa.Schema:
    """Schema of dead letters: the original record and why it was refused.

    ``record`` is the row as JSON text when it could be decoded into columns;
    ``raw`` holds the original bytes when it could not (e.g. a non-UTF-8 line);
    ``file``/``row`` locate it in its input (row is 0-based within the file;
    null for a whole unreadable file).
    """
    return _with_version(
        [
            pa.field("id", pa.string()),
            pa.field("reason", pa.string(), nullable=False),
            pa.field("detail", pa.string()),
            pa.field("source", pa.string(), nullable=False),
            pa.field("file", pa.string()),
            pa.field("row", pa.int64()),
            pa.field("record", pa.string()),
            pa.field("raw", pa.binary()),
            pa.field("model_version", pa.int64()),
            pa.field("failed_at", TIMESTAMP_TYPE, nullable=False),
        ]
    )
