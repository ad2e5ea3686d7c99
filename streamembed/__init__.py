"""streamembed: place arriving objects on a landmark MDS map in real time.

The public API::

    from streamembed import LandmarkMDS
    est = LandmarkMDS(n_components=2, method="projection").fit(D)
    Y = est.transform(A)

``LandmarkMDS`` and ``EmbeddingResult`` are imported on first use (PEP 562),
so that ``python -m streamembed --help`` and the start of ``embed`` / ``run``
do not pay for the estimator's imports (tests/design/test_imports.py); so is
``__version__``, read from the installed distribution's metadata
(``importlib.metadata``, 25 ms) when first asked for.
"""

from typing import TYPE_CHECKING, Any

from .core.errors import InputError, ModelFileError, NotFittedError

if TYPE_CHECKING:
    from .core.result import EmbeddingResult
    from .estimator import LandmarkMDS

    __version__: str


def _installed_version() -> str:
    """The version of the installed distribution (written once, in pyproject.toml); "0+unknown" when the
    package runs from a source tree that was never installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version("streamembed")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__all__ = ["LandmarkMDS", "EmbeddingResult", "InputError", "ModelFileError", "NotFittedError", "__version__"]

_LAZY = {"LandmarkMDS": ".estimator", "EmbeddingResult": ".core.result"}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = globals()["__version__"] = _installed_version()
        return version
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
