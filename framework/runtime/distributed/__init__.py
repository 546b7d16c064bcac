"""Distributed mode: workers sharing connectors through Kafka's group protocol and compacted topics."""
