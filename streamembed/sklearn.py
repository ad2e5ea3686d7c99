"""The scikit-learn side of ``LandmarkMDS``, imported only when scikit-learn asks for it.

scikit-learn is not a runtime dependency: ``LandmarkMDS`` implements the
estimator protocol itself (``get_params(deep)``, ``set_params``, ``fit(X, y=None)``,
``fit_transform``, ``score``, ``__sklearn_is_fitted__``) and only its
``__sklearn_tags__`` comes here, so importing streamembed never imports
scikit-learn (as openTSNE keeps its wrapper in ``sklearn.py``).

The tags say what the input is: X is **pairwise** (an (m, n) matrix of
dissimilarities between m objects and the n landmarks the model was fitted
on), so model selection (``GridSearchCV``, ``cross_val_score``) fits on the
train × train block and scores the test × train rows; the estimator is a
transformer that needs no ``y``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["estimator_tags"]


def estimator_tags() -> Any:
    """scikit-learn ``Tags`` for ``LandmarkMDS`` (scikit-learn ≥ 1.6)."""
    from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

    return Tags(
        estimator_type="transformer",
        target_tags=TargetTags(required=False),
        transformer_tags=TransformerTags(preserves_dtype=[]),
        input_tags=InputTags(pairwise=True, allow_nan=False),
        non_deterministic=False,
    )
