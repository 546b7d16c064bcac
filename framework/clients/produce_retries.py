"""Produce retries that back off per batch, exponentially, as Java's producer does (KIP-580).

aiokafka's sender meets a produce response with retriable errors (``NOT_LEADER_OR_FOLLOWER``
while a broker is still making new partitions writable, a lost connection) by sleeping
``retry.backoff.ms`` inside the request's task, its connection still counted busy, and then
putting every failed batch back at once. So every failing partition is asked again every
``retry.backoff.ms`` (100) plus a round trip, each time with its whole batch. A mirror that
starts on thousands of remote topics it has just created writes to every one of them before
the target broker has made them writable: at 8,000 partitions on one broker, up to more than
100,000 refused partition writes in 40 s, while that broker made the partitions writable at a
third of the pace it made MM2's (MM2 writes nothing in its first minute); see
docs/performance.md, *The copy is B making partitions writable*.

Here (:func:`install`) a produce request's task ends as soon as its response is handled, so its
connection is free for the next request at once. Each failed batch stays muted (its partition
sends nothing, so order and idempotent sequence numbers hold exactly as before) and goes back to
the accumulator after its own back-off, as in Java's producer since Kafka 3.7:
``retry.backoff.ms`` x 2^(n-1) after its n-th failed attempt, with +-20 % jitter, at most
``retry.backoff.max.ms`` (1,000 ms by default, Java's). The metadata refresh a refusal asks for
comes at most once per ``retry.backoff.ms`` after the last one, as Java's producer spaces them,
not back to back (:class:`SpacedRefresh`).

A batch refused because its broker has not made the partition yet (``NOT_LEADER_OR_FOLLOWER`` or
``UNKNOWN_TOPIC_OR_PARTITION``) is not sent again at all until that broker says the partition is
writable: :mod:`~mirrorline.clients.partition_readiness` holds it and probes, on the same schedule.

(This replaces aiokafka's ``Sender._send_produce_req`` and relies on its accumulator's and
sender's internals, which is why aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import types
from collections.abc import Callable
from typing import Any

from aiokafka.errors import KafkaError
from aiokafka.producer.sender import SendProduceReqHandler
from aiokafka.structs import TopicPartition

from mirrorline.clients.partition_readiness import NOT_WRITABLE_YET, ReadinessProbe

__all__ = ["DEFAULT_RETRY_BACKOFF_MAX_MS", "JITTER", "SpacedRefresh", "install", "retry_backoff_s"]

log = logging.getLogger("aiokafka.producer.sender")  # where aiokafka's own retry warnings go

#: Java's ``retry.backoff.max.ms`` default (KIP-580)
DEFAULT_RETRY_BACKOFF_MAX_MS = 1000
#: Java's jitter on every back-off: the wait is drawn from +-20 % of the exponential term
JITTER = 0.2


def retry_backoff_s(failures: int, base_s: float, max_s: float, draw: Callable[[], float] = random.random) -> float:
    """Seconds to wait after a batch's ``failures``-th failed attempt, as Java's ``ExponentialBackoff``
    (multiplier 2, jitter 0.2): ``base_s`` x 2^(failures-1) times a factor drawn from
    [1-JITTER, 1+JITTER), then at most ``max_s``. When ``max_s`` is not above ``base_s`` every wait
    is the smaller of the two, without jitter, as in Java."""
    base_s = min(base_s, max_s)
    if max_s <= base_s:
        return base_s
    exponent = min(max(failures - 1, 0), math.log2(max_s / base_s) if base_s > 0 else 0)
    term = base_s * 2 ** exponent
    return min(term * (1 - JITTER + 2 * JITTER * draw()), max_s)


class _HandledOnce(SendProduceReqHandler):
    """aiokafka's produce request handler without its sleep: ``send`` returns the batches to retry,
    and ``not_writable`` holds the partitions the broker refused as not made yet."""

    def __init__(self, sender, batches):
        super().__init__(sender, batches)
        self.not_writable: set[TopicPartition] = set()

    async def send(self, node_id) -> list:
        request = self.create_request()
        try:
            response = await self._client.send(node_id, request)
        except KafkaError as err:
            log.warning("Got error produce response: %s", err)
            if getattr(err, "invalid_metadata", False):
                self._client.force_metadata_update()
            for batch in self._batches.values():
                if self._can_retry(err, batch):
                    self._to_reenqueue.append(batch)
                else:
                    batch.failure(exception=err)
        else:
            if request.required_acks == 0:
                for batch in self._batches.values():
                    batch.done_noack()
            else:
                self.handle_response(response)  # fills _to_reenqueue with the retriable failures
        return self._to_reenqueue

    def handle_response(self, response):
        super().handle_response(response)
        if not self._to_reenqueue:
            return  # nothing to retry (the usual answer): no second walk over the response
        for topic, partitions in response.topics:
            for answer in partitions:
                if answer[1] in NOT_WRITABLE_YET:  # (partition, error_code, ...) in every version
                    self.not_writable.add(TopicPartition(topic, answer[0]))


class SpacedRefresh:
    """A producer's metadata refreshes asked for by refused writes: at most one per ``retry.backoff.ms``
    after the last refresh, as Java's producer spaces them. aiokafka starts one at every refusal, so
    a burst of refusals kept the broker answering full metadata requests back to back."""

    def __init__(self, client, interval_s: float, clock: Callable[[], float] = time.time):
        self._client = client
        self._interval_s = interval_s
        self._clock = clock
        self._due: asyncio.TimerHandle | None = None

    def request(self) -> None:
        """Refresh now if the last refresh is ``retry.backoff.ms`` old, else once when it will be."""
        if self._due is not None:
            return  # one is already due: it will carry this refusal's news too
        since_s = self._clock() - self._client.cluster._last_refresh_ms / 1000  # aiokafka stamps wall-clock ms
        if since_s >= self._interval_s:
            self._client.force_metadata_update()
        else:
            self._due = asyncio.get_running_loop().call_later(self._interval_s - since_s, self._refresh)

    def _refresh(self) -> None:
        self._due = None
        self._client.force_metadata_update()

    def cancel(self) -> None:
        """Drop a refresh still due (the sender stops)."""
        if self._due is not None:
            self._due.cancel()
            self._due = None


class _RefusalClient:
    """The client as one produce request's handler sees it: sends go out as given (on a lane or
    not), refresh requests go through the producer's :class:`SpacedRefresh`."""

    def __init__(self, client, refresh: SpacedRefresh):
        self._client = client
        self._refresh = refresh

    async def send(self, node_id, request, **kwargs):
        return await self._client.send(node_id, request, **kwargs)

    def force_metadata_update(self) -> None:
        self._refresh.request()

    def __getattr__(self, name):
        return getattr(self._client, name)


