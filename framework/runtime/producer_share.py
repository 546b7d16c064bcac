"""One producer for the source tasks of one connector in one worker (``tasks.share.clients``).

Kafka Connect gives every source task a producer of its own. Two tasks of one connector that
read a shared consumer (:mod:`mirrorline.clients.consumer_share`) get the records of both from
one fetch; with a producer each, they would still write them in two produce requests to the
same broker. Sharing one idempotent producer lets one request carry both, and halves the
connections to the target. Each partition is written by one task, so idempotence (sequence
numbers per partition) and per-partition order are as with a producer per task.

What a task does with the producer stays its own: it tracks its own writes by their futures,
bounds its own unacknowledged bytes, and on stop flushes the producer (which waits for the
other tasks' writes too, bounded by the same timeout) before storing its offsets. The last task
to stop stops the producer. Exactly-once tasks are never shared: their transactions are theirs.
The shared producer keeps the ``client.id`` of the task that made it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

from mirrorline.clients.producer import KafkaProducer

log = logging.getLogger(__name__)

__all__ = ["PRODUCER_SHARES", "ProducerShares", "SharedProducer"]


class _Share:
    """One started producer and how many tasks hold it."""

    def __init__(self, make: Callable[[], KafkaProducer]):
        self.make = make
        self.producer = make()
        self.holders = 0
        self.started = False
        #: stopped by its last holder: a task that joins later gets a new share
        self.closed = False
        self.lock = asyncio.Lock()


class SharedProducer:
    """A task's hold on a shared producer: the producer's methods, with ``start`` joining the share and
    ``stop`` leaving it (the last holder stops the producer)."""

    def __init__(self, shares: ProducerShares, key: Hashable, share: _Share):
        self._shares = shares
        self._key = key
        self._share = share
        self._held = False

    @property
    def holders(self) -> int:
        """How many tasks hold the producer now."""
        return self._share.holders

    async def start(self) -> None:
        if self._share.closed:  # its last holder stopped it after this hold was handed out
            self._share = self._shares._share_for(self._key, self._share.make)
        share = self._share
        async with share.lock:
            if not share.started:
                try:
                    await share.producer.start()
                except BaseException:
                    if share.holders == 0:
                        share.closed = True
                        self._shares._forget(self._key, share)
                    raise
                share.started = True
            share.holders += 1
            self._held = True
            if share.holders > 1:
                log.info("Producer %s is shared: %d tasks in this process write through it",
                         self._key[1], share.holders)

    async def stop(self) -> None:
        await self._leave(lambda producer: producer.stop())

    async def stop_within(self, timeout: float) -> int:
        """Leave the share; the last holder stops the producer as :meth:`KafkaProducer.stop_within`
        does. Returns how many batches were given up on (0 when another task still holds it)."""
        return await self._leave(lambda producer: producer.stop_within(timeout)) or 0

    async def _leave(self, stop: Callable[[KafkaProducer], Awaitable[Any]]) -> Any:
        if not self._held:
            return None
        self._held = False
        share = self._share
        async with share.lock:
            share.holders -= 1
            if share.holders > 0:
                return None
            share.closed = True
            self._shares._forget(self._key, share)
            if share.started:
                share.started = False
                return await stop(share.producer)
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._share.producer, name)


class ProducerShares:
    """The shared producers of one process, by event loop, share name and settings."""

    def __init__(self) -> None:
        self._shares: dict[Hashable, _Share] = {}

    def producer(self, share: str, kwargs: Mapping[str, Any], make: Callable[[], KafkaProducer]) -> SharedProducer:
        """A hold (unstarted) on the producer shared under ``share`` by tasks with the same ``kwargs``
        (their ``client_id`` aside) on the running event loop; ``make`` builds it for the first."""
        settings = tuple(sorted((str(k), repr(v)) for k, v in kwargs.items() if k != "client_id"))
        key = (id(asyncio.get_running_loop()), share, settings)
        return SharedProducer(self, key, self._share_for(key, make))

    def _share_for(self, key: Hashable, make: Callable[[], KafkaProducer]) -> _Share:
        found = self._shares.get(key)
        if found is None or found.closed:
            found = self._shares[key] = _Share(make)
        return found

    def _forget(self, key: Hashable, share: _Share) -> None:
        if self._shares.get(key) is share:
            del self._shares[key]

    def __len__(self) -> int:
        return len(self._shares)


#: The process's shared producers.
PRODUCER_SHARES = ProducerShares()
