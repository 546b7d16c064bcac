"""BatchSender's bookkeeping against a scripted client: order, sequence numbers, retries, failures.

The broker's side of each rule is proven in tests/integration/test_batch_sender.py and by the
broker fault scenarios; here each answer is chosen, so every path is taken on purpose.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.errors import KafkaConnectionError
from aiokafka.producer.transaction_manager import TransactionManager
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import TopicPartition

from mirrorline.api.errors import KafkaError
from mirrorline.clients import batch_sender as module
from mirrorline.clients import record_batch as rb
from mirrorline.clients.batch_sender import BatchSender, make_batch_sender
from mirrorline.clients.forwarded_batch import ForwardedBatch

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
NO_ERROR, MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS = 0, 10, 19


def batch(count: int = 3, size: int = 10) -> ForwardedBatch:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 ** 30)
    for i in range(count):
        builder.append(i, 1_700_000_000_000, None, b"v" * size, [])
    return ForwardedBatch(bytes(builder.build()), count)


class ScriptedClient:
    """aiokafka's client as the sender uses it: leaders, a send answered from a script, refreshes."""

    def __init__(self, leaders: dict[TopicPartition, int]):
        self.leaders = leaders
        self.cluster = SimpleNamespace(leader_for_partition=self.leaders.get, _last_refresh_ms=0)
        self.requests: list[dict] = []
        #: per request, either an exception to raise or {tp: (error_code, offset)}; default: all accepted
        self.script: list = []
        self.refreshes = 0
        self._next_offset: dict[TopicPartition, int] = {}

    async def send(self, node_id, request, **_group):
        sent = {TopicPartition(topic, partition): bytes(data) for topic, parts in request._topics
                for partition, data in parts}
        self.requests.append({"node": node_id, "batches": sent})
        await asyncio.sleep(0)
        answer = self.script.pop(0) if self.script else {}
        if isinstance(answer, BaseException):
            raise answer
        topics: dict[str, list] = {}
        for tp, data in sent.items():
            code, offset = answer.get(tp, (NO_ERROR, None))
            if code == NO_ERROR and offset is None:
                offset = self._next_offset.get(tp, 0)
                self._next_offset[tp] = offset + rb.read_header(data)[12]
            topics.setdefault(tp.topic, []).append((tp.partition, code, offset if offset is not None else -1, -1, 0))
        return SimpleNamespace(topics=list(topics.items()))

    def force_metadata_update(self):
        self.refreshes += 1


def sender_for(client: ScriptedClient, lanes: int = 1, pid: int = 7) -> BatchSender:
    txn = TransactionManager(None, 60_000)
    txn.set_pid_and_epoch(pid, 0)
    producer = SimpleNamespace(client=client, _txn_manager=txn,
                               _sender=SimpleNamespace(_acks=-1, _request_timeout_ms=30_000, _retry_backoff=0.001))
    return BatchSender(producer, lanes, retry_backoff_max_s=0.005)


def header(data: bytes) -> tuple[int, int, int]:
    """(producer id, epoch, base sequence) written into a sent batch."""
    fields = rb.read_header(data)
    return fields[9], fields[10], fields[11]


async def test_a_producer_without_idempotence_or_with_transactions_gets_no_batch_sender():
    plain = SimpleNamespace(_txn_manager=None)
    transactional = SimpleNamespace(_txn_manager=TransactionManager("tx", 60_000))
    assert make_batch_sender(plain, 1, 1.0) is None and make_batch_sender(transactional, 1, 1.0) is None
    with pytest.raises(ValueError):
        BatchSender(transactional, 1, 1.0)


async def test_one_batch_per_partition_in_flight_and_sequences_follow_the_records():
    client = ScriptedClient({TP0: 1, TP1: 1})
    sender = sender_for(client)
    futures = [sender.submit(TP0, batch(3)), sender.submit(TP1, batch(2)), sender.submit(TP0, batch(4))]
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == [0, 0, 3]
    assert [sorted(r["batches"]) for r in client.requests] == [[TP0, TP1], [TP0]]
    assert header(client.requests[0]["batches"][TP0]) == (7, 0, 0)
    assert header(client.requests[1]["batches"][TP0]) == (7, 0, 3)
    assert sender.pending == 0 and not sender.has_pending(TP0)
    await sender.idle()


async def test_a_retriable_refusal_is_sent_again_with_the_same_sequence():
    client = ScriptedClient({TP0: 1})
    client.script = [{TP0: (NOT_ENOUGH_REPLICAS, None)}, KafkaConnectionError("lost")]
    sender = sender_for(client)
    first, second = sender.submit(TP0, batch(3)), sender.submit(TP0, batch(3))
    assert (await first).offset == 0 and (await second).offset == 3
    sent = [r["batches"] for r in client.requests]
    assert [list(b) for b in sent] == [[TP0], [TP0], [TP0], [TP0]]
    assert [header(b[TP0])[2] for b in sent] == [0, 0, 0, 3]
    assert client.refreshes >= 1  # a lost connection says the metadata may be stale


async def test_a_final_refusal_fails_the_batches_behind_it_and_the_sequence_goes_back():
    client = ScriptedClient({TP0: 1})
    client.script = [{}, {TP0: (MESSAGE_TOO_LARGE, None)}]
    sender = sender_for(client)
    ok = sender.submit(TP0, batch(2))
    refused, behind = sender.submit(TP0, batch(5)), sender.submit(TP0, batch(1))
    assert (await ok).offset == 0
    for future in (refused, behind):
        with pytest.raises(KafkaError):
            await future
    after = sender.submit(TP0, batch(1))
    await after
    assert header(client.requests[-1]["batches"][TP0])[2] == 2  # the refused batch's number, reused
    assert len(client.requests) == 3 and sender.pending == 0


async def test_a_partition_without_a_leader_waits_for_one():
    client = ScriptedClient({TP0: -1})
    sender = sender_for(client)
    future = sender.submit(TP0, batch())
    await asyncio.sleep(0.02)
    assert not client.requests and client.refreshes >= 1 and not future.done()
    client.leaders[TP0] = 2
    assert (await asyncio.wait_for(future, 5)).offset == 0
    assert client.requests[0]["node"] == 2


async def test_requests_stay_under_the_byte_bound(monkeypatch):
    monkeypatch.setattr(module, "MAX_REQUEST_BYTES", 1500)
    partitions = [TopicPartition("t", p) for p in range(6)]
    client = ScriptedClient({tp: 1 for tp in partitions})
    sender = sender_for(client)
    await asyncio.gather(*(sender.submit(tp, batch(5, size=100)) for tp in partitions))
    sizes = [sum(len(b) for b in r["batches"].values()) for r in client.requests]
    assert len(client.requests) > 1 and all(size <= 1500 for size in sizes), sizes
    assert sorted(tp for r in client.requests for tp in r["batches"]) == partitions


async def test_giving_up_fails_what_is_left_and_a_closed_sender_takes_nothing():
    client = ScriptedClient({TP0: -1})
    sender = sender_for(client)
    waiting = sender.submit(TP0, batch())
    assert sender.give_up(TimeoutError("stopped")) == 1
    with pytest.raises(Exception):
        await waiting
    await sender.close()
    with pytest.raises(Exception, match="stopping"):
        sender.submit(TP0, batch())
