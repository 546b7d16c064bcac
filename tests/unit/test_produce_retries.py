"""Failed produce batches back off per batch, exponentially, as Java's producer (mirrorline.clients.produce_retries),
and batches refused as not writable yet wait for a probe to say they are (mirrorline.clients.partition_readiness).

Pure unit tests: the producer is never started; its client's ``send`` is replaced by one that
answers each produce request from a script, and each ListOffsets probe from another. The
behaviour against real brokers is covered by tests/integration/test_refused_writes_wait.py and by
the fault tests that stop and restart a target broker under a running mirror.
"""

import asyncio
import time

import pytest
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.offset import OffsetRequest, OffsetResponse_v4
from aiokafka.protocol.produce import ProduceResponse_v7
from aiokafka.structs import TopicPartition

from mirrorline.clients.produce_retries import DEFAULT_RETRY_BACKOFF_MAX_MS, JITTER, retry_backoff_s
from mirrorline.clients.producer import RecordProducer

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_ENOUGH_REPLICAS = 19  # retriable, and not "not made yet": the ordinary back-off path
TOPIC_AUTHORIZATION_FAILED = 29
BASE_MS = 40
A, B = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.mark.parametrize("failures, term_ms", [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (30, 1000)])
def test_the_wait_doubles_per_failure_up_to_the_cap_with_javas_jitter(failures, term_ms):
    """Java's ExponentialBackoff(retry.backoff.ms=100, 2, retry.backoff.max.ms=1000, 0.2) at attempts-1."""
    low = retry_backoff_s(failures, 0.1, 1.0, draw=lambda: 0.0)
    mid = retry_backoff_s(failures, 0.1, 1.0, draw=lambda: 0.5)
    high = retry_backoff_s(failures, 0.1, 1.0, draw=lambda: 0.999999)
    assert mid == pytest.approx(term_ms / 1000)
    assert low == pytest.approx(term_ms / 1000 * (1 - JITTER))
    assert high == pytest.approx(min(term_ms / 1000 * (1 + JITTER), 1.0), rel=1e-5)


def test_a_cap_not_above_the_base_is_a_constant_wait_without_jitter():
    assert retry_backoff_s(5, 0.5, 0.2, draw=lambda: 0.9) == 0.2
    assert retry_backoff_s(1, 0.3, 0.3, draw=lambda: 0.9) == 0.3
    assert retry_backoff_s(3, 0.0, 1.0, draw=lambda: 0.9) == 0.0


def test_javas_default_cap():
    assert DEFAULT_RETRY_BACKOFF_MAX_MS == 1000


class ScriptedBroker:
    """Answers each produce request with the error codes of the next entry of ``script``
    (partition -> error code; missing partitions succeed), or raises it if it is an exception;
    each ListOffsets probe likewise from ``probe_script`` (once empty: every partition writable)."""

    def __init__(self, script, probe_script=()):
        self.script = list(script)
        self.probe_script = list(probe_script)
        self.requests = []
        self.probes = []

    async def send(self, node_id, request, **_kwargs):
        if isinstance(request, OffsetRequest):
            return self._probe(node_id, request)
        partitions = {(topic, p) for topic, parts in request._topics for p, _data in parts}
        self.requests.append((time.monotonic(), partitions))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return ProduceResponse_v7(topics=[(topic, [(p, step.get((topic, p), 0), 10, -1, 0)])
                                          for topic, p in sorted(partitions)], throttle_time_ms=0)

    def _probe(self, node_id, request):
        partitions = {(topic, p) for topic, parts in request._topics for p, timestamp in parts}
        assert all(timestamp == -1 for _topic, parts in request._topics for _p, timestamp in parts)  # latest
        self.probes.append((time.monotonic(), node_id, partitions))
        step = self.probe_script.pop(0) if self.probe_script else {}
        if isinstance(step, Exception):
            raise step
        return OffsetResponse_v4(throttle_time_ms=0, topics=[(topic, [(p, step.get((topic, p), 0), -1, 10, 0)])
                                                             for topic, p in sorted(partitions)])


@pytest.fixture
async def producers():
    made = []
    yield made
    for producer in made:
        await producer.stop()


async def _producer(monkeypatch, broker, made, lanes=2) -> RecordProducer:
    producer = RecordProducer(bootstrap_servers="127.0.0.1:1", produce_lanes=lanes, retry_backoff_ms=BASE_MS)
    made.append(producer)
    monkeypatch.setattr(producer.client, "send", broker.send)
    monkeypatch.setattr(producer.client, "force_metadata_update", lambda: None)
    for tp in (A, B):
        await producer._message_accumulator.add_message(tp, None, b"v", timeout=1)
    return producer


