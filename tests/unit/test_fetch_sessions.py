"""Incremental fetch sessions (KIP-227) under an aiokafka consumer's client, against a fake broker node.

The fake ``send`` decodes nothing: it sees the request struct aiokafka's connection would encode
(built at Fetch v11) and answers as a broker with sessions does. What is checked: the first fetch
opens a session with every partition, later ones name only partitions whose offset changed and
forget the dropped ones, epochs count up, and a refused session or a failed send starts over with
a full fetch without the fetcher seeing the refusal. tests/integration/mirror/test_fetch_sessions_real.py
runs the same against a real broker.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.fetch import FetchRequest, FetchRequest_v4, FetchRequest_v11

from mirrorline.clients.fetch_sessions import use_fetch_sessions


class FakeNode:
    """Records the built requests and answers them; ``answers`` queues special answers."""

    def __init__(self, version=FetchRequest_v11):
        self.version = version
        self.sent = []
        self.answers = []

    async def send(self, node_id, request, **kwargs):
        struct = request.build(self.version)
        self.sent.append(struct)
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer
        session_id = getattr(struct, "session_id", 0)
        return SimpleNamespace(error_code=0, session_id=session_id or 77, topics=[])


def consumer_on(node: FakeNode):
    client = SimpleNamespace(send=node.send)
    return SimpleNamespace(_client=client, _fetcher=object())


def fetch(offsets: dict[tuple[str, int], int]) -> FetchRequest:
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append((partition, offset, 1048576))
    return FetchRequest(500, 1, 52428800, 1, list(topics.items()))


def named(struct) -> dict[tuple[str, int], int]:
    return {(topic, p[0]): p[2] for topic, partitions in struct.topics for p in partitions}


async def test_first_fetch_opens_a_session_and_idle_fetches_name_no_partition():
    node = FakeNode()
    consumer = consumer_on(node)
    sessions = use_fetch_sessions(consumer)
    everything = {("t", p): 0 for p in range(1000)}
    await consumer._client.send(1, fetch(everything))
    first = node.sent[-1]
    assert (first.session_id, first.session_epoch) == (0, 0) and len(named(first)) == 1000
    for epoch in (1, 2, 3):
        await consumer._client.send(1, fetch(everything))
        idle = node.sent[-1]
        assert (idle.session_id, idle.session_epoch) == (77, epoch)
        assert named(idle) == {} and idle.forgotten_topics_data == []
    assert sessions.counters["partitions_sent"] == 1000


async def test_changed_offsets_are_sent_and_dropped_partitions_forgotten():
    node = FakeNode()
    consumer = consumer_on(node)
    use_fetch_sessions(consumer)
    await consumer._client.send(1, fetch({("a", 0): 5, ("a", 1): 9, ("b", 0): 0}))
    await consumer._client.send(1, fetch({("a", 0): 7, ("a", 1): 9, ("c", 3): 2}))
    struct = node.sent[-1]
    assert named(struct) == {("a", 0): 7, ("c", 3): 2}
    assert struct.forgotten_topics_data == [("b", [0])]
    await consumer._client.send(1, fetch({("a", 0): 7, ("a", 1): 9, ("c", 3): 2}))
    assert named(node.sent[-1]) == {} and node.sent[-1].forgotten_topics_data == []


async def test_inside_a_changed_topic_only_its_changed_partitions_are_sent_or_forgotten():
    """The diff skips topics whose partition list is unchanged, and goes partition by partition
    in the others: a moved offset is sent, a dropped partition forgotten, a reordered list
    with the same entries sends nothing, a new fetch size is sent."""
    node = FakeNode()
    consumer = consumer_on(node)
    use_fetch_sessions(consumer)
    await consumer._client.send(1, fetch({("a", 0): 5, ("a", 1): 9, ("a", 2): 4, ("b", 0): 0}))
    await consumer._client.send(1, fetch({("a", 2): 4, ("a", 0): 6, ("b", 0): 0}))
    struct = node.sent[-1]
    assert named(struct) == {("a", 0): 6}
    assert struct.forgotten_topics_data == [("a", [1])]
    await consumer._client.send(1, fetch({("a", 0): 6, ("a", 2): 4, ("b", 0): 0}))  # same entries, new order
    assert named(node.sent[-1]) == {} and node.sent[-1].forgotten_topics_data == []
    smaller = FetchRequest(500, 1, 52428800, 1, [("a", [(0, 6, 1048576), (2, 4, 1024)]), ("b", [(0, 0, 1048576)])])
    await consumer._client.send(1, smaller)
    assert node.sent[-1].topics == [("a", [(2, -1, 4, -1, 1024)])]  # (partition, epoch, offset, start, size)


async def test_a_refused_session_is_fetched_again_in_full_at_once():
    node = FakeNode()
    consumer = consumer_on(node)
    sessions = use_fetch_sessions(consumer)
    offsets = {("t", 0): 3, ("t", 1): 4}
    await consumer._client.send(1, fetch(offsets))
    node.answers.append(SimpleNamespace(error_code=70, session_id=0, topics=[]))  # FETCH_SESSION_ID_NOT_FOUND
    response = await consumer._client.send(1, fetch(offsets))
    refused, again = node.sent[-2:]
    assert refused.session_id == 77 and named(refused) == {}
    assert (again.session_id, again.session_epoch) == (0, 0) and named(again) == offsets
    assert response.error_code == 0 and sessions.counters["resets"] == 1


async def test_a_failed_send_starts_over_with_a_full_fetch():
    node = FakeNode()
    consumer = consumer_on(node)
    use_fetch_sessions(consumer)
    offsets = {("t", 0): 3}
    await consumer._client.send(1, fetch(offsets))
    node.answers.append(KafkaConnectionError("gone"))
    with pytest.raises(KafkaConnectionError):
        await consumer._client.send(1, fetch(offsets))
    await consumer._client.send(1, fetch(offsets))
    assert (node.sent[-1].session_id, node.sent[-1].session_epoch) == (0, 0) and named(node.sent[-1]) == offsets


async def test_a_broker_without_sessions_gets_full_fetches():
    node = FakeNode(FetchRequest_v4)
    consumer = consumer_on(node)
    use_fetch_sessions(consumer)
    offsets = {("t", 0): 3, ("t", 1): 1}
    for _ in range(3):
        await consumer._client.send(1, fetch(offsets))
        assert {(t, p[0]): p[1] for t, parts in node.sent[-1].topics for p in parts} == offsets


async def test_a_broker_that_keeps_no_session_gets_full_fetches():
    node = FakeNode()
    node.send_original = node.send

    async def no_session(node_id, request, **kwargs):
        await node.send_original(node_id, request)
        return SimpleNamespace(error_code=0, session_id=0, topics=[])

    consumer = SimpleNamespace(_client=SimpleNamespace(send=no_session), _fetcher=object())
    use_fetch_sessions(consumer)
    offsets = {("t", 0): 3}
    for _ in range(2):
        await consumer._client.send(1, fetch(offsets))
        assert (node.sent[-1].session_id, node.sent[-1].session_epoch) == (0, 0) and named(node.sent[-1]) == offsets


def test_a_stand_in_consumer_gets_no_sessions():
    assert use_fetch_sessions(SimpleNamespace()) is None


async def test_the_partitions_answered_are_told_once_and_none_when_a_broker_has_no_sessions():
    """A mirror task's lag sweep reads only the partitions a fetch answer may have moved: under a
    session those the answer names. Without sessions every partition is answered: None, read all."""
    node = FakeNode()
    consumer = consumer_on(node)
    sessions = use_fetch_sessions(consumer)
    offsets = {("t", 0): 3, ("t", 1): 4, ("u", 0): 0}
    await consumer._client.send(1, fetch(offsets))
    assert sessions.take_answered() == set()  # the session opened; its answer named no partition
    # (partition, error, high watermark, last stable offset, log start, aborted, records)
    node.answers.append(SimpleNamespace(error_code=0, session_id=77, topics=[("t", [(1, 0, 9, 9, 0, None, b"")])]))
    await consumer._client.send(1, fetch(offsets))
    assert sessions.take_answered() == {("t", 1)}
    assert sessions.take_answered() == set()

    old = FakeNode(FetchRequest_v4)
    consumer = consumer_on(old)
    sessions = use_fetch_sessions(consumer)
    old.answers.append(SimpleNamespace(error_code=0, topics=[("t", [(0, 0, 5, -1, None, b"")])]))
    await consumer._client.send(1, fetch({("t", 0): 3}))
    assert sessions.take_answered() is None
    assert sessions.take_answered() == set()


@pytest.mark.parametrize("gather_ms", [25, 7, 0])
async def test_while_records_flow_the_next_fetch_gathers_for_the_consumers_wait(gather_ms):
    """An answer with records, received at once, makes the next fetch ask the broker to gather
    FLOWING_MIN_BYTES for at most the consumer's gather wait (both waits set alike here); 0 keeps
    the consumer's own settings (fetch.min.bytes 1, fetch.max.wait.ms 500 here) whatever flows."""
    from mirrorline.clients.fetch_sessions import FLOWING_MIN_BYTES

    node = FakeNode()
    consumer = consumer_on(node)
    sessions = use_fetch_sessions(consumer, gather_max_wait_ms=gather_ms, gather_trickle_wait_ms=gather_ms)
    offsets = {("t", 0): 0}
    with_records = SimpleNamespace(error_code=0, session_id=77, topics=[("t", [(0, 0, 5, b"batch")])])
    node.answers = [with_records]
    await consumer._client.send(1, fetch(offsets))
    await consumer._client.send(1, fetch({("t", 0): 1}))
    after = node.sent[-1]
    if gather_ms:
        assert (after.max_wait_time, after.min_bytes) == (gather_ms, FLOWING_MIN_BYTES)
        assert sessions.counters["flowing"] == 1
    else:
        assert (after.max_wait_time, after.min_bytes) == (500, 1)
        assert sessions.counters["flowing"] == 0
    # an empty answer (the FakeNode's default) ends the flow: the consumer's own settings again
    await consumer._client.send(1, fetch({("t", 0): 1}))
    assert (node.sent[-1].max_wait_time, node.sent[-1].min_bytes) == (500, 1)


