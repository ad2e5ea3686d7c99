"""Sources: where batches come from, each with an opaque resume position (``base`` holds the contract)."""

from streamembed.stream.sources.base import Source, SourceBatch, display_name
from streamembed.stream.sources.directory import DirectorySource
from streamembed.stream.sources.files import FileSource

__all__ = ["SourceBatch", "Source", "DirectorySource", "FileSource", "display_name"]