def _drain(producer, key, *tps) -> dict:
    """What the sender does before a request: pop each partition's batch, mute it, mark the lane busy."""
    sender = producer._sender
    batches = {tp: producer._message_accumulator._pop_batch(tp) for tp in tps}
    sender._in_flight.add(key)
    sender._muted_partitions.update(tps)
    return batches


async def _wait_until(predicate, timeout=3.0) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "not reached"
        await asyncio.sleep(0.002)
    return time.monotonic() - started


async def test_a_refused_batch_waits_alone_while_its_lane_and_the_others_go_on(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_ENOUGH_REPLICAS}])
    producer = await _producer(monkeypatch, broker, producers)
    sender, accumulator = producer._sender, producer._message_accumulator
    batches = _drain(producer, (0, 1), A, B)

    await sender._send_produce_req((0, 1), batches)

    assert (0, 1) not in sender._in_flight  # the lane is free at once, not after the back-off
    assert batches[B].future.done() and batches[B].future.result().offset == 10
    assert B not in sender._muted_partitions
    assert A in sender._muted_partitions and A not in accumulator._batches  # waiting out its back-off
    assert not batches[A].future.done()
    waited = await _wait_until(lambda: A in accumulator._batches)
    assert BASE_MS / 1000 * (1 - JITTER) - 0.01 <= waited <= BASE_MS / 1000 * (1 + JITTER) + 0.05
    assert A not in sender._muted_partitions
    assert accumulator._waiter_future.done()  # the sender is woken to send it again
    assert accumulator._batches[A][0] is batches[A]  # the same batch, first in its partition's queue


async def test_each_further_failure_doubles_the_wait(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_ENOUGH_REPLICAS}] * 3)
    producer = await _producer(monkeypatch, broker, producers)
    accumulator = producer._message_accumulator
    waits = []
    for _attempt in range(3):
        batches = _drain(producer, (0, 0), A)
        await producer._sender._send_produce_req((0, 0), batches)
        waits.append(await _wait_until(lambda: A in accumulator._batches))
    for failures, waited in enumerate(waits, 1):
        term = BASE_MS / 1000 * 2 ** (failures - 1)
        assert term * (1 - JITTER) - 0.01 <= waited <= term * (1 + JITTER) + 0.05, (failures, waits)


async def test_a_lost_connection_retries_every_batch_of_the_request(monkeypatch, producers):
    broker = ScriptedBroker([KafkaConnectionError("gone")])
    producer = await _producer(monkeypatch, broker, producers, lanes=1)
    sender, accumulator = producer._sender, producer._message_accumulator
    batches = _drain(producer, 0, A, B)

    await sender._send_produce_req(0, batches)

    assert 0 not in sender._in_flight
    assert {A, B} <= sender._muted_partitions
    await _wait_until(lambda: A in accumulator._batches and B in accumulator._batches)
    assert not sender._muted_partitions
    assert not any(batch.future.done() for batch in batches.values())


async def test_stopping_the_sender_puts_waiting_batches_back_at_once(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_ENOUGH_REPLICAS}])
    producer = await _producer(monkeypatch, broker, producers)
    producer._sender._retry_backoff = 30.0  # would wait far longer than the test
    batches = _drain(producer, (0, 0), A)
    await producer._sender._send_produce_req((0, 0), batches)
    assert A not in producer._message_accumulator._batches

    await producer._sender.close()

    assert producer._message_accumulator._batches[A][0] is batches[A]
    assert A not in producer._sender._muted_partitions


async def test_retry_backoff_max_ms_from_a_producer_config_caps_the_wait(monkeypatch, producers):
    from mirrorline.clients.kafka_clients import client_kwargs

    kwargs, ignored = client_kwargs({"bootstrap.servers": "127.0.0.1:1", "retry.backoff.ms": str(BASE_MS),
                                     "retry.backoff.max.ms": str(BASE_MS)}, "producer")
    assert not ignored
    producer = RecordProducer(**kwargs)
    producers.append(producer)
    broker = ScriptedBroker([{("t", 0): NOT_ENOUGH_REPLICAS}] * 3)
    monkeypatch.setattr(producer.client, "send", broker.send)
    await producer._message_accumulator.add_message(A, None, b"v", timeout=1)
    for _attempt in range(3):
        await producer._sender._send_produce_req(0, _drain(producer, 0, A))
        waited = await _wait_until(lambda: A in producer._message_accumulator._batches)
        assert waited <= BASE_MS / 1000 + 0.05  # constant, as Java with retry.backoff.max.ms <= retry.backoff.ms


