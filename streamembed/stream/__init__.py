"""The streaming layer: records, codecs, sources, sinks, checkpoint and loop.

The data's path: source -> codecs (decode, validate) -> embedder (model) ->
codecs (encode) -> sinks -> checkpoint. Nothing here knows about Kafka,
HTTP or configuration files: sources and sinks are small protocols so other
transports can reuse the loop.
"""
