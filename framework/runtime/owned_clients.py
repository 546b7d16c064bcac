"""The clients a task opens through its context, owned by the runtime so that none outlives the task.

A task opens its clients with ``context.clients`` and closes them in its own ``stop()``. When that
stop hangs (its cluster unreachable: a producer's stop waits for acknowledgements up to
``delivery.timeout.ms``), the worker gives up on it after ``task.shutdown.graceful.timeout.ms``,
and the clients would go on retrying against the unreachable cluster until the process ends.
:class:`OwnedClients` hands out the runtime's clients and remembers each; :meth:`OwnedClients.close_all`
stops them all (stopping a stopped client does nothing), a producer giving up at once on what it
has not had acknowledged.

After a stop that ended in time, :meth:`OwnedClients.close_left_open` closes what the task forgot to
close (a client that started and was not stopped), naming each in a warning: such a client would
otherwise keep its connections, and a consumer its background fetches, until the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Mapping
from typing import Any, TypeVar

from mirrorline.api.clients import Admin, BatchFetch, Consumer, KafkaClients, Producer

log = logging.getLogger(__name__)

_Client = TypeVar("_Client")


class OwnedClients(KafkaClients):
    """``clients``, remembering every client handed out so :meth:`close_all` can stop them."""

    def __init__(self, clients: KafkaClients, owner: str):
        self._clients = clients
        self._owner = owner
        #: weakly held: a task that makes a client per use and drops it stopped keeps no list growing
        self._handed_out: weakref.WeakSet = weakref.WeakSet()

    def _own(self, client: _Client) -> _Client:
        self._handed_out.add(client)
        return client

    def admin(self, props: Mapping[str, Any]) -> Admin:
        return self._own(self._clients.admin(props))

    def consumer(self, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                 fetch_sessions: bool = False, gather_max_wait_ms: int | None = None,
                 gather_trickle_wait_ms: int | None = None, share: str | None = None) -> Consumer:
        return self._own(self._clients.consumer(props, fetch_batches=fetch_batches, fetch_sessions=fetch_sessions,
                                                gather_max_wait_ms=gather_max_wait_ms,
                                                gather_trickle_wait_ms=gather_trickle_wait_ms, share=share))

    def producer(self, props: Mapping[str, Any]) -> Producer:
        return self._own(self._clients.producer(props))

    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        return await self._clients.security_problem(props, timeout_s)

    def quiet_logs(self) -> contextlib.AbstractContextManager:
        return self._clients.quiet_logs()

    def __getattr__(self, name: str) -> Any:  # what the runtime's clients offer beyond the contract
        return getattr(self._clients, name)

    async def close_all(self, timeout_s: float) -> None:
        """Stop every client handed out, side by side, each within ``timeout_s``; a producer gives up
        at once on its unacknowledged writes. A client that will not stop is logged."""
        clients, self._handed_out = list(self._handed_out), weakref.WeakSet()
        await self._stop(clients, 0, timeout_s)

    async def close_left_open(self, timeout_s: float) -> list[str]:
        """After the task's own ``stop()``: stop the clients it left open, each named in a warning (the
        plugin leaks it otherwise: its connections and background fetches or sends would outlive the
        task for as long as the process runs). Returns the kinds of client closed here."""
        left = [client for client in list(self._handed_out) if getattr(client, "is_open", False)]
        for client in left:
            log.warning("%s: its stop() left a %s open that it made through context.clients; the runtime closed "
                        "it. Close every client a task opens in its stop()", self._owner, type(client).__name__)
        await self._stop(left, timeout_s, timeout_s + 1)
        return [type(client).__name__ for client in left]

    async def _stop(self, clients: list[Any], writes_wait_s: float, timeout_s: float) -> None:
        results = await asyncio.gather(*(_stop_client(client, writes_wait_s, timeout_s) for client in clients),
                                       return_exceptions=True)
        for client, result in zip(clients, results):
            if isinstance(result, Exception):
                log.warning("%s: a %s it opened did not close: %r", self._owner, type(client).__name__, result)


async def _stop_client(client: Any, writes_wait_s: float, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        stop_within = getattr(client, "stop_within", None)
        if stop_within is not None:
            await stop_within(writes_wait_s)
        else:
            await client.stop()
