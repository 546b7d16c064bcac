"""Kafka clients of the mirror connectors, built from their per-cluster settings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from framework.api.kafka_clients import client_kwargs

from .config import client_props


def admin_client(originals: dict[str, Any], side: str, client_id: str) -> AIOKafkaAdminClient:
    """An admin client for the source or target cluster from the connector's settings."""
    kwargs, _ = client_kwargs({"client.id": client_id, **client_props(originals, side, "admin")}, "admin")
    return AIOKafkaAdminClient(**kwargs)


async def connect_admin(admin: AIOKafkaAdminClient, originals: dict[str, Any], side: str) -> None:
    """Start an admin client, turning aiokafka's bare "Unable to bootstrap" into an actionable error."""
    try:
        await admin.start()
    except Exception as exc:
        props = client_props(originals, side, "admin")
        protocol = props.get("security.protocol", "PLAINTEXT")
        hint = (f"check {side}.cluster.sasl.* / ssl.* settings (a refused login looks like this too; "
                f"the broker's log names the reason)" if protocol != "PLAINTEXT" else
                "check that the brokers run and the address is right")
        raise ConnectionError(f"cannot connect to the {side} cluster at {props['bootstrap.servers']} "
                              f"(security.protocol={protocol}): {exc}; {hint}") from exc


def consumer_kwargs(originals: dict[str, Any], side: str, client_id: str) -> dict[str, Any]:
    """aiokafka consumer arguments for the source or target cluster (no group, no auto-commit)."""
    props = {"client.id": client_id, **client_props(originals, side, "consumer"), "enable.auto.commit": "false"}
    props.pop("group.id", None)
    kwargs, _ = client_kwargs(props, "consumer")
    return kwargs


async def assign_at(consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int | None = None) -> None:
    """Assign ``tp`` alone and position it at ``offset`` (its beginning when None).

    assign() schedules a reset to ``auto_offset_reset``; a seek made before that reset
    completes can lose to it, so the reset is awaited first.
    """
    consumer.assign([tp])
    await consumer.position(tp)
    if offset is None:
        offset = (await consumer.beginning_offsets([tp]))[tp]
    consumer.seek(tp, offset)


async def read_to_end(consumer: AIOKafkaConsumer, tp: TopicPartition, on_record: Callable[[Any], None],
                      timeout_s: float = 60.0) -> None:
    """Feed every record of ``tp`` from its start to its current end to ``on_record``.

    ``consumer`` must be started; ``tp`` is assigned here. Raises TimeoutError if the end
    is not reached within ``timeout_s``.
    """
    end = (await consumer.end_offsets([tp]))[tp]
    await assign_at(consumer, tp)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while await consumer.position(tp) < end:
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"could not read {tp.topic}-{tp.partition} to its end within {timeout_s:.0f}s")
        for records in (await consumer.getmany(tp, timeout_ms=500)).values():
            for record in records:
                on_record(record)
