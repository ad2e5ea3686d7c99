"""Sources: where batches come from, each with an opaque resume position (``base`` holds the contract).

The daemon's sources are the kinds of ``config.sources`` (``source.kind``): ``generator``, ``directory`` (here)
and ``kafka`` (``kafka.source``, built by ``kafka.wiring``: it needs the Kafka layer's client). ``FileSource``
reads given files once (``streamembed embed``, the backfill tasks). The source classes are imported when first
asked for (PEP 562): ``embed`` does not load the directory watcher nor the generator.
"""

from typing import TYPE_CHECKING, Any

from streamembed.stream.sources.base import Source, SourceBatch, SourceContext, SourceSetup, display_name

if TYPE_CHECKING:
    from streamembed.stream.sources.directory import DirectorySource
    from streamembed.stream.sources.files import FileSource
    from streamembed.stream.sources.generator import GaussianMixtureStream, GeneratorSource

__all__ = ["SourceBatch", "Source", "SourceContext", "SourceSetup", "DirectorySource", "FileSource",
           "GaussianMixtureStream", "GeneratorSource", "display_name"]

_LAZY = {"DirectorySource": "directory", "FileSource": "files", "GaussianMixtureStream": "generator",
         "GeneratorSource": "generator"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
