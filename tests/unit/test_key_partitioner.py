"""Kafka's murmur2 and the default partitioner's choice, as Java's producer makes it."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from mirrorline.clients.key_partitioner import murmur2, partition_for_key

#: Apache Kafka's own vectors (clients' UtilsTest.testMurmur2), signed as Java returns them
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key, signed", sorted(KAFKA_VECTORS.items()))
def test_murmur2_gives_javas_values(key, signed):
    assert murmur2(key) == signed & 0xFFFFFFFF


def test_murmur2_equals_aiokafkas_on_every_length_and_tail():
    rng = random.Random(25)
    for length in range(0, 201):
        for _ in range(10):
            key = bytes(rng.randrange(256) for _ in range(length))
            assert murmur2(key) == aiokafka_murmur2(key), (length, key)


def test_murmur2_takes_bytearrays_and_high_bytes():
    key = bytes(range(256))
    assert murmur2(bytearray(key)) == murmur2(key) == aiokafka_murmur2(key)


def test_partition_for_key_is_the_positive_hash_modulo_the_count():
    key = b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]'
    assert partition_for_key(key, 25) == (aiokafka_murmur2(key) & 0x7FFFFFFF) % 25
    assert partition_for_key(key, 1) == 0
    # a hash with the sign bit set still maps into range (toPositive, not abs)
    negative = next(k for k in (str(i).encode() for i in range(1000)) if murmur2(k) & 0x80000000)
    assert 0 <= partition_for_key(negative, 7) == (murmur2(negative) & 0x7FFFFFFF) % 7
