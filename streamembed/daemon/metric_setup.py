"""The metric a run measures objects with: ``[metric]`` against the model's own, checked before anything runs.

``object_spec(cfg, model)`` is what the ``BatchEmbedder`` is told about rows
carrying an ``object`` (``stream.objects.ObjectSpec``): the metric's name and
kind, the longest object it takes, and whether the model keeps landmark
objects to place rows from. It refuses to start (``StartupError``, exit 2),
listing the known names, when ``[metric] name`` is unknown or does not
import, when the model's own metric (a ``package.module:function`` saved with
it) no longer imports, and when ``[metric] name`` contradicts the metric the
model's landmark objects were fitted with.
"""

from __future__ import annotations

from dataclasses import replace

from streamembed.config.schema import Config
from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import metric_names, resolve_metric
from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import StartupError
from streamembed.stream.objects import ObjectSpec

__all__ = ["object_spec"]


def object_spec(cfg: Config, model: LandmarkModel) -> ObjectSpec | None:
    """What rows carrying objects are measured with (see the module doc); None when no metric applies (a model
    fitted from dissimilarities, or a similarity model, with ``[metric] name`` empty)."""
    named = cfg.metric.name.strip()
    own = model.metric if model.features is not None and model.input_kind != "similarity" else None
    if named and own is not None and named != own:
        raise StartupError(f"[metric] name = {named!r}, but the model's landmarks were fitted with metric {own!r} "
                           f"(`streamembed model info`): rows would be measured against its landmark objects by "
                           f"another metric; leave [metric] name empty or set it to {own!r}")
    name = named or own
    if name is None:
        return None
    try:
        metric = resolve_metric(name)
    except InputError as exc:
        what = "[metric] name" if named else "the model's metric"
        known = ", ".join(metric_names())
        text = str(exc) if "known:" in str(exc) else f"{exc}; known: {known}, or 'package.module:function'"
        raise StartupError(f"{what} = {name!r} cannot be used: {text}") from None
    spec = ObjectSpec(metric.name, metric.takes, placeable=model.features is not None)
    return replace(spec, max_length=int(cfg.metric.max_object_length))
