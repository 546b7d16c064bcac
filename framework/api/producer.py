"""A producer that writes every record Kafka accepts, including null key *and* null value.

aiokafka's ``send()`` asserts that a record has a key or a value, but Kafka allows records
with neither, and a mirror must copy them byte for byte. :class:`RecordProducer` sends such
records through the same metadata, partitioner and accumulator path ``send()`` uses.
(This touches aiokafka internals, which is why aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer, TopicPartition


class RecordProducer(AIOKafkaProducer):
    """AIOKafkaProducer whose ``send`` also accepts records with a null key and a null value."""

    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        """As ``AIOKafkaProducer.send``; a record with neither key nor value is written as such."""
        transactional = self._txn_manager is not None and self._txn_manager.transactional_id is not None
        if key is not None or value is not None or transactional:
            return await super().send(topic, value=value, key=key, partition=partition,
                                      timestamp_ms=timestamp_ms, headers=headers)
        await self.client._wait_on_metadata(topic)
        partition = self._partition(topic, partition, None, None, None, None)
        return await self._message_accumulator.add_message(
            TopicPartition(topic, partition), None, None, self._request_timeout_ms / 1000,
            timestamp_ms=timestamp_ms, headers=headers or [])
