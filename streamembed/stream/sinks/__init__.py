"""Sinks: where the loop's embedded rows and dead letters go (``base`` holds the contract)."""

from streamembed.stream.sinks.base import DeadSink, OutputSink, Pending, Sink, safe_label
from streamembed.stream.sinks.dead_letter import DeadLetterSink, dead_letter_path
from streamembed.stream.sinks.fanout import FanoutSink
from streamembed.stream.sinks.parquet import ParquetSink
from streamembed.stream.sinks.per_label import PerLabelSink

__all__ = ["Sink", "OutputSink", "DeadSink", "Pending", "ParquetSink", "DeadLetterSink", "PerLabelSink", "FanoutSink",
           "dead_letter_path", "safe_label"]
