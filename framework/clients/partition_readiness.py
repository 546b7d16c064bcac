"""Refused batches wait for their partition to become writable, asked with a ListOffsets of a few bytes.

A broker that has just been told to lead a new partition refuses writes to it
(``NOT_LEADER_OR_FOLLOWER``, or ``UNKNOWN_TOPIC_OR_PARTITION`` before its metadata has the topic)
until it has made the partition's log. A mirror starting on thousands of remote topics it has just
created meets that for every one of them, for as long as the target takes to make them all: 45-100 s
for 8,000 partitions on one broker of this project's 2-core machine. Java's producer, and
:mod:`~mirrorline.clients.produce_retries` before this module, sent each refused batch again at
every back-off, whole: at the 1-s cap one 8,000-partition copy sent 10,000+ refused partition
writes in 5 s, each with its ~30 KB of records, which the target had to read before refusing.

:class:`ReadinessProbe` holds such a batch instead (its partition stays muted, so order and the
idempotent sequence numbers hold as before) and asks the broker it was sent to for the partition's
latest offset (ListOffsets, about 20 bytes a partition, every held partition of a broker in one
request) on the batch's own back-off schedule: ``retry.backoff.ms`` x 2^(n-1), +-20 %, at most
``retry.backoff.max.ms``. The broker answers ListOffsets from the same leader state as Produce, so:

- a partition answered without error goes back to the accumulator at once and is written;
- one still answered ``NOT_LEADER_OR_FOLLOWER`` or ``UNKNOWN_TOPIC_OR_PARTITION`` stays held, and
  a (spaced) metadata refresh is asked for at most once per ``retry.backoff.max.ms``;
- any other answer (an authorization the probe lacks, say) puts the batch back too: the broker's
  answer to the write decides;
- a partition whose leader in the producer's metadata is no longer that broker, a probe that fails
  (a lost connection), and a batch past its delivery timeout (a producer without idempotence) go
  the ordinary retry path of :mod:`~mirrorline.clients.produce_retries`;
- an exception escaping a round is logged with its trace, and every held batch goes the ordinary
  retry path: nothing waits on a probe that stopped.

This goes beyond Java's producer and MM2, which resend the batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import KafkaError
from aiokafka.protocol.offset import OffsetRequest

__all__ = ["NOT_WRITABLE_YET", "ReadinessProbe"]

log = logging.getLogger(__name__)

#: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER: what a broker answers for a partition it has not made yet
NOT_WRITABLE_YET = frozenset({3, 6})
_LATEST = -1
_READ_UNCOMMITTED = 0


@dataclass
class _Held:
    """One refused batch, the broker it was refused by, how often it was probed and when next."""

    batch: Any
    node_id: int
    probes: int
    due: float


class ReadinessProbe:
    """Holds refused batches of one producer until their broker answers that the partition is writable.

    ``client`` is the producer's aiokafka client; ``release(batch)`` puts a batch back to be written
    now, ``fallback(batch)`` hands it to the ordinary retry path; ``refresh()`` asks for a (spaced)
    metadata refresh; ``backoff(n)`` is the wait in seconds after a batch's n-th refusal or refused
    probe; ``base_s`` and ``max_s`` are ``retry.backoff.ms`` and ``retry.backoff.max.ms`` in seconds;
    ``may_expire`` is true for a producer without idempotence, whose batches expire. The task that
    probes runs only while batches are held; :meth:`stop` ends it.
    """

    def __init__(self, client, release: Callable[[Any], None], fallback: Callable[[Any], None],
                 refresh: Callable[[], None], backoff: Callable[[int], float], base_s: float, max_s: float,
                 may_expire: bool = False, clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._release = release
        self._fallback = fallback
        self._refresh = refresh
        self._backoff = backoff
        self._base_s = base_s
        self._max_s = max_s
        self._may_expire = may_expire
        self._clock = clock
        self._held: dict[Any, _Held] = {}
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._refreshed_at = float("-inf")
        self._burst_started: float | None = None
        self._burst: Counter[str] = Counter()
        #: held, probes (requests), answered_writable, still_refused, fell_back, since the producer started
        self.counters: Counter[str] = Counter()

    @property
    def held(self) -> int:
        """How many batches are held now."""
        return len(self._held)

    def hold(self, node_id: int, batch) -> None:
        """Hold ``batch``, refused by ``node_id`` as not writable yet, until a probe says it is."""
        now = self._clock()
        probes = max(batch.retry_count, 1)
        self._held[batch.tp] = _Held(batch, node_id, probes, now + self._backoff(probes))
        self._count("held")
        if self._burst_started is None:
            self._burst_started = now
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="produce-readiness-probe")
        else:
            self._wake.set()

    def stop(self) -> list:
        """End the probing task; return the batches still held (the caller puts them back)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        batches = [held.batch for held in self._held.values()]
        self._held.clear()
        return batches

    async def _run(self) -> None:
        while self._held:
            try:
                await self._sleep_until_due()
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Probing %d refused partitions for writability failed; their batches are "
                              "retried the ordinary way (sent again at each back-off)", len(self._held))
                self._hand_all_back()
        self._end_burst()

    async def _sleep_until_due(self) -> None:
        while self._held:
            wait_s = min(held.due for held in self._held.values()) - self._clock()
            if wait_s <= 0:
                return
            self._wake.clear()
            try:
                async with asyncio.timeout(wait_s):
                    await self._wake.wait()
            except TimeoutError:
                return

    async def _round(self) -> None:
        """Probe every held partition that is due (and those due within half a base back-off, to
        share the request), per broker."""
        horizon = self._clock() + self._base_s / 2
        by_node: dict[int, list[_Held]] = defaultdict(list)
        for held in list(self._held.values()):
            if held.due > horizon:
                continue
            leader = self._client.cluster.leader_for_partition(held.batch.tp)
            if leader != held.node_id or (self._may_expire and held.batch.expired()):
                self._hand_back(held)  # moved (or unknown), or about to expire: the ordinary retry decides
            else:
                by_node[held.node_id].append(held)
        if by_node:
            await asyncio.gather(*(self._probe(node_id, held) for node_id, held in by_node.items()))

    async def _probe(self, node_id: int, held: list[_Held]) -> None:
        topics: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for entry in held:
            topics[entry.batch.tp.topic].append((entry.batch.tp.partition, _LATEST))
        self._count("probes")
        try:
            response = await self._client.send(node_id, OffsetRequest(-1, _READ_UNCOMMITTED, list(topics.items())))
        except KafkaError as err:
            log.debug("Probing %d partitions on broker %s failed (%s); retrying their batches", len(held), node_id, err)
            for entry in held:
                if self._held.get(entry.batch.tp) is entry:
                    self._hand_back(entry)
            return
        refused = {(topic, answer[0]) for topic, answers in response.topics for answer in answers
                   if answer[1] in NOT_WRITABLE_YET}
        now = self._clock()
        for entry in held:
            tp = entry.batch.tp
            if self._held.get(tp) is not entry:
                continue  # put back meanwhile (the producer stopped)
            if (tp.topic, tp.partition) in refused:
                entry.probes += 1
                entry.due = now + self._backoff(entry.probes)
                self._count("still_refused")
            else:
                del self._held[tp]
                self._count("answered_writable")
                self._release(entry.batch)
        if refused and now - self._refreshed_at >= self._max_s:
            self._refreshed_at = now
            self._refresh()  # in case leadership moved rather than the log not being made yet

    def _count(self, what: str) -> None:
        self.counters[what] += 1
        self._burst[what] += 1

    def _hand_back(self, held: _Held) -> None:
        del self._held[held.batch.tp]
        self._count("fell_back")
        self._fallback(held.batch)

    def _hand_all_back(self) -> None:
        for held in list(self._held.values()):
            self._hand_back(held)

    def _end_burst(self) -> None:
        if self._burst_started is None:
            return
        log.info("Held %d refused batches until their partitions were writable (%.1f s; %d probe requests, "
                 "%d went the ordinary retry path)", self._burst["held"], self._clock() - self._burst_started,
                 self._burst["probes"], self._burst["fell_back"])
        self._burst_started = None
        self._burst.clear()
