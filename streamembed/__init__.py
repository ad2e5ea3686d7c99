"""streamembed: place arriving objects on a landmark MDS map in real time.

The public API::

    from streamembed import LandmarkMDS
    est = LandmarkMDS(n_components=2, method="projection").fit(D)
    Y = est.transform(A)
"""

from .core.errors import InputError, ModelFileError, NotFittedError
from .core.result import EmbeddingResult
from .estimator import LandmarkMDS

__version__ = "0.1.0"

__all__ = ["LandmarkMDS", "EmbeddingResult", "InputError", "ModelFileError", "NotFittedError", "__version__"]
