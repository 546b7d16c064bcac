"""The runtime's :class:`~mirrorline.api.clients.KafkaClients`: the contract backed by this package's helpers.

One instance, :data:`KAFKA_CLIENTS`, is handed to every connector and task context and to the
launcher of plugin commands; its only state is the consumers tasks share (:mod:`.consumer_share`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from mirrorline.api.clients import BatchFetch, Consumer, KafkaClients
from mirrorline.clients import kafka_clients
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.clients.consumer_share import ConsumerShares, settings_key
from mirrorline.clients.producer import KafkaProducer


class AioKafkaClients(KafkaClients):
    """The contract's clients over aiokafka: :class:`~mirrorline.clients.admin.KafkaAdmin`,
    :class:`~mirrorline.clients.consumer.KafkaConsumer`, :class:`~mirrorline.clients.producer.KafkaProducer`."""

    def admin(self, props: Mapping[str, Any]) -> KafkaAdmin:
        return KafkaAdmin.from_settings(props)

    def __init__(self) -> None:
        #: the consumers shared under a ``share`` name (one per event loop, name and settings)
        self.shared_consumers = ConsumerShares()

    def consumer(self, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                 fetch_sessions: bool = False, gather_max_wait_ms: int | None = None,
                 gather_trickle_wait_ms: int | None = None, share: str | None = None) -> Consumer:
        def make() -> KafkaConsumer:
            return KafkaConsumer.from_settings(props, fetch_batches=fetch_batches, fetch_sessions=fetch_sessions,
                                               gather_max_wait_ms=gather_max_wait_ms,
                                               gather_trickle_wait_ms=gather_trickle_wait_ms)

        if share is None:
            return make()
        coalesce = None if fetch_batches is None else fetch_batches.coalesce_bytes
        return self.shared_consumers.member(share, settings_key(props, coalesce, fetch_sessions, gather_max_wait_ms,
                                                                  gather_trickle_wait_ms),
                                            make)

    def producer(self, props: Mapping[str, Any]) -> KafkaProducer:
        return KafkaProducer.from_settings(props)

    @contextlib.contextmanager
    def quiet_logs(self) -> Iterator[None]:
        logger = logging.getLogger("aiokafka")
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            yield
            return
        previous = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            logger.setLevel(previous)

    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        return await kafka_clients.security_problem(props, timeout_s)


#: The instance the runtime hands to plugins.
KAFKA_CLIENTS = AioKafkaClients()
