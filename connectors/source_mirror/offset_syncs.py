"""OffsetSyncWriter: decides when to record "upstream offset u is downstream offset d" (MM2 §3.8).

Per upstream partition it remembers the previous (u, d) and the downstream offset of the
last sync. A sync is due now (``pending``) on the first record of this task's lifetime, when
the downstream offset ran ``offset.lag.max`` past the last sync, when upstream offsets skip
(compaction, transaction markers, restart), or when the downstream offset went backwards.
Otherwise the latest position is kept as ``delayed`` and promoted on the next task commit,
so quiet partitions are synced once per offset flush. At most 10 sends are in flight.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from connectors.mirror_client.formats import OffsetSync

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 10


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
        self._pending: dict[tuple[str, int], OffsetSync] = {}
        self._delayed: dict[tuple[str, int], OffsetSync] = {}
        self._outstanding = 0

    def record(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        """Note an acknowledged record; queue a sync if MM2's rules say one is due."""
        key = (topic, partition)
        state = self._state.setdefault(key, _PartitionState())
        sync = OffsetSync(topic, partition, upstream, downstream)
        due = (state.last_sync_downstream == -1
               or downstream - (state.last_sync_downstream + 1) >= self._max_lag
               or upstream - state.previous_upstream != 1
               or downstream < state.previous_downstream)
        if due:
            state.last_sync_downstream = downstream
            self._pending[key] = sync
            self._delayed.pop(key, None)
        else:
            self._delayed[key] = sync
        state.previous_upstream, state.previous_downstream = upstream, downstream

    async def fire_pending(self) -> None:
        """Send pending syncs while fewer than MAX_OUTSTANDING are in flight."""
        while self._pending and self._outstanding < MAX_OUTSTANDING:
            key, sync = next(iter(self._pending.items()))
            del self._pending[key]
            self._outstanding += 1
            try:
                future = await self._producer.send(self._topic, key=sync.encode_key(), value=sync.encode_value(),
                                                   partition=0)
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
            self._pending[key] = sync
            self._state[key].last_sync_downstream = sync.downstream_offset
        self._delayed.clear()
        await self.fire_pending()