class _Retries:
    """The batches waiting out their back-off, each with the timer that puts it back."""

    def __init__(self, sender, accumulator, max_s: float):
        self._sender = sender
        self._accumulator = accumulator
        self._max_s = max_s
        self._waiting: dict[Any, asyncio.TimerHandle] = {}

    def later(self, batches: list) -> None:
        """Put each of ``batches`` back after its back-off (its partition stays muted meanwhile)."""
        loop = asyncio.get_running_loop()
        for batch in batches:
            self._waiting[batch] = loop.call_later(self.backoff(batch.retry_count), self.put_back, batch)

    def backoff(self, failures: int) -> float:
        """Seconds to wait after a batch's ``failures``-th failed attempt."""
        return retry_backoff_s(failures, self._sender._retry_backoff, self._max_s)

    def put_back(self, batch) -> None:
        """Put ``batch`` back first in its partition's queue, unmute the partition, wake the sender."""
        self._waiting.pop(batch, None)
        if batch.future.done():  # failed meanwhile (a stop gave up on it): nothing to send again
            return
        self._accumulator.reenqueue(batch)
        self._sender._muted_partitions.discard(batch.tp)
        waiter = self._accumulator._waiter_future  # wakes the sender: there is something to drain
        if not waiter.done():
            waiter.set_result(None)

    def put_all_back(self) -> None:
        """Put every waiting batch back now (the sender stops: aiokafka leaves retried batches queued too)."""
        for batch, timer in list(self._waiting.items()):
            timer.cancel()
            self.put_back(batch)


def install(producer, lanes: int, retry_backoff_max_ms: int = DEFAULT_RETRY_BACKOFF_MAX_MS,
            lane_client: Callable[[Any, int], Any] | None = None) -> None:
    """Make an (unstarted) aiokafka producer's failed produce batches back off exponentially (see the
    module docstring). With ``lanes`` > 1 the sender's in-flight keys are ``(node, lane)`` pairs and
    ``lane_client(client, lane)`` gives the client a request on that lane goes out on."""
    if retry_backoff_max_ms < 0:
        raise ValueError(f"retry.backoff.max.ms must be >= 0, not {retry_backoff_max_ms}")
    sender = producer._sender
    max_s = retry_backoff_max_ms / 1000
    retries = _Retries(sender, producer._message_accumulator, max_s)
    refresh = SpacedRefresh(sender.client, sender._retry_backoff)
    probe = ReadinessProbe(sender.client, release=retries.put_back, fallback=lambda batch: retries.later([batch]),
                           refresh=refresh.request, backoff=retries.backoff, base_s=sender._retry_backoff,
                           max_s=max_s, may_expire=sender._txn_manager is None)
    producer.readiness_probe = probe

    async def send_produce_req(self, key, batches):
        node_id, lane = key if lanes > 1 else (key, 0)
        handler = _HandledOnce(self, batches)
        client = lane_client(self.client, lane) if lane and lane_client is not None else self.client
        handler._client = _RefusalClient(client, refresh)
        failed = await handler.send(node_id)
        self._in_flight.remove(key)
        retried = {batch.tp for batch in failed}
        for tp in batches:
            if tp not in retried:
                self._muted_partitions.remove(tp)
        if failed:
            for batch in failed:
                if batch.tp in handler.not_writable:
                    probe.hold(node_id, batch)
            retries.later([batch for batch in failed if batch.tp not in handler.not_writable])

    close = sender.close

    async def close_and_put_back():
        await close()
        refresh.cancel()
        for batch in probe.stop():
            retries.put_back(batch)
        retries.put_all_back()

    sender._send_produce_req = types.MethodType(send_produce_req, sender)
    sender.close = close_and_put_back
