"""The model travels as bytes, in memory: no temporary file on the model topic nor on the Dask workers.

Without a broker: a record is a plain object with the attributes kafka-python gives one.
"""

from __future__ import annotations

import hashlib
import tempfile
from types import SimpleNamespace
from typing import Any

import pytest

from streamembed.jobs import backfill
from streamembed.kafka.model_topic import MODEL_CONTENT_TYPE, ModelTopic
from streamembed.model_io import model_arrays, model_to_bytes

from ..stream.helpers import fitted


@pytest.fixture
def no_temporary_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way to make a temporary file or directory fails."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a temporary file or directory was made")

    for name in ("TemporaryDirectory", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile", "mkdtemp",
                 "mkstemp"):
        monkeypatch.setattr(tempfile, name, refuse)


def _record(value: bytes, version: int, lineage: str, offset: int = 0) -> SimpleNamespace:
    headers = [("model_version", str(version).encode()), ("model_lineage", lineage.encode()),
               ("sha256", hashlib.sha256(value).hexdigest().encode()), ("content-type", MODEL_CONTENT_TYPE.encode())]
    return SimpleNamespace(key=b"streamembed", value=value, headers=headers, offset=offset, partition=0, timestamp=0)


def _same_arrays(a: Any, b: Any) -> bool:
    xa, xb = model_arrays(a), model_arrays(b)
    return sorted(xa) == sorted(xb) and all(xa[k].tobytes() == xb[k].tobytes() for k in xa)


@pytest.mark.usefixtures("no_temporary_files")
def test_a_model_record_is_read_in_memory() -> None:
    model = fitted().with_version(4)
    mt = ModelTopic("127.0.0.1:9", "models")
    got = mt.newest([_record(model_to_bytes(model), 4, model.lineage)], None)
    assert got is not None and got[0] == 4 and _same_arrays(got[1], model)


@pytest.mark.usefixtures("no_temporary_files")
def test_a_truncated_model_record_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    model = fitted().with_version(4)
    good = _record(model_to_bytes(model.with_version(3)), 3, model.lineage, offset=0)
    bad = _record(model_to_bytes(model)[:500], 4, model.lineage, offset=1)  # its sha256 states the truncated bytes
    got = ModelTopic("127.0.0.1:9", "models").newest([good, bad], model.lineage)
    assert got is not None and got[0] == 3
    assert "offset 1 is not a loadable model" in caplog.text and "not a readable .npz archive" in caplog.text


@pytest.mark.usefixtures("no_temporary_files")
def test_a_backfill_worker_loads_the_model_from_its_bytes() -> None:
    model = fitted()
    backfill._MODELS.clear()
    loaded = backfill._model(model_to_bytes(model))
    assert _same_arrays(loaded, model)
    assert backfill._model(model_to_bytes(model)) is loaded  # once per process: the same bytes, the same key
