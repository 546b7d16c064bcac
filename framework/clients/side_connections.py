"""Requests that must not queue behind a long-polling fetch go out on a connection of their own.

A Kafka broker answers the requests of one connection in order, one at a time, and it holds a
fetch that found nothing for up to ``fetch.max.wait.ms`` (500 ms by default; 5 s for an idle
mirror task's consumer). aiokafka sends every request of a consumer to a broker on the same
connection, so a ``ListOffsets`` (end offsets, beginning offsets, a position reset) sent while a
fetch waits is answered only when the fetch is. A Kafka-backed log that reads "to its end" before
every rebalance, or a task asking for its partitions' end offsets, then waits half a second, or
five, for nothing. (The Java consumer has the same one-connection rule, and the same wait.)

:func:`list_offsets_aside` sends a consumer's ``ListOffsets`` requests, and the ``Metadata``
requests it sends through ``client.send`` (the topic-ID checks of :mod:`.topic_ids`; aiokafka's
own metadata refreshes use a connection of their own already), on a second connection per broker
(aiokafka keys connections by node and group); fetches keep theirs. The second connection is
opened on first use only.
"""

from __future__ import annotations

__all__ = ["SIDE_GROUP", "list_offsets_aside"]

#: ListOffsets (2) and Metadata (3): requests a caller waits on, answered at once by the broker
_ASIDE_API_KEYS = frozenset({2, 3})
#: the connection group those requests use (aiokafka accepts any hashable group)
SIDE_GROUP = ("mirrorline", "side")


def list_offsets_aside(consumer) -> bool:
    """Send a started aiokafka consumer's ``ListOffsets`` and ``Metadata`` requests on their own
    connection per broker.

    Returns False for an object without aiokafka's client (a test's stand-in consumer).
    """
    client = getattr(consumer, "_client", None)
    if client is None:
        return False
    original_send = client.send

    async def send(node_id, request, **kwargs):
        if "group" not in kwargs and getattr(request, "API_KEY", None) in _ASIDE_API_KEYS:
            kwargs["group"] = SIDE_GROUP
        return await original_send(node_id, request, **kwargs)

    client.send = send
    return True
