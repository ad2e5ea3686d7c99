"""Sources: where batches come from, each with an opaque resume position (``base`` holds the contract).

The daemon's sources are the kinds of ``config.sources`` (``source.kind``): ``generator``, ``directory`` (here)
and ``kafka`` (``kafka.source``, built by ``kafka.wiring``: it needs the Kafka layer's client). ``FileSource``
reads given files once (``streamembed embed``, the backfill tasks).
"""

from streamembed.stream.sources.base import Source, SourceBatch, SourceContext, SourceSetup, display_name
from streamembed.stream.sources.directory import DirectorySource
from streamembed.stream.sources.files import FileSource
from streamembed.stream.sources.generator import GaussianMixtureStream, GeneratorSource

__all__ = ["SourceBatch", "Source", "SourceContext", "SourceSetup", "DirectorySource", "FileSource",
           "GaussianMixtureStream", "GeneratorSource", "display_name"]
