"""Which topics a consumer's fetches were answered with an error that can mean the topic changed.

aiokafka's fetcher handles a partition's fetch error itself (refreshes metadata, fetches again) and
tells the caller nothing, except OFFSET_OUT_OF_RANGE under ``auto.offset.reset=none``. A topic
deleted and created again shows at the partition's leader as UNKNOWN_TOPIC_OR_PARTITION (or
NOT_LEADER_OR_FOLLOWER, a leader epoch error, UNKNOWN_TOPIC_ID...) while it is gone; once the new
topic has grown past the old position, a fetch at that position succeeds and nothing says the
records before it belong to a new topic. :func:`watch_fetch_errors` wraps the consumer's client
``send`` for Fetch responses and notes, for each such error, the topic and the broker that
answered: that broker has seen the change (if it was one), so asking it for the topic's ID
(:mod:`.topic_ids`) cannot return the old one.

Cost: one pass over the partitions of each Fetch response (an incremental fetch session answers
only partitions with news), reading one error code each; nothing more unless one is set.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer

_FETCH_API_KEY = 1

#: Partition errors of a fetch that can mean the topic was deleted (and maybe re-created):
#: OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
#: FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID.
TOPIC_CHANGE_ERRORS = frozenset({1, 3, 5, 6, 74, 75, 100, 103})


class FetchErrorWatch:
    """The topics whose partitions a fetch answered with one of :data:`TOPIC_CHANGE_ERRORS`, and by which broker."""

    def __init__(self) -> None:
        self._topics: dict[str, int] = {}
        #: how many partition errors were noted (for tests and logs)
        self.noted = 0

    def note(self, node_id: int, response) -> None:
        """Note the topics of ``response`` (a Fetch response from ``node_id``) with a partition error."""
        for topic, partitions in response.topics:
            for partition in partitions:
                if partition[1] in TOPIC_CHANGE_ERRORS:
                    self._topics[topic] = node_id
                    self.noted += 1

    def sign(self, topic: str, node_id: int) -> None:
        """Note a sign for ``topic`` seen at ``node_id`` other than an error (a partition fetched again after a gap)."""
        self._topics[topic] = node_id

    def take(self) -> dict[str, int]:
        """``{topic: broker id}`` noted since the last call (the broker of the latest error), then forgotten."""
        if not self._topics:
            return {}
        taken, self._topics = self._topics, {}
        return taken


def watch_fetch_errors(consumer: AIOKafkaConsumer) -> FetchErrorWatch | None:
    """Watch a started consumer's Fetch responses (module docstring); None for an object without
    aiokafka's client (a test's stand-in consumer)."""
    client = getattr(consumer, "_client", None)
    if client is None:
        return None
    watch = FetchErrorWatch()
    original_send = client.send

    async def send(node_id, request, **kwargs):
        response = await original_send(node_id, request, **kwargs)
        if getattr(request, "API_KEY", None) == _FETCH_API_KEY and response is not None:
            watch.note(node_id, response)
        return response

    client.send = send
    return watch
