"""A connector's committed task configs, read from a Kafka Connect config topic.

For tools that run no worker, such as ``mirrorline mirroring active-topics MM2_PROPERTIES
--flow A->B`` (MM2's dedicated mode serves no REST API). The config topic's format is Kafka
Connect's (single partition, string keys, schemaless JSON values): ``task-<connector>-<n>`` ->
``{"properties": {...}}`` records are buffered and ``commit-<connector>`` -> ``{"tasks": N}``
makes tasks ``0..N-1`` current when all of them were read (otherwise the connector's task
configs are inconsistent and read as none, as Connect reads them); ``connector-<connector>``
-> null deletes the connector. Other records are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mirrorline.api import ConnectError, KafkaClients, TopicPartition, UnknownTopicOrPartitionError

from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin, consumer_for, read_to_end


class TaskConfigReader:
    """Follows one connector's records of a config topic; :attr:`task_configs` is the last complete commit."""

    def __init__(self, connector: str) -> None:
        """Nothing is read yet: feed records to :meth:`on_record`."""
        self.connector = connector
        self.task_configs: list[dict[str, str]] = []
        self._buffered: dict[int, dict[str, str]] = {}

    def on_record(self, record: Any) -> None:
        """Apply one config-topic record (records of other connectors or kinds are ignored)."""
        try:
            key = record.key.decode("utf-8") if record.key is not None else ""
            value = json.loads(record.value) if record.value is not None else None
        except ValueError:
            return
        task_prefix = f"task-{self.connector}-"
        if key == f"connector-{self.connector}" and value is None:
            self.task_configs, self._buffered = [], {}
        elif key.startswith(task_prefix) and key[len(task_prefix):].isdigit() and isinstance(value, dict):
            properties = value.get("properties")
            if isinstance(properties, dict):
                self._buffered[int(key[len(task_prefix):])] = {str(k): str(v) for k, v in properties.items()}
        elif key == f"commit-{self.connector}" and isinstance(value, dict) and isinstance(value.get("tasks"), int):
            count, buffered, self._buffered = value["tasks"], self._buffered, {}
            complete = all(i in buffered for i in range(count))
            self.task_configs = [buffered[i] for i in range(count)] if complete else []


async def read_task_configs(clients: KafkaClients, originals: Mapping[str, Any], topic: str,
                            connector: str) -> list[dict[str, str]]:
    """The committed task configs of ``connector`` in config topic ``topic`` on the target cluster of
    ``originals`` (a MirrorSource connector's config, whose ``target.cluster.*`` settings reach it).

    An absent topic means no task configs. Raises what the Kafka clients raise when the cluster
    cannot be read.
    """
    originals = {str(k): str(v) for k, v in originals.items()}
    admin = admin_client(clients, originals, "target", f"mirrorline-mirroring-admin|{connector}")
    try:
        await connect_admin(admin, originals, "target")
        described = [e for e in await admin.describe_topics([topic]) if e.name == topic]
    finally:
        await admin.close()
    if not described or isinstance(described[0].error, UnknownTopicOrPartitionError):
        return []
    if described[0].error is not None:
        raise ConnectError(f"cannot describe config topic {topic}: {type(described[0].error).__name__} "
                           f"({described[0].error})")
    reader = TaskConfigReader(connector)
    consumer = consumer_for(clients, originals, "target", f"mirrorline-mirroring-admin|{connector}")
    await consumer.start()
    try:
        await read_to_end(consumer, TopicPartition(topic, 0), reader.on_record)
    finally:
        await consumer.stop()
    return reader.task_configs
