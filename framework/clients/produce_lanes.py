"""Produce lanes: a producer's requests to one broker go out on several connections at once.

A Kafka broker handles the requests of one connection strictly one after another (it stops
reading a connection until it has answered its request), and aiokafka's sender keeps one produce
request in flight per broker. So one producer writes to a broker at the pace of one request's
round trip: read, validate (decompress a zstd batch, check every record), append, answer, and
only then the next. A mirror task whose whole output goes to one or two brokers spends most of
its time waiting on that, while the broker has idle I/O threads.

:func:`enable_lanes` gives a producer ``lanes`` connections per broker (aiokafka keys its
connections by node and group; lane 0 is the producer's ordinary connection). When the sender
drains its accumulator, the batches ready for one broker are split by size over the lanes that
are free, and each share is one produce request on its own lane, so the broker works on them in
parallel. Per-partition order is untouched: aiokafka mutes a partition while its batch is in
flight, so a partition never has more than one batch on the wire, as with one lane, and idempotent
and transactional sequence numbers are assigned exactly as before. Kafka's Java producer gets a
similar effect from ``max.in.flight.requests.per.connection`` (5 by default).

The requests themselves are sent by :mod:`mirrorline.clients.produce_retries`, which sends each
share on the connection :class:`LaneClient` names. (This touches aiokafka's sender and accumulator
internals, which is why aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["MIN_SHARE_BYTES", "LaneClient", "enable_lanes", "split_by_size"]

#: requests are split only into shares of at least this many bytes (splitting tiny ones adds requests, not speed)
MIN_SHARE_BYTES = 64 * 1024


def split_by_size(batches: Mapping[Any, Any], parts: int, size_of) -> list[dict]:
    """Split ``batches`` (partition -> batch) into at most ``parts`` dicts of about equal bytes, in order.

    Each share holds at least :data:`MIN_SHARE_BYTES` unless there is only one; no share is empty.
    """
    sizes = {tp: size_of(batch) for tp, batch in batches.items()}
    total = sum(sizes.values())
    parts = max(1, min(parts, len(batches), total // MIN_SHARE_BYTES or 1))
    if parts == 1:
        return [dict(batches)]
    target = total / parts
    shares: list[dict] = [{}]
    filled = 0
    for tp, batch in batches.items():
        if filled >= target * len(shares) and len(shares) < parts:
            shares.append({})
        shares[-1][tp] = batch
        filled += sizes[tp]
    return shares


class LaneClient:
    """The producer's client, as one produce request sees it: ``send`` goes out on the request's lane."""

    def __init__(self, client, lane: int):
        self._client = client
        self._lane = lane

    async def send(self, node_id, request, **_group):
        if self._lane == 0:
            return await self._client.send(node_id, request)
        return await self._client.send(node_id, request, group=("produce-lane", self._lane))

    def __getattr__(self, name):
        return getattr(self._client, name)


def _batch_size(batch) -> int:
    return batch._builder.size()


def enable_lanes(producer, lanes: int) -> None:
    """Give an (unstarted) aiokafka producer ``lanes`` produce connections per broker (see the module docstring).

    ``lanes <= 1`` leaves the producer as it is. The sender's in-flight keys become ``(node, lane)``
    pairs: pass the same ``lanes`` to :func:`mirrorline.clients.produce_retries.install`, which sends
    each share on its lane.
    """
    if lanes <= 1:
        return
    accumulator = producer._message_accumulator
    drain = accumulator.drain_by_nodes

    def busy_nodes(in_flight) -> set:
        per_node = Counter(node for node, _lane in in_flight)
        return {node for node, count in per_node.items() if count >= lanes}

    def drain_by_lanes(ignore_nodes, muted_partitions=frozenset()):
        # ``ignore_nodes`` is the sender's in-flight set, which holds (node, lane) pairs here
        in_flight = set(ignore_nodes)
        batches, unknown_leaders_exist = drain(ignore_nodes=busy_nodes(in_flight), muted_partitions=muted_partitions)
        by_lane: dict = {}
        for node, node_batches in batches.items():
            free = [lane for lane in range(lanes) if (node, lane) not in in_flight]
            for lane, share in zip(free, split_by_size(node_batches, len(free), _batch_size)):
                by_lane[(node, lane)] = share
        return by_lane, unknown_leaders_exist

    accumulator.drain_by_nodes = drain_by_lanes
