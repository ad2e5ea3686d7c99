"""Kafka as a source and sink of the daemon (kafka-python).

Modules, in the data's path:

* :mod:`~streamembed.kafka.client` - client settings from the config
  (security, ``[kafka.client]``), transient-error retries, a producer that
  knows when its messages are durable;
* :mod:`~streamembed.kafka.codec` - one message <-> rows: Arrow IPC streams
  and JSON, content-type / schema-version / landmark-version headers;
* :mod:`~streamembed.kafka.batches` - one poll's messages -> batches, and the
  dead letters that know their topic/partition/offset;
* :mod:`~streamembed.kafka.source` - a consumer-group :class:`KafkaSource`
  whose "checkpoint" is the group's committed offsets;
* :mod:`~streamembed.kafka.partitions` - the source's per-partition
  bookkeeping (epochs, offsets handed out and committed, lag, queued batches,
  rewinds after a revocation) as one table;
* :mod:`~streamembed.kafka.consumer_health` - what the source watches on its
  consumer: brokers reachable, lag, a pending join's spin;
* :mod:`~streamembed.kafka.sink` - the output topic and the dead-letter topic;
* :mod:`~streamembed.kafka.model_topic` - the landmark model on a compacted
  topic, so every replica embeds with the same model version;
* :mod:`streamembed.daemon.assembly` and :mod:`streamembed.daemon.model_setup` - how the
  daemon puts these together.
"""

from __future__ import annotations

__all__: list[str] = []
