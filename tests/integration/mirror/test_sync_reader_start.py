"""A checkpoint task's first read of a populated offset-syncs topic does not wait on a held fetch.

The reader's consumer keeps the consumer's own reset (latest) and a long fetch.max.wait.ms (5 s for
the offset-syncs tail). Assigning the partition and awaiting its reset before seeking to the start
sent a fetch at the log end, which the broker held for the whole wait, and the read from the start
queued behind it: 5.3 s at every checkpoint task start. Syncs written with librdkafka.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.connectors.checkpoint.sync_reader import OffsetSyncReader
from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_store import OffsetSyncStore

pytestmark = pytest.mark.integration

#: A fetch wait far longer than the read may take, so a read that waits on it cannot pass.
HELD_FETCH_MS = 30_000
SYNCS = 3000


def write_syncs(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(SYNCS):
        sync = OffsetSync("orders", n % 3, n * 10, n * 10 + 5)
        producer.produce(topic, key=sync.encode_key(), value=sync.encode_value(), partition=0)
        if n % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


async def test_the_first_read_of_the_syncs_topic_is_prompt(cluster_a, unique_name):
    topic = unique_name("syncs")
    await asyncio.to_thread(write_syncs, cluster_a.bootstrap_servers, topic)
    consumer = KafkaConsumer.from_settings({"bootstrap.servers": cluster_a.bootstrap_servers,
                                            "fetch.max.wait.ms": str(HELD_FETCH_MS)})
    store = OffsetSyncStore(initialization_must_read_to_end=False)
    tails: list[asyncio.Task] = []
    reader = OffsetSyncReader(consumer, topic, store,
                              lambda work, name: tails.append(asyncio.ensure_future(work)) or tails[-1])
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        await reader.start()
        took = loop.time() - started
        assert store.ready
        # every sync was read: the newest of each partition translates its own offset exactly
        for partition in range(3):
            last = max(n for n in range(SYNCS) if n % 3 == partition)
            assert store.translate_downstream("orders", partition, last * 10) == last * 10 + 5
        assert took < 10, f"the first read took {took:.1f} s: it waited on a fetch the broker held"
    finally:
        await reader.stop()
