"""The runtime's :class:`~mirrorline.api.clients.KafkaClients`: the contract backed by this package's helpers.

One stateless instance, :data:`KAFKA_CLIENTS`, is handed to every connector and task context and
to the launcher of plugin commands.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mirrorline.api.clients import AclBinding, AclFilter, BatchFetch, KafkaClients
from mirrorline.clients import kafka_admin, kafka_clients
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.clients.producer import KafkaProducer, RecordProducer


class AioKafkaClients(KafkaClients):
    """The contract's clients over aiokafka: :class:`~mirrorline.clients.admin.KafkaAdmin`,
    :class:`~mirrorline.clients.consumer.KafkaConsumer`, :class:`~mirrorline.clients.producer.KafkaProducer`."""

    def admin(self, props: Mapping[str, Any]) -> KafkaAdmin:
        return KafkaAdmin.from_settings(props)

    def consumer(self, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                 fetch_sessions: bool = False) -> KafkaConsumer:
        return KafkaConsumer.from_settings(props, fetch_batches=fetch_batches, fetch_sessions=fetch_sessions)

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

    def client_kwargs(self, props: Mapping[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
        return kafka_clients.client_kwargs(props, role)

    def record_producer(self, **kwargs: Any) -> RecordProducer:
        return RecordProducer(**kwargs)

    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        return await kafka_clients.security_problem(props, timeout_s)

    async def describe_consumer_group_state(self, admin: Any, group: str) -> str:
        return await kafka_admin.describe_consumer_group_state(admin, group)

    async def alter_consumer_group_offsets(self, admin: Any, group: str,
                                           offsets: Mapping[Any, int | tuple[int, str]]) -> None:
        await kafka_admin.alter_consumer_group_offsets(admin, group, offsets)

    async def incremental_alter_configs(self, admin: Any, topic: str, set_configs: Mapping[str, str],
                                        delete_configs: Iterable[str] = ()) -> None:
        await kafka_admin.incremental_alter_configs(admin, topic, set_configs, delete_configs)

    async def describe_acls(self, admin: Any, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        return await kafka_admin.describe_acls(admin, acl_filter)

    async def create_acls(self, admin: Any, bindings: Iterable[AclBinding]) -> list[tuple[AclBinding, Exception]]:
        return await kafka_admin.create_acls(admin, bindings)


#: The instance the runtime hands to plugins (the class holds no state).
KAFKA_CLIENTS = AioKafkaClients()
