"""Feeds the offset-syncs topic into an OffsetSyncStore: read to the end once, then keep tailing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from mirrorline.api import Consumer, TopicPartition

from mirrorline.connectors.mirror_client.clients import read_to_end
from mirrorline.connectors.mirror_client.formats import OffsetSync, SchemaError
from mirrorline.connectors.mirror_client.offset_sync_runs import chain_of
from mirrorline.connectors.mirror_client.offset_sync_store import OffsetSyncStore

log = logging.getLogger(__name__)

#: How long the tail waits for syncs per getmany (it was 1 s: a wake-up a second when idle).
TAIL_POLL_TIMEOUT_MS = 10_000


class OffsetSyncReader:
    """Owns a consumer on partition 0 of the offset-syncs topic and a tailing coroutine.

    ``run_in_background`` is the task context's: the tail runs as work the runtime owns, so a
    crash fails the task instead of stopping the tail silently.
    """

    def __init__(self, consumer: Consumer, topic: str, store: OffsetSyncStore,
                 run_in_background: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task]):
        self._run_in_background = run_in_background
        self._consumer = consumer
        self._tp = TopicPartition(topic, 0)
        self.store = store
        self._tail: asyncio.Task | None = None

    def _feed(self, record) -> None:
        # The record offset lets the store see gaps (compaction) that no exact run may join across.
        try:
            sync = OffsetSync.decode(record.key, record.value)
        except (SchemaError, TypeError, ValueError):
            log.debug("Skipping an undecodable offset sync at offset %s", record.offset)
            self.store.skip_record(record.offset)
            return
        self.store.update(sync, record.offset, chain_of(record.headers))

    async def start(self) -> None:
        """Read every sync so far (translation is allowed afterwards), then tail in the background."""
        await self._consumer.start()
        await read_to_end(self._consumer, self._tp, self._feed, timeout_s=120)
        self.store.finish_initial_read()
        self._tail = self._run_in_background(self._tail_loop(), f"tail:{self._tp.topic}")

    async def _tail_loop(self) -> None:
        while True:
            # returns as soon as a sync arrives; a long wait only wakes an idle tail less often
            for records in (await self._consumer.getmany(self._tp, timeout_ms=TAIL_POLL_TIMEOUT_MS)).values():
                for record in records:
                    self._feed(record)

    async def stop(self) -> None:
        """Stop tailing and close the consumer."""
        if self._tail is not None:
            self._tail.cancel()
            await asyncio.gather(self._tail, return_exceptions=True)
        await self._consumer.stop()
