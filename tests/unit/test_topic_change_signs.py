"""Signs that a topic may have been re-created, noted in the client layer, and the Metadata v12 request
that reads topic IDs (KIP-516). No broker: a fake node answers; tests/integration/mirror/
test_recreated_topic_ids.py runs the same against real brokers."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace

from aiokafka.protocol.fetch import FetchRequest, FetchRequest_v11

from mirrorline.clients import fetch_sessions
from mirrorline.clients.fetch_errors import FetchErrorWatch, watch_fetch_errors
from mirrorline.clients.fetch_sessions import use_fetch_sessions
from mirrorline.clients.topic_ids import (MetadataRequest_v12, MetadataResponse_v12, TopicIdsRequest, topic_ids_of,
                                         uuid_string)


def fetch_response(errors: dict[tuple[str, int], int]):
    """A Fetch response (v11 layout: partition, error code, high watermark, ...) with the given error codes."""
    topics: dict[str, list] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append((partition, code, 0, 0, 0, [], -1, b""))
    return SimpleNamespace(API_VERSION=11, error_code=0, session_id=0, topics=list(topics.items()))


def test_watch_notes_topic_change_errors_with_the_broker_and_forgets_them_once_taken():
    watch = FetchErrorWatch()
    assert watch.take() == {}
    watch.note(1, fetch_response({("a", 0): 0, ("a", 1): 0, ("b", 0): 3}))  # UNKNOWN_TOPIC_OR_PARTITION
    watch.note(2, fetch_response({("c", 0): 6, ("d", 0): 87}))  # NOT_LEADER_OR_FOLLOWER; 87 is no topic change
    watch.note(3, fetch_response({("b", 1): 1}))  # OFFSET_OUT_OF_RANGE, later broker wins
    assert watch.take() == {"b": 3, "c": 2}
    assert watch.take() == {}


async def test_watch_sees_fetch_responses_before_the_fetcher():
    answers = []

    async def send(node_id, request, **kwargs):
        return answers.pop(0)

    consumer = SimpleNamespace(_client=SimpleNamespace(send=send))
    watch = watch_fetch_errors(consumer)
    answers.append(fetch_response({("t", 0): 100}))  # UNKNOWN_TOPIC_ID
    request = FetchRequest(500, 1, 1000, 1, [("t", [(0, 5, 1000)])])
    assert (await consumer._client.send(4, request)).topics[0][0] == "t"
    assert watch.take() == {"t": 4}
    answers.append(SimpleNamespace(topics=[("t", [(0, 3)])]))
    await consumer._client.send(4, SimpleNamespace(API_KEY=3))  # not a fetch: not looked at
    assert watch.take() == {}


async def test_partition_fetched_again_after_a_gap_is_a_sign(monkeypatch):
    """A partition left out of the session (its records waited for the caller) for longer than GAP_SIGN_S:
    its topic may have been deleted and re-created meanwhile, with no fetch to answer an error."""
    clock = [100.0]
    monkeypatch.setattr(fetch_sessions.time, "monotonic", lambda: clock[0])

    async def send(node_id, request, **kwargs):
        struct = request.build(FetchRequest_v11)
        return SimpleNamespace(API_VERSION=11, error_code=0, session_id=getattr(struct, "session_id", 0) or 9,
                               topics=[])

    consumer = SimpleNamespace(_client=SimpleNamespace(send=send), _fetcher=object())
    watch = FetchErrorWatch()
    use_fetch_sessions(consumer, watch)

    def fetch(*keys):
        return FetchRequest(500, 1, 1000, 1, [(t, [(p, 0, 1000)]) for t, p in keys])

    await consumer._client.send(1, fetch(("a", 0), ("b", 0)))
    await consumer._client.send(1, fetch(("b", 0)))  # a-0 left out
    clock[0] += 0.1
    await consumer._client.send(1, fetch(("a", 0), ("b", 0)))  # back soon: no sign
    assert watch.take() == {}
    await consumer._client.send(1, fetch(("b", 0)))
    for _ in range(3):  # b-0 fetched all along, a-0 not
        clock[0] += fetch_sessions.GAP_SIGN_S / 2
        await consumer._client.send(1, fetch(("b", 0)))
    await consumer._client.send(1, fetch(("a", 0), ("b", 0)))  # back after a gap
    assert watch.take() == {"a": 1}
    await consumer._client.send(1, fetch(("a", 0), ("b", 0)))
    assert watch.take() == {}
    # no request to the node for a while (every partition waited for the caller): all its topics
    clock[0] += fetch_sessions.GAP_SIGN_S + 0.1
    await consumer._client.send(1, fetch(("a", 0), ("b", 0)))
    assert watch.take() == {"a": 1, "b": 1}


def test_metadata_v12_request_and_response_round_trip():
    request = TopicIdsRequest(["t1", "t2"]).build(MetadataRequest_v12)
    assert MetadataRequest_v12.FLEXIBLE_VERSION
    decoded = MetadataRequest_v12.decode(BytesIO(request.encode()))
    assert [(bytes(t[0]), t[1]) for t in decoded.topics] == [(bytes(16), "t1"), (bytes(16), "t2")]
    assert decoded.allow_auto_topic_creation is False
    raw_id = bytes(range(1, 17))
    response = MetadataResponse_v12(
        0, [(1, "localhost", 9092, None, {})], "cluster", 1,
        [(0, "t1", raw_id, False, [(0, 0, 1, 0, [1], [1], [], {})], -2147483648, {}),
         (3, "t2", bytes(16), False, [], -2147483648, {})], {})
    again = MetadataResponse_v12.decode(BytesIO(response.encode()))
    assert topic_ids_of(again) == {"t1": uuid_string(raw_id)}
    assert uuid_string(raw_id) == "AQIDBAUGBwgJCgsMDQ4PEA"  # as Kafka's Uuid.toString() prints it
