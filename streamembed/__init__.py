"""streamembed: place arriving objects on a landmark MDS map in real time.

The public API::

    from streamembed import LandmarkMDS
    est = LandmarkMDS(n_components=2, method="projection").fit(D)
    Y = est.transform(A)
"""

import importlib.metadata

from .core.errors import InputError, ModelFileError, NotFittedError
from .core.result import EmbeddingResult
from .estimator import LandmarkMDS


def _installed_version() -> str:
    """The version of the installed distribution (written once, in pyproject.toml); "0+unknown" when the
    package runs from a source tree that was never installed."""
    try:
        return importlib.metadata.version("streamembed")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()

__all__ = ["LandmarkMDS", "EmbeddingResult", "InputError", "ModelFileError", "NotFittedError", "__version__"]
