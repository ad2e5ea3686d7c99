"""Fixtures of the placement tests: each instruction set of the compiled kernels."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamembed.core.place import projection

native = projection._native


@pytest.fixture(params=native.supported_isas() if native is not None else [])
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each instruction set this CPU runs (the projection's and the block solver's kernels); the best one is
    restored afterwards."""
    assert native is not None
    best = native.isa()
    native.set_isa(request.param)
    yield str(request.param)
    native.set_isa(best)