async def test_a_negative_retry_backoff_max_ms_is_refused():
    with pytest.raises(ValueError, match="retry.backoff.max.ms"):
        RecordProducer(bootstrap_servers="127.0.0.1:1", retry_backoff_max_ms=-1)


class RefreshCounter:
    """A client whose metadata was last refreshed at ``refreshed_s`` (wall clock) and that counts forced refreshes."""

    def __init__(self, refreshed_s: float):
        self.cluster = type("Cluster", (), {"_last_refresh_ms": refreshed_s * 1000})()
        self.forced = 0

    def force_metadata_update(self):
        self.forced += 1


async def test_refusals_refresh_the_metadata_at_most_once_per_retry_backoff():
    from mirrorline.clients.produce_retries import SpacedRefresh

    now = time.time()
    client = RefreshCounter(refreshed_s=now - 0.01)  # refreshed 10 ms ago
    spaced = SpacedRefresh(client, interval_s=BASE_MS / 1000)
    for _refusal in range(50):  # a burst of refusals
        spaced.request()
    assert client.forced == 0  # not back to back with the last refresh
    await _wait_until(lambda: client.forced == 1)
    await asyncio.sleep(BASE_MS / 1000 * 2)
    assert client.forced == 1  # one refresh for the whole burst

    client.cluster._last_refresh_ms = (time.time() - 1) * 1000  # the last refresh is old: at once
    spaced.request()
    assert client.forced == 2


async def test_a_refresh_still_due_is_dropped_when_the_sender_stops():
    from mirrorline.clients.produce_retries import SpacedRefresh

    client = RefreshCounter(refreshed_s=time.time())
    spaced = SpacedRefresh(client, interval_s=BASE_MS / 1000)
    spaced.request()
    spaced.cancel()
    await asyncio.sleep(BASE_MS / 1000 * 2)
    assert client.forced == 0


async def test_a_refused_write_asks_for_its_refresh_through_the_spacing(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}, {("t", 1): NOT_LEADER_OR_FOLLOWER}])
    producer = await _producer(monkeypatch, broker, producers)
    forced = []
    monkeypatch.setattr(producer.client, "force_metadata_update", lambda: forced.append(time.monotonic()))
    producer.client.cluster._last_refresh_ms = time.time() * 1000  # just refreshed
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A))
    await producer._sender._send_produce_req((0, 1), _drain(producer, (0, 1), B))
    assert not forced
    await _wait_until(lambda: forced)
    await asyncio.sleep(BASE_MS / 1000 * 2)
    assert len(forced) == 1  # both refusals, one refresh


def _leader(producer, node_id=0) -> None:
    """The producer's metadata names ``node_id`` leader of every partition."""
    producer.client.cluster.leader_for_partition = lambda tp: node_id


async def test_a_batch_refused_as_not_made_yet_is_probed_not_resent(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}],
                            probe_script=[{("t", 0): NOT_LEADER_OR_FOLLOWER}, {("t", 0): UNKNOWN_TOPIC_OR_PARTITION}])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    sender, accumulator, probe = producer._sender, producer._message_accumulator, producer.readiness_probe
    batches = _drain(producer, (0, 1), A, B)
    sent_at = time.monotonic()

    await sender._send_produce_req((0, 1), batches)

    assert batches[B].future.done() and A in sender._muted_partitions and probe.held == 1
    await _wait_until(lambda: A in accumulator._batches)
    assert len(broker.requests) == 1  # the refused batch was not sent again while its partition was not made
    assert [partitions for _at, _node, partitions in broker.probes] == [{("t", 0)}] * 3
    assert {node for _at, node, _partitions in broker.probes} == {0}  # asked of the broker that refused it
    gaps = [at - before for (at, *_), before in zip(broker.probes, [sent_at] + [at for at, *_ in broker.probes])]
    for failures, gap in enumerate(gaps, 1):  # each probe waits the batch's own back-off, doubling
        term = BASE_MS / 1000 * 2 ** (failures - 1)
        assert term * (1 - JITTER) - 0.01 <= gap <= term * (1 + JITTER) + 0.05, (failures, gaps)
    assert accumulator._batches[A][0] is batches[A] and A not in sender._muted_partitions
    assert not batches[A].future.done()
    assert probe.held == 0
    assert probe.counters == {"held": 1, "probes": 3, "still_refused": 2, "answered_writable": 1}


