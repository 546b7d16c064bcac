"""A sink connector's offsets through REST: its consumer group's committed offsets (Connect's format).

A sink's position is not in the offset store but in the group ``connect-<name>``. As in Connect,
``GET /connectors/{name}/offsets`` lists them as ``{"partition": {"kafka_topic", "kafka_partition"},
"offset": {"kafka_offset"}}``; ``PATCH`` sets or (with a null offset) removes them and ``DELETE``
removes them all, on a STOPPED connector (the group must have no member). The admin client uses
the same settings as the sink's consumers: ``bootstrap.servers``, the worker's ``consumer.*``, the
connector's ``consumer.override.*``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorline.api.errors import BadRequestError, GroupNotEmptyError
from mirrorline.api.kafka import TopicPartition
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.runtime.sink_config import CONSUMER_OVERRIDE_PREFIX, CONSUMER_PREFIX

TOPIC_KEY = "kafka_topic"
PARTITION_KEY = "kafka_partition"
OFFSET_KEY = "kafka_offset"


def group_of(connector: str) -> str:
    """The consumer group of a sink connector's tasks (Connect's name)."""
    return f"connect-{connector}"


def _admin(worker_config: Any, connector_config: Mapping[str, Any]) -> KafkaAdmin:
    props = {"bootstrap.servers": ",".join(worker_config["bootstrap.servers"]),
             **worker_config.with_prefix(CONSUMER_PREFIX),
             **{k[len(CONSUMER_OVERRIDE_PREFIX):]: v for k, v in connector_config.items()
                if k.startswith(CONSUMER_OVERRIDE_PREFIX)}}
    return KafkaAdmin.from_settings(props)


async def read(worker_config: Any, connector: str, connector_config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The group's committed offsets, in Connect's sink format, sorted by topic and partition."""
    admin = _admin(worker_config, connector_config)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group_of(connector))
    finally:
        await admin.close()
    return [{"partition": {TOPIC_KEY: tp.topic, PARTITION_KEY: tp.partition}, "offset": {OFFSET_KEY: meta.offset}}
            for tp, meta in sorted(committed.items()) if meta.offset >= 0]


def parse(pairs: list[tuple[dict, dict | None]]) -> dict[TopicPartition, int | None]:
    """``(partition, offset)`` pairs of a PATCH as partitions and offsets (None: remove), or BadRequestError
    with Connect's messages."""
    out: dict[TopicPartition, int | None] = {}
    for partition, offset in pairs:
        topic, number = partition.get(TOPIC_KEY), partition.get(PARTITION_KEY)
        if not isinstance(topic, str) or not topic:
            raise BadRequestError(f"Partition objects for sink connectors must contain the '{TOPIC_KEY}' key "
                                  f"with a topic name")
        if isinstance(number, str) and number.lstrip("-").isdigit():
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise BadRequestError(f"Partition objects for sink connectors must contain the '{PARTITION_KEY}' key "
                                  f"with a non-negative partition number")
        if offset is None:
            out[TopicPartition(topic, number)] = None
            continue
        value = offset.get(OFFSET_KEY)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadRequestError(f"Offset objects for sink connectors must contain the '{OFFSET_KEY}' key with a "
                                  f"non-negative offset")
        out[TopicPartition(topic, number)] = value
    return out


async def alter(worker_config: Any, connector: str, connector_config: Mapping[str, Any],
                offsets: Mapping[TopicPartition, int | None]) -> None:
    """Set (or, for None, remove) the group's committed offsets; BadRequestError while it has members."""
    admin = _admin(worker_config, connector_config)
    await admin.start()
    try:
        await admin.alter_consumer_group_offsets(group_of(connector),
                                                 {tp: o for tp, o in offsets.items() if o is not None})
        removed = [tp for tp, o in offsets.items() if o is None]
        if removed:
            await admin.delete_consumer_group_offsets(group_of(connector), removed)
    except GroupNotEmptyError as exc:
        raise BadRequestError(f"The consumer group {group_of(connector)} still has members ({exc}); stop the "
                              f"connector and wait for its tasks to leave, then try again") from None
    finally:
        await admin.close()


async def reset(worker_config: Any, connector: str, connector_config: Mapping[str, Any]) -> None:
    """Remove every committed offset of the group: the sink starts over (``auto.offset.reset``)."""
    admin = _admin(worker_config, connector_config)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group_of(connector))
        if committed:
            await admin.delete_consumer_group_offsets(group_of(connector), list(committed))
    except GroupNotEmptyError as exc:
        raise BadRequestError(f"The consumer group {group_of(connector)} still has members ({exc}); stop the "
                              f"connector and wait for its tasks to leave, then try again") from None
    finally:
        await admin.close()
