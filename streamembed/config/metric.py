"""The [metric] section of the configuration schema: the metric between the objects rows carry (docs/objects.md).

Part of ``config.schema`` (which re-exports it). Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamembed.config.fields import setting as _f
from streamembed.core.inputs.objects import DEFAULT_MAX_LENGTH

__all__ = ["MetricConfig"]


@dataclass
class MetricConfig:
    """[metric]: the metric between the objects input rows carry (the `object` column; docs/objects.md)."""

    name: str = _f("", "The metric between objects: a built-in name (levenshtein, levenshtein-normalized, indel, "
                   "indel-normalized, jaro-winkler for strings; dtw for series; every scipy cdist metric for "
                   "vectors: docs/objects.md) or package.module:function, a function f(objects_a: list, objects_b: "
                   "list) returning the (len(a), len(b)) matrix. Empty: the model's own (`streamembed fit --objects "
                   "... --metric`). With a model fitted from objects it must be that metric; with one fitted from "
                   "dissimilarities it lets refits measure the objects rows carry beside their dissimilarities. An "
                   "unknown name or a path that does not import refuses to start (exit 2).")
    max_object_length: int = _f(DEFAULT_MAX_LENGTH, "Longest object (characters, bytes or series values) the "
                                "metric takes; a longer one is a bad_object dead letter (an edit distance or DTW "
                                "costs the product of the two lengths).", min=1, max=100_000_000)
