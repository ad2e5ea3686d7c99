"""Test helpers for streamembed (a real Kafka-protocol broker for integration tests)."""
