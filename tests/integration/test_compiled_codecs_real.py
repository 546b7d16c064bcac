"""The compiled codecs against a real broker: its Fetch and Produce answers decode exactly as
aiokafka's schema walk decodes them, and what mirrorline's producer encodes, librdkafka reads.

The source is written by librdkafka's transactional producer (an aborted transaction between two
committed ones), so the Fetch answers carry aborted-transaction lists, markers and several
batches per partition. Every frame the connections receive is kept and decoded again with
aiokafka's own walk.
"""

from __future__ import annotations

import asyncio
import io

import pytest
from aiokafka import AIOKafkaClient
from aiokafka.conn import AIOKafkaConnection
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.protocol.struct import Struct
from aiokafka.structs import TopicPartition as AioPartition

from mirrorline.clients import compiled_codecs, process_patches
from mirrorline.clients.producer import KafkaProducer
from support.kafka import create_topic, librdkafka_read

from mirror.test_transactional_source import PARTITIONS, write_transactions  # tests/integration is on sys.path

pytestmark = pytest.mark.integration

READ_COMMITTED = 1


@pytest.fixture
def received_frames(monkeypatch):
    """(response class, frame after its header) of every response a connection decodes meanwhile."""
    process_patches.install()
    frames: list[tuple[type, bytes]] = []
    original = AIOKafkaConnection._handle_frame

    def keep(self, frame):
        if self._requests and self._requests[0][1] is not None:
            frames.append((self._requests[0][1].RESPONSE_TYPE, frame))
        return original(self, frame)

    monkeypatch.setattr(AIOKafkaConnection, "_handle_frame", keep)
    return frames


def _walked(response_type: type, frame: bytes) -> Struct:
    """The frame decoded by aiokafka's own schema walk, past the v0 response header (a correlation id)."""
    return Struct.decode.__func__(response_type, io.BytesIO(frame[4:]))


async def test_real_fetch_answers_decode_as_aiokafka_decodes_them(cluster_a, unique_name, received_frames):
    a = cluster_a.bootstrap_servers
    topic = unique_name("codec-fetch")
    await create_topic(a, topic, PARTITIONS)
    committed = await asyncio.to_thread(write_transactions, a, topic, topic)
    client = AIOKafkaClient(bootstrap_servers=a)
    await client.bootstrap()
    try:
        await client.force_metadata_update()
        leader = client.cluster.leader_for_partition(AioPartition(topic, 0))
        request = FetchRequest(100, 1, 50 * 1024 * 1024, READ_COMMITTED,
                               [(topic, [(p, 0, 1024 * 1024) for p in range(PARTITIONS)])], "")
        answer = await client.send(leader, request)
    finally:
        await client.close()

    assert compiled_codecs.is_installed(type(answer))
    fetched = [(type_, frame) for type_, frame in received_frames if type_ is type(answer)]
    assert len(fetched) == 1
    assert answer == _walked(*fetched[0])
    partitions = answer.topics[0][1]
    assert sorted(p[0] for p in partitions) == list(range(PARTITIONS))
    for partition in partitions:
        assert partition[1] == 0  # no error
        assert partition[-3], "the aborted transaction is listed"  # aborted_transactions (v11: before the replica)
        assert len(partition[-1]) > 0  # the record batches
    assert len(committed) == 2 * PARTITIONS * 20


async def test_records_mirrorlines_producer_encodes_are_read_by_librdkafka(cluster_a, unique_name, received_frames):
    a = cluster_a.bootstrap_servers
    topic = unique_name("codec-produce")
    await create_topic(a, topic, PARTITIONS)
    producer = KafkaProducer.from_settings({"bootstrap.servers": a})
    await producer.start()
    sent = [(f"key-{i}".encode(), f"value-{i}-é".encode() * (i % 7 + 1), [("h", str(i).encode())])
            for i in range(300)]
    try:
        futures = [await producer.send(topic, value=value, key=key, partition=i % PARTITIONS, headers=headers)
                   for i, (key, value, headers) in enumerate(sent)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()

    produce_answers = [(type_, frame) for type_, frame in received_frames if type_.__name__.startswith("Produce")]
    assert produce_answers
    for response_type, frame in produce_answers:
        assert compiled_codecs.is_installed(response_type)
        assert response_type.decode(io.BytesIO(frame[4:])) == _walked(response_type, frame)

    read = await asyncio.to_thread(librdkafka_read, a, topic, PARTITIONS)
    assert sorted((key, value, list(headers)) for rows in read.values() for _, key, value, headers, _ in rows) == \
        sorted(sent)

