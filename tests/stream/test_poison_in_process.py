"""Every kind of the poison corpus (tests/poison.py) through the daemon's own reader, decoder and embedder, in
this process: each record's outcome exactly as the corpus states it.

The fast twin of the end-to-end corpus runs (tests/e2e/test_poison.py, tests/kafka/test_poison_kafka.py): a
wrong reason or a lost row shows here in seconds, named by its kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .. import poison
from .helpers import fitted

CORPUS = {k.name: k for k in poison.build_corpus()}
KINDS = [(k.name, mode) for k in CORPUS.values() for mode, form in (("file", k.files), ("kafka", k.messages))
         if form is not None]


@pytest.mark.parametrize("name,mode", KINDS, ids=[f"{n}-{m}" for n, m in KINDS])
def test_poison_kind_outcomes_in_process(name: str, mode: str, tmp_path: Path) -> None:
    kind = CORPUS[name]
    got = poison.outcomes_in_process(kind, mode, fitted(), tmp_path / "in")
    assert got == poison.expected_in_process(kind, mode)
