"""Kafka clients of the mirror connectors, built from their per-cluster settings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from mirrorline.api import Admin, ConfigError, Consumer, KafkaClients, TopicPartition

from .config import (ALLOW_SAME_CLUSTER_FLOW, COMMON_CONFIG_DEF, SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS,
                     client_props)


def admin_client(clients: KafkaClients, originals: dict[str, Any], side: str, client_id: str) -> Admin:
    """An admin client for the source or target cluster from the connector's settings (``clients``:
    the context's :class:`~mirrorline.api.clients.KafkaClients`)."""
    return clients.admin({"client.id": client_id, **client_props(originals, side, "admin")})


async def connect_admin(admin: Admin, originals: dict[str, Any], side: str) -> None:
    """Start an admin client, turning the client's bare "Unable to bootstrap" into an actionable error."""
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


async def cluster_id(admin: Admin) -> str | None:
    """The id of the cluster a started admin client talks to (None if the brokers do not say)."""
    return (await admin.describe_cluster()).cluster_id


def same_cluster_flow_allowed(config: Mapping[str, Any]) -> bool:
    """``allow.same.cluster.flow`` of a connector config, raw (strings) or parsed."""
    key = COMMON_CONFIG_DEF.keys[ALLOW_SAME_CLUSTER_FLOW]
    return bool(key.parse(config.get(ALLOW_SAME_CLUSTER_FLOW, key.default)))


def refuse_same_cluster(source_alias: str, source_id: str | None, target_alias: str, target_id: str | None) -> None:
    """Raise ConfigError when the flow's two clusters report the same cluster id.

    Aliases are only names: two of them may point at one physical cluster, and a flow from a
    cluster into itself copies its own copies on every refresh (``A.orders``, ``A.A.orders``...)
    until the disk is full. Unknown ids (None) are not compared.
    """
    if source_id is None or source_id != target_id:
        return
    raise ConfigError(
        f"{source_alias}->{target_alias}: source cluster {source_alias!r} and target cluster {target_alias!r} are "
        f"the same Kafka cluster (cluster id {source_id}), so this flow would copy its own copies without end; "
        f"point the two aliases at different clusters, or set {ALLOW_SAME_CLUSTER_FLOW}=true if the topics "
        f"filters keep the copies out")


async def check_distinct_clusters(config: Mapping[str, Any], source_admin: Admin, target_admin: Admin) -> None:
    """Refuse (ConfigError) a connector's flow whose source and target are one physical cluster,
    unless ``allow.same.cluster.flow`` is true. Both admin clients must be started."""
    if same_cluster_flow_allowed(config):
        return
    refuse_same_cluster(str(config[SOURCE_CLUSTER_ALIAS]), await cluster_id(source_admin),
                        str(config[TARGET_CLUSTER_ALIAS]), await cluster_id(target_admin))


def consumer_for(clients: KafkaClients, originals: dict[str, Any], side: str, client_id: str,
                 overrides: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None) -> Consumer:
    """An unstarted consumer of the source or target cluster from the connector's settings (it never
    commits); ``overrides`` are client settings applied last (``{"auto.offset.reset": "earliest"}``),
    ``defaults`` first (the user's settings replace them)."""
    return clients.consumer({"client.id": client_id, **(defaults or {}), **client_props(originals, side, "consumer"),
                             **(overrides or {})})


async def assign_at(consumer: Consumer, tp: TopicPartition, offset: int | None = None) -> None:
    """Assign ``tp`` alone and position it at ``offset`` (its beginning when None).

    The seek follows assign() at once, before the event loop runs the consumer's fetcher again:
    the partition then has a position before the fetcher looks at it, so the reset to
    ``auto.offset.reset`` that assign() would otherwise start never runs, and cannot overwrite the
    seek. Awaiting that reset first, as this did, cost a whole ``fetch.max.wait.ms`` at every
    start: the consumer's default reset (latest) sent a fetch at the end of the partition, which
    the broker held for lack of records, and the fetch from ``offset`` waited behind it (5.3 s
    for each checkpoint task's first read of a populated offset-syncs topic).
    """
    if offset is None:
        offset = (await consumer.beginning_offsets([tp]))[tp]
    consumer.assign([tp])
    consumer.seek(tp, offset)


async def read_to_end(consumer: Consumer, tp: TopicPartition, on_record: Callable[[Any], None],
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

