"""The scikit-learn side of ``LandmarkMDS``, imported only when scikit-learn asks for it.

scikit-learn is not a runtime dependency: ``LandmarkMDS`` implements the
estimator protocol itself (``get_params(deep)``, ``set_params``, ``fit(X, y=None)``,
``fit_transform``, ``score``, ``__sklearn_is_fitted__``) and only its
``__sklearn_tags__`` comes here, so importing streamembed never imports
scikit-learn (as openTSNE keeps its wrapper in ``sklearn.py``).

The tags say what the input is: with ``metric="precomputed"`` (the default)
X is **pairwise** (an (m, n) matrix of dissimilarities between m objects and
the n landmarks the model was fitted on), so model selection
(``GridSearchCV``, ``cross_val_score``) fits on the train × train block and
scores the test × train rows; with a feature metric X holds feature vectors.
scikit-learn's own checks then feed a "precomputed" estimator Euclidean
distance matrices (as they do ``MDS`` and ``TSNE``). The estimator is a
transformer that needs no ``y`` and keeps float32 float32.
"""

from __future__ import annotations

from typing import Any

__all__ = ["estimator_tags"]


def estimator_tags(pairwise: bool = True, positive_only: bool = True) -> Any:
    """scikit-learn ``Tags`` for ``LandmarkMDS`` (scikit-learn ≥ 1.6).

    ``pairwise``: X is a matrix between objects and landmarks (``metric="precomputed"``),
    not feature vectors; ``positive_only``: its entries are dissimilarities (a negative one
    is refused with scikit-learn's "Negative values in data"). ``transform`` returns float32 for float32 input
    and float64 otherwise.
    """
    from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

    return Tags(
        estimator_type="transformer",
        target_tags=TargetTags(required=False),
        transformer_tags=TransformerTags(preserves_dtype=["float64", "float32"]),
        input_tags=InputTags(pairwise=pairwise, allow_nan=False, positive_only=positive_only),
        non_deterministic=False,
    )