def test_a_negative_gather_wait_is_refused():
    from mirrorline.clients.fetch_sessions import FetchSessions

    with pytest.raises(ValueError, match="gather_max_wait_ms must be 0 or more"):
        FetchSessions(gather_max_wait_ms=-1)
    with pytest.raises(ValueError, match="gather_trickle_wait_ms must be 0 or more"):
        FetchSessions(gather_trickle_wait_ms=-1)


@pytest.mark.parametrize(("gather_ms", "trickle_ms", "slow", "fast"),
                         [(25, 10, 10, 25), (25, 40, 25, 25), (0, 10, None, None), (25, 0, None, 25)])
async def test_a_flow_gathers_for_the_trickle_wait_until_it_runs_fast(gather_ms, trickle_ms, slow, fast):
    """While the rate is a trickle a flowing fetch waits the trickle wait (never longer than the
    gather wait), once it is fast the whole gather wait; a wait of 0 keeps the consumer's own
    settings (500 ms for 1 byte here)."""
    from mirrorline.clients.fetch_sessions import FLOWING_MIN_BYTES

    node = FakeNode()
    consumer = consumer_on(node)
    sessions = use_fetch_sessions(consumer, gather_max_wait_ms=gather_ms, gather_trickle_wait_ms=trickle_ms)
    with_records = SimpleNamespace(error_code=0, session_id=77, topics=[("t", [(0, 0, 5, b"batch")])])
    node.answers = [with_records, with_records]
    await consumer._client.send(1, fetch({("t", 0): 0}))
    await consumer._client.send(1, fetch({("t", 0): 1}))
    asked_slow = node.sent[-1]
    sessions.rate.fast = True
    await consumer._client.send(1, fetch({("t", 0): 2}))
    asked_fast = node.sent[-1]
    for asked, wait in ((asked_slow, slow), (asked_fast, fast)):
        expected = (500, 1) if wait is None else (wait, FLOWING_MIN_BYTES)
        assert (asked.max_wait_time, asked.min_bytes) == expected


