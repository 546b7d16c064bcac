"""OffsetSyncWriter: decides when to record "upstream offset u is downstream offset d" (MM2 §3.8).

Per upstream partition it remembers the previous (u, d) and the downstream offset of the
last sync. A sync is due now (``pending``) on the first record of this task's lifetime, when
the downstream offset ran ``offset.lag.max`` past the last sync, when upstream offsets skip
(compaction, transaction markers, restart), or when the downstream offset went backwards.
Otherwise the latest position is kept as ``delayed`` and promoted on the next task commit,
so quiet partitions are synced once per offset flush. At most 10 sends are in flight.

Beyond MM2: MM2 coalesces pending syncs per partition as soon as 10 sends are in flight, so a
burst (a backlog replicated in seconds) keeps only the newest sync of most partitions, and
consumers lagging behind it get no translation. Here due syncs queue in order and are only
coalesced past MAX_QUEUED, so bursts keep their translation points.

Beyond MM2 too: a downstream gap (the commit marker an exactly-once task's transaction leaves
after its records) makes both the record before it and the one after it due, so exact-translation
runs end and start at transaction boundaries instead of breaking across them.

Beyond MM2 too: each sync record carries two headers, this writer's random id and the sync's
number among those queued for its partition (:func:`~mirrorline.connectors.mirror_client.offset_sync_runs.
chain_headers`). MM2's readers ignore them; mirrorline's checkpoint task joins two syncs into an
exact-translation run only when their numbers follow each other, so a sync lost to a crash, a
failed send or coalescing can never make a run claim records it does not cover.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_runs import chain_headers

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 10
MAX_QUEUED = 10_000


@dataclass
class _PartitionState:
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1


class OffsetSyncWriter:
    """Emits offset syncs for one task to the offset-syncs topic (partition 0)."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, max_lag: int):
        self._producer = producer
        self._topic = topic
        self._max_lag = max_lag
        self._state: dict[tuple[str, int], _PartitionState] = {}
        # (sync, its number among the syncs queued for its partition): the chain headers
        self._pending: deque[tuple[OffsetSync, int]] = deque()
        self._writer_id = uuid.uuid4().bytes
        self._queued: dict[tuple[str, int], int] = {}
        self._delayed: dict[tuple[str, int], OffsetSync] = {}
        self._outstanding = 0
        # commit_record (acks) and commit (flushes) run on different coroutines; without this lock a
        # newer sync could be handed to the producer before an older one, and readers would take the
        # older one for an upstream rewind and drop their history.
        self._send_lock = asyncio.Lock()

    def record(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        """Note an acknowledged record; queue a sync if MM2's rules say one is due."""
        key = (topic, partition)
        state = self._state.setdefault(key, _PartitionState())
        sync = OffsetSync(topic, partition, upstream, downstream)
        # beyond MM2: a gap downstream (the commit marker of an exactly-once task's transaction) ends an
        # exact run: the record before it and the one after it are both synced, so runs end and start there
        gap = state.previous_downstream >= 0 and downstream > state.previous_downstream + 1
        if gap and key in self._delayed:
            before = self._delayed.pop(key)
            state.last_sync_downstream = before.downstream_offset
            self._queue(before)
        due = (state.last_sync_downstream == -1
               or downstream - (state.last_sync_downstream + 1) >= self._max_lag
               or upstream - state.previous_upstream != 1
               or downstream < state.previous_downstream
               or gap)
        if due:
            state.last_sync_downstream = downstream
            self._queue(sync)
            self._delayed.pop(key, None)
        else:
            self._delayed[key] = sync
        state.previous_upstream, state.previous_downstream = upstream, downstream

    def record_batch(self, topic: str, partition: int, upstream_offsets, downstream_first: int) -> None:
        """Note an acknowledged batch: record ``i`` went from ``upstream_offsets[i]`` to ``downstream_first + i``.

        Gives exactly the syncs that calling :meth:`record` for every record would give. For a
        batch of consecutive upstream offsets (a ``range``, the common case) that is computed
        without a loop: only the first record can be due for a skip, a rewind or a first sync;
        the others are due only when the downstream offset reaches ``offset.lag.max`` past the
        last sync.
        """
        if not isinstance(upstream_offsets, range) or upstream_offsets.step != 1 or len(upstream_offsets) < 3:
            for i, upstream in enumerate(upstream_offsets):
                self.record(topic, partition, upstream, downstream_first + i)
            return
        self.record(topic, partition, upstream_offsets[0], downstream_first)
        state = self._state[(topic, partition)]
        count = len(upstream_offsets)
        last_index = count - 1
        delta = upstream_offsets[0] - downstream_first  # upstream = downstream + delta within the batch
        # due at downstream d when d - (last_sync + 1) >= max_lag, i.e. from d = last_sync + 1 + max_lag on
        due_at = state.last_sync_downstream + 1 + self._max_lag
        first_due = max(due_at, downstream_first + 1)
        last_downstream = downstream_first + last_index
        while first_due <= last_downstream:
            sync = OffsetSync(topic, partition, first_due + delta, first_due)
            state.last_sync_downstream = first_due
            self._queue(sync)
            self._delayed.pop((topic, partition), None)
            first_due += 1 + self._max_lag
        if state.last_sync_downstream != last_downstream:
            self._delayed[(topic, partition)] = OffsetSync(topic, partition, upstream_offsets[-1], last_downstream)
        state.previous_upstream, state.previous_downstream = upstream_offsets[-1], last_downstream

    def _queue(self, sync: OffsetSync) -> None:
        # numbered when queued, so a sync dropped below leaves a hole readers see (offset_sync_runs)
        key = (sync.topic, sync.partition)
        number = self._queued.get(key, -1) + 1
        self._queued[key] = number
        self._pending.append((sync, number))
        if len(self._pending) > MAX_QUEUED:  # keep only the newest pending sync of each partition
            newest = {(s.topic, s.partition): s for s, _ in self._pending}
            self._pending = deque(e for e in self._pending if newest[(e[0].topic, e[0].partition)] is e[0])

    async def fire_pending(self) -> None:
        """Send pending syncs while fewer than MAX_OUTSTANDING are in flight, in the order they were queued."""
        async with self._send_lock:
            await self._fire_pending_locked()

    async def _fire_pending_locked(self) -> None:
        while self._pending and self._outstanding < MAX_OUTSTANDING:
            sync, number = self._pending.popleft()
            self._outstanding += 1
            try:
                future = await self._producer.send(self._topic, key=sync.encode_key(), value=sync.encode_value(),
                                                   partition=0, headers=chain_headers(self._writer_id, number))
            except Exception as exc:
                self._outstanding -= 1
                log.warning("Could not send offset sync for %s-%s: %s", sync.topic, sync.partition, exc)
                continue
            log.debug("Offset sync %s-%s: upstream %s -> downstream %s", sync.topic, sync.partition,
                      sync.upstream_offset, sync.downstream_offset)
            future.add_done_callback(self._sent)

    def _sent(self, future: asyncio.Future) -> None:
        self._outstanding -= 1
        if not future.cancelled() and future.exception() is not None:
            log.warning("Offset sync was not written: %s; the next one will cover it", future.exception())

    async def promote_delayed(self) -> None:
        """On task commit: make every delayed sync pending, then send."""
        for key, sync in self._delayed.items():
            self._queue(sync)
            self._state[key].last_sync_downstream = sync.downstream_offset
        self._delayed.clear()
        await self.fire_pending()
