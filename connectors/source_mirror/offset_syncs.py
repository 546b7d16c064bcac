"""OffsetSyncWriter: decides when to record "upstream offset u is downstream offset d" (MM2 §3.8).

Per upstream partition it remembers the previous (u, d) and the downstream offset of the
last sync. A sync is due on the first record of this task's lifetime, when the downstream offset
ran ``offset.lag.max`` past the last sync, when upstream offsets skip (compaction, transaction
markers, filtered records), or when the downstream offset went backwards. Otherwise the latest
position is kept as *delayed* and made due at the next task commit (``promote_delayed``), so a
quiet partition's last position is synced once per offset flush. These are MM2's rules; beyond
them, the record before a forward skip is synced too (when it was not), so the exact run ends
there and a group positioned inside the skip translates exactly to the copy of the next record.
A downstream gap (the commit marker an exactly-once task's transaction leaves after its records on
the target) is treated the same way: the records on both sides of it are synced and kept, so exact
runs end and start at transaction boundaries instead of breaking across them.

Sending: due syncs wait in a per-partition queue and :meth:`run` (the task's background sender)
sends them, at most ``MAX_OUTSTANDING`` in flight, partitions taking turns, and a finished send
sends the next. MM2 allows 10: the producer then carries at most 10 syncs per request, and the
first commit after copying thousands of partitions (every partition's last position is due
then) took hundreds of produce requests, and as many fetches by each checkpoint task reading
them. Beyond MM2, 1,000 go out together. While a sync waits, a newer one of its partition
replaces it, as MM2 coalesces, but only if the waiting one is due to ``offset.lag.max`` or a commit alone: a sync
due to a skip, a rewind or a first record is one the exact-translation chain needs (see
:mod:`~mirrorline.connectors.mirror_client.offset_sync_runs`) and stays queued. So the newest sync
of every partition goes out as soon as a slot frees, whatever the burst, and with
``offset.lag.max = 0`` every acknowledged position is translatable exactly.

Stopping (:meth:`close`): the delayed positions are promoted and every queued sync is sent and
acknowledged before the task is gone, as MM2's final commit flushes them; so a partition the task
copied always has a sync at the source offset the task stored.

Chain headers (beyond MM2): each sync record carries the writer's random id and the sync's number
among those sent for its partition; a restarted task's first sync of a partition also says which
stored source offset it resumed after (:func:`~mirrorline.connectors.mirror_client.offset_sync_runs.
chain_headers`). MM2's readers ignore them; mirrorline's checkpoint task joins two syncs into an
exact-translation run only when the headers prove nothing it needs is missing in between. A sync
the chain needs that is dropped anyway (a failed send; more than ``MAX_QUEUED`` waiting) skips a
number, so readers see the hole.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from mirrorline.api import Producer

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_runs import chain_headers

log = logging.getLogger(__name__)

#: Syncs handed to the producer and not acknowledged yet, at most (MM2: 10; see the module docstring).
MAX_OUTSTANDING = 1000
#: Syncs waiting over all partitions before each partition keeps only its newest (the chain breaks there).
MAX_QUEUED = 10_000

PartitionKey = tuple[str, int]


@dataclass
class _PartitionState:
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1


@dataclass
class _Queued:
    sync: OffsetSync
    #: the exact chain needs it (first record, upstream skip, downstream rewind): never replaced by a newer one
    needed: bool


class OffsetSyncWriter:
    """Emits offset syncs for one task to the offset-syncs topic (partition 0).

    ``resume_after`` maps each (topic, partition) the task resumed from a stored source offset to
    that offset; the first sync of the partition then says so (see :meth:`forget_resume`).
    """

    def __init__(self, producer: Producer, topic: str, max_lag: int,
                 resume_after: Mapping[PartitionKey, int] | None = None):
        self._producer = producer
        self._topic = topic
        self._max_lag = max_lag
        self._state: dict[PartitionKey, _PartitionState] = {}
        # partitions with syncs waiting, in turn order (a partition goes to the back after each send)
        self._pending: dict[PartitionKey, deque[_Queued]] = {}
        self._queued_count = 0
        self._delayed: dict[PartitionKey, OffsetSync] = {}
        self._writer_id = uuid.uuid4().bytes
        self._next_number: dict[PartitionKey, int] = {}
        self._resume_after = dict(resume_after or {})
        self._in_flight: set[asyncio.Future] = set()
        self._wake = asyncio.Event()
        self._closing = False
        #: sends the producer refused or failed (each leaves a hole in its partition's numbers)
        self.failed_sends = 0
        # run() and close() both send; one at a time, so a partition's syncs reach the producer in order
        # (a reader takes an older sync arriving after a newer one for an upstream rewind)
        self._send_lock = asyncio.Lock()

    # -- what is due ------------------------------------------------------------------------
    def record(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        """Note an acknowledged record; queue a sync if MM2's rules say one is due."""
        key = (topic, partition)
        state = self._state.setdefault(key, _PartitionState())
        sync = OffsetSync(topic, partition, upstream, downstream)
        # beyond MM2 too: a downstream gap after a step of 1 upstream (the commit marker an exactly-once
        # task's transaction leaves after its records) ends the exact run as a skip does, and the record
        # after it starts the next one
        gap = upstream == state.previous_upstream + 1 and downstream > state.previous_downstream + 1
        if (state.last_sync_downstream != -1 and downstream > state.previous_downstream
                and (upstream > state.previous_upstream + 1 or gap)):
            self._keep_sync_before_skip(key, state)
        needed = (state.last_sync_downstream == -1
                  or upstream - state.previous_upstream != 1
                  or downstream < state.previous_downstream
                  or (gap and state.previous_downstream >= 0))
        if needed or downstream - (state.last_sync_downstream + 1) >= self._max_lag:
            state.last_sync_downstream = downstream
            self._queue(key, sync, needed)
            self._delayed.pop(key, None)
        else:
            self._delayed[key] = sync
        state.previous_upstream, state.previous_downstream = upstream, downstream

    def _keep_sync_before_skip(self, key: PartitionKey, state: _PartitionState) -> None:
        """Beyond MM2: the record before a forward skip gets a sync that stays (queued as needed).

        It ends the exact run there, and a group positioned inside the skip translates to the copy
        of the record after it (MM2's +1), exactly. Without it the positions between the last sync
        and the skip would get MM2's +1 from an older sync.
        """
        if state.last_sync_downstream != state.previous_downstream:
            self._delayed.pop(key, None)
            sync = OffsetSync(key[0], key[1], state.previous_upstream, state.previous_downstream)
            self._queue(key, sync, needed=True)
            state.last_sync_downstream = state.previous_downstream
            return
        queue = self._pending.get(key)
        if queue and queue[-1].sync.downstream_offset == state.previous_downstream:
            queue[-1].needed = True  # due already (offset.lag.max) and still waiting: not to be replaced

    def record_batch(self, topic: str, partition: int, upstream_offsets, downstream_first: int) -> None:
        """Note an acknowledged batch: record ``i`` went from ``upstream_offsets[i]`` to ``downstream_first + i``.

        Gives exactly the syncs that calling :meth:`record` for every record would give. For a
        batch of consecutive upstream offsets (a ``range``, the common case) that is computed
        without a loop over its records: only the first record can be due for a skip, a rewind or
        a first sync; the others are due only when the downstream offset reaches
        ``offset.lag.max`` past the last sync, and of those only the last can still be waiting
        when the batch is done (each replaces the one before), so only it is queued.
        """
        if not isinstance(upstream_offsets, range) or upstream_offsets.step != 1 or len(upstream_offsets) < 3:
            for i, upstream in enumerate(upstream_offsets):
                self.record(topic, partition, upstream, downstream_first + i)
            return
        self.record(topic, partition, upstream_offsets[0], downstream_first)
        key = (topic, partition)
        state = self._state[key]
        last_downstream = downstream_first + len(upstream_offsets) - 1
        delta = upstream_offsets[0] - downstream_first  # upstream = downstream + delta within the batch
        # due at downstream d when d - (last_sync + 1) >= max_lag, i.e. at last_sync + 1 + max_lag, then every
        # 1 + max_lag records: the last of those within the batch is the one that survives coalescing
        first_due = max(state.last_sync_downstream + 1 + self._max_lag, downstream_first + 1)
        if first_due <= last_downstream:
            last_due = first_due + (last_downstream - first_due) // (1 + self._max_lag) * (1 + self._max_lag)
            state.last_sync_downstream = last_due
            self._queue(key, OffsetSync(topic, partition, last_due + delta, last_due), needed=False)
            self._delayed.pop(key, None)
        if state.last_sync_downstream != last_downstream:
            self._delayed[key] = OffsetSync(topic, partition, upstream_offsets[-1], last_downstream)
        state.previous_upstream, state.previous_downstream = upstream_offsets[-1], last_downstream

    def promote_delayed(self) -> None:
        """On task commit: queue the latest position of every partition not synced at it yet."""
        for key, sync in self._delayed.items():
            self._queue(key, sync, needed=False)
            self._state[key].last_sync_downstream = sync.downstream_offset
        self._delayed.clear()

    def forget_resume(self, topic: str, partition: int) -> None:
        """The task moved the partition off its stored offset + 1: its first sync must not claim to resume."""
        self._resume_after.pop((topic, partition), None)

    def _queue(self, key: PartitionKey, sync: OffsetSync, needed: bool) -> None:
        queue = self._pending.get(key)
        if queue is None:
            queue = self._pending[key] = deque()
        if queue and not queue[-1].needed:
            queue[-1] = _Queued(sync, needed)  # coalesced: the replaced one's upstream step was 1
        else:
            queue.append(_Queued(sync, needed))
            self._queued_count += 1
            if self._queued_count > MAX_QUEUED:
                self._keep_newest_only()
        self._wake.set()

    def _keep_newest_only(self) -> None:
        """Past MAX_QUEUED: each partition keeps its newest waiting sync; a dropped needed one skips a number."""
        broken = 0
        for key, queue in self._pending.items():
            if any(entry.needed for entry in list(queue)[:-1]):
                self._next_number[key] = self._next_number.get(key, 0) + 1
                broken += 1
            self._pending[key] = deque([queue[-1]])
        self._queued_count = len(self._pending)
        log.warning("More than %d offset syncs waited to be written: kept only the newest of each partition; exact "
                    "translation breaks there on %d partition(s) (MM2's rule applies across the gap)",
                    MAX_QUEUED, broken)

    # -- sending -------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Syncs waiting to be handed to the producer."""
        return self._queued_count

    @property
    def in_flight(self) -> int:
        """Syncs handed to the producer and not acknowledged yet."""
        return len(self._in_flight)

    async def run(self) -> None:
        """The sender: whenever a sync is queued or a send finishes, send what may be sent. Runs until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.fire_pending()

    async def fire_pending(self) -> None:
        """Send waiting syncs while fewer than MAX_OUTSTANDING are in flight (all of them when closing)."""
        failed: list[str] = []
        first_error: BaseException | None = None
        async with self._send_lock:
            while self._pending and (self._closing or len(self._in_flight) < MAX_OUTSTANDING):
                error, where = await self._send_next()
                if error is not None:
                    failed.append(where)
                    first_error = first_error or error
        if failed:  # one line per round: a producer closed under thousands of syncs is one event
            log.warning("Could not send %d offset sync(s) (%s%s): %s; later syncs of those partitions cover them",
                        len(failed), ", ".join(failed[:5]), ", ..." if len(failed) > 5 else "", first_error)

    async def _send_next(self) -> tuple[BaseException | None, str]:
        """Send the next waiting sync; returns the error that stopped it (or None) and its partition."""
        key = next(iter(self._pending))
        queue = self._pending.pop(key)
        entry = queue.popleft()
        self._queued_count -= 1
        if queue:
            self._pending[key] = queue  # to the back: every partition gets its turn
        number = self._next_number.get(key, 0)
        self._next_number[key] = number + 1
        resumes_after = self._resume_after.pop(key, None)
        sync = entry.sync
        try:
            future = await self._producer.send(self._topic, key=sync.encode_key(), value=sync.encode_value(),
                                               partition=0,
                                               headers=chain_headers(self._writer_id, number, resumes_after))
        except Exception as exc:
            self.failed_sends += 1
            return exc, f"{sync.topic}-{sync.partition}"
        log.debug("Offset sync %s-%s: upstream %s -> downstream %s (#%d)", sync.topic, sync.partition,
                  sync.upstream_offset, sync.downstream_offset, number)
        self._in_flight.add(future)
        future.add_done_callback(self._sent)
        return None, ""

    def _sent(self, future: asyncio.Future) -> None:
        self._in_flight.discard(future)
        if not future.cancelled() and future.exception() is not None:
            self.failed_sends += 1
            log.warning("Offset sync was not written: %s; the next one will cover it", future.exception())
        self._wake.set()  # a slot is free: the sender sends the next

    async def close(self) -> None:
        """Promote the delayed positions, send every waiting sync and wait until all are acknowledged.

        Called when the task stops, after its last records were acknowledged; bound it with a timeout.
        """
        self.promote_delayed()
        self._closing = True
        await self.fire_pending()
        if self._in_flight:
            await asyncio.wait(set(self._in_flight))