async def test_partitions_refused_together_are_probed_in_one_request(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER, ("t", 1): UNKNOWN_TOPIC_OR_PARTITION}])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A, B))
    await _wait_until(lambda: A in producer._message_accumulator._batches and B in producer._message_accumulator._batches)
    assert [partitions for _at, _node, partitions in broker.probes] == [{("t", 0), ("t", 1)}]


async def test_any_other_probe_answer_lets_the_write_decide(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}], probe_script=[{("t", 0): TOPIC_AUTHORIZATION_FAILED}])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A))
    await _wait_until(lambda: A in producer._message_accumulator._batches)
    assert len(broker.probes) == 1 and producer.readiness_probe.counters["answered_writable"] == 1


async def test_a_partition_whose_leader_moved_goes_the_ordinary_retry_path(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer, node_id=2)  # the refresh the refusal asked for names another broker
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A))
    await _wait_until(lambda: A in producer._message_accumulator._batches)
    assert not broker.probes  # not asked of the old leader
    assert producer.readiness_probe.counters["fell_back"] == 1


async def test_a_failed_probe_goes_the_ordinary_retry_path(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}], probe_script=[KafkaConnectionError("gone")])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A))
    await _wait_until(lambda: A in producer._message_accumulator._batches)
    assert len(broker.probes) == 1 and producer.readiness_probe.counters["fell_back"] == 1


async def test_an_exception_in_a_probe_round_is_logged_and_no_batch_is_left_held(monkeypatch, producers, caplog):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}], probe_script=[ValueError("a malformed answer")])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    await producer._sender._send_produce_req((0, 0), _drain(producer, (0, 0), A))
    await _wait_until(lambda: A in producer._message_accumulator._batches)
    assert producer.readiness_probe.held == 0
    failures = [r for r in caplog.records if r.name == "mirrorline.clients.partition_readiness" and r.levelname == "ERROR"]
    assert failures and "a malformed answer" in failures[0].exc_text and "retried the ordinary way" in failures[0].message


async def test_stopping_the_sender_puts_held_batches_back_at_once(monkeypatch, producers):
    broker = ScriptedBroker([{("t", 0): NOT_LEADER_OR_FOLLOWER}])
    producer = await _producer(monkeypatch, broker, producers)
    _leader(producer)
    producer._sender._retry_backoff = 30.0  # the first probe would come far later than the test
    batches = _drain(producer, (0, 0), A)
    await producer._sender._send_produce_req((0, 0), batches)
    assert producer.readiness_probe.held == 1

    await producer._sender.close()

    assert producer._message_accumulator._batches[A][0] is batches[A]
    assert A not in producer._sender._muted_partitions and producer.readiness_probe.held == 0


async def test_refused_probes_ask_for_a_metadata_refresh_at_most_once_per_backoff_cap(monkeypatch, producers):
    from mirrorline.clients.partition_readiness import ReadinessProbe

    refreshes, released = [], []
    broker = ScriptedBroker([], probe_script=[{("t", 0): NOT_LEADER_OR_FOLLOWER}] * 4)
    client = type("Client", (), {"send": broker.send})()
    client.cluster = type("Cluster", (), {"leader_for_partition": staticmethod(lambda tp: 0)})()
    probe = ReadinessProbe(client, release=released.append, fallback=None, refresh=lambda: refreshes.append(1),
                           backoff=lambda n: 0.01, base_s=0.01, max_s=10.0)
    batch = type("Batch", (), {"tp": A, "retry_count": 1})()
    probe.hold(0, batch)
    await _wait_until(lambda: released)
    assert len(broker.probes) == 5 and len(refreshes) == 1  # four refused probes, one refresh
    assert released == [batch]


async def test_a_batch_that_may_expire_is_not_held_past_its_delivery_timeout():
    from mirrorline.clients.partition_readiness import ReadinessProbe

    fell_back = []
    broker = ScriptedBroker([])
    client = type("Client", (), {"send": broker.send})()
    client.cluster = type("Cluster", (), {"leader_for_partition": staticmethod(lambda tp: 0)})()
    probe = ReadinessProbe(client, release=None, fallback=fell_back.append, refresh=lambda: None,
                           backoff=lambda n: 0.01, base_s=0.01, max_s=1.0, may_expire=True)
    batch = type("Batch", (), {"tp": A, "retry_count": 1, "expired": lambda self: True})()
    probe.hold(0, batch)
    await _wait_until(lambda: fell_back)
    assert fell_back == [batch] and not broker.probes  # the ordinary retry fails it as expired
