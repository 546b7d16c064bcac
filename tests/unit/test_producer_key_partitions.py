"""The producer remembers the default partitioner's choice per key, exactly as the partitioner chose."""

from aiokafka.partitioner import DefaultPartitioner

import mirrorline.clients.key_partitioner as key_partitioner
from mirrorline.clients.producer import RecordProducer


class CountingHash:
    """Wraps mirrorline's murmur2, counting calls."""

    def __init__(self, original):
        self.original, self.calls = original, 0

    def __call__(self, data):
        self.calls += 1
        return self.original(data)


def _producer(monkeypatch, partitions: set[int], **kwargs) -> RecordProducer:
    producer = RecordProducer(bootstrap_servers="127.0.0.1:1", **kwargs)
    monkeypatch.setattr(producer._metadata, "partitions_for_topic", lambda topic: partitions)
    monkeypatch.setattr(producer._metadata, "available_partitions_for_topic", lambda topic: partitions)
    return producer


async def test_keyed_partitions_are_hashed_once_and_match_the_partitioner(monkeypatch):
    hashing = CountingHash(key_partitioner.murmur2)
    monkeypatch.setattr(key_partitioner, "murmur2", hashing)
    partitions = set(range(25))
    producer = _producer(monkeypatch, partitions)
    try:
        await _check_keyed_partitions(producer, partitions, hashing)
    finally:
        await producer.stop()


async def _check_keyed_partitions(producer, partitions, hashing):
    keys = [f'["mirror",{{"cluster":"A","partition":{n},"topic":"t{n % 7}"}}]'.encode() for n in range(300)]
    first = [producer._partition("offsets", None, k, b"v", k, b"v") for k in keys]
    assert first == [DefaultPartitioner()(k, sorted(partitions), []) for k in keys]
    calls = hashing.calls
    assert [producer._partition("offsets", None, k, b"v", k, b"v") for k in keys] == first
    assert hashing.calls == calls, "a key seen before was hashed again"
    assert producer._partition("offsets", 3, keys[0], b"v", keys[0], b"v") == 3  # an explicit partition wins
    # send_keyed's partitions: the same choices, from the same cache
    assert producer._partitions_of("offsets", None, [(k, b"v") for k in keys]) == first
    assert producer._partitions_of("offsets", 3, [(k, b"v") for k in keys[:4]]) == [3] * 4
    assert hashing.calls == calls, "a key seen before was hashed again"

    partitions.update(range(25, 40))  # the topic grew: every key is placed anew
    calls = hashing.calls
    grown = [producer._partition("offsets", None, k, b"v", k, b"v") for k in keys]
    assert hashing.calls == calls + len(keys)
    assert grown == [DefaultPartitioner()(k, sorted(partitions), []) for k in keys]


async def test_a_custom_partitioner_is_asked_every_time(monkeypatch):
    asked = []

    def last_partition(key, all_partitions, available):
        asked.append(key)
        return all_partitions[-1]

    producer = _producer(monkeypatch, {0, 1, 2}, partitioner=last_partition)
    try:
        for _ in range(3):
            assert producer._partition("t", None, b"k", b"v", b"k", b"v") == 2
        assert len(asked) == 3
    finally:
        await producer.stop()


async def test_unhashable_keys_are_partitioned_without_the_cache(monkeypatch):
    producer = _producer(monkeypatch, set(range(5)))
    try:
        key = bytearray(b"a serializer may return a bytearray")
        assert producer._partition("t", None, key, b"v", key, b"v") == DefaultPartitioner()(key, list(range(5)), [])
        assert producer._key_partitions == {}
    finally:
        await producer.stop()