def test_the_flow_rate_turns_fast_at_two_mib_a_second_and_back_under_one():
    """Judged over half-second windows: 2 MiB/s or more makes the flow fast, under 1 MiB/s a
    trickle again, and a rate between the two leaves it as it was."""
    from mirrorline.clients.fetch_sessions import FAST_FLOW_BYTES_PER_S, RATE_WINDOW_S, FlowRate

    rate = FlowRate()
    now = 100.0

    def window(bytes_per_s: float) -> bool:
        nonlocal now
        steps = 8  # eight answers per window, as a flowing consumer takes them in (exact in binary)
        for _ in range(steps):
            now += RATE_WINDOW_S / steps
            rate.note(int(bytes_per_s * RATE_WINDOW_S / steps), now)
        return rate.fast

    rate.note(0, now)
    assert window(500_000) is False
    assert window(1.5 * 1024 * 1024) is False  # between the bounds: stays a trickle
    assert window(FAST_FLOW_BYTES_PER_S * 1.01) is True
    assert window(1.5 * 1024 * 1024) is True  # between the bounds: stays fast
    assert window(0.9 * 1024 * 1024) is False
    # an answer after a long quiet spell judges the whole spell: a trickle
    window(FAST_FLOW_BYTES_PER_S * 2)
    now += 5.0
    rate.note(100_000, now)
    assert rate.fast is False
