"""Clients for both ends of one flow of an ``mm2.properties``, for the failover tools.

:class:`FlowEnds` opens an admin client and a consumer on each cluster of a flow with the
flow's own settings (security included). The cluster a command needs is required; the other
may be down (a real disaster): its side is then None and ``unreachable`` says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api import Admin, ConfigError, ConnectError, Consumer, KafkaClients

from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin, consumer_for
from mirrorline.connectors.mirror_client.config import client_props, load_replication_policy
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.mirror_client.policies import ReplicationPolicy

#: Seconds a cluster gets to answer before it is taken as unreachable.
CONNECT_TIMEOUT_S = 20.0


def parse_flow(config: MirrorMakerConfig, text: str) -> tuple[str, str]:
    """``"A->B"`` as (source, target), both aliases listed in ``clusters``; ConfigError otherwise."""
    source, sep, target = text.partition("->")
    source, target = source.strip(), target.strip()
    if not sep or not source or not target or source == target:
        raise ConfigError(f"--flow {text!r}: expected SOURCE->TARGET with two different cluster aliases, e.g. A->B")
    unknown = [alias for alias in (source, target) if alias not in config.clusters]
    if unknown:
        raise ConfigError(f"--flow {text!r}: unknown cluster alias(es) {', '.join(unknown)}; "
                          f"'clusters' lists {', '.join(config.clusters)}")
    return source, target


@dataclass
class Side:
    """One cluster of a flow: its alias, bootstrap servers, and started clients."""

    alias: str
    bootstrap: str
    admin: Admin
    consumer: Consumer


@dataclass
class FlowEnds:
    """Both clusters of flow ``source->target``; use as ``async with``.

    ``required`` names the sides ("source", "target") that must answer; a required side that
    does not is a ConnectError naming the cluster, an optional one is left None with the
    reason in ``unreachable``. ``clients`` (the command's ``launcher.clients``) makes the clients;
    without it the flow's settings can be read but not opened.
    """

    config: MirrorMakerConfig
    source_alias: str
    target_alias: str
    required: tuple[str, ...] = ("target",)
    source: Side | None = None
    target: Side | None = None
    unreachable: dict[str, str] = field(default_factory=dict)
    clients: KafkaClients | None = None

    @property
    def originals(self) -> dict[str, Any]:
        """The flow's MirrorSourceConnector settings (client settings of both clusters, policy ...)."""
        return self.config.connector_config(self.source_alias, self.target_alias, SOURCE_CONNECTOR)

    @property
    def policy(self) -> ReplicationPolicy:
        """The flow's replication policy."""
        return load_replication_policy(self.originals)

    async def __aenter__(self) -> FlowEnds:
        originals = self.originals
        results = await asyncio.gather(*(self._open(originals, side) for side in ("source", "target")),
                                       return_exceptions=True)
        for side, result in zip(("source", "target"), results):
            if isinstance(result, BaseException):
                if side in self.required:
                    await self.__aexit__(None, None, None)
                    alias = self.source_alias if side == "source" else self.target_alias
                    raise ConnectError(f"cannot reach cluster {alias} ({side} of {self.source_alias}->"
                                       f"{self.target_alias}): {result}") from None
                self.unreachable[side] = str(result) or result.__class__.__name__
            else:
                setattr(self, side, result)
        return self

    async def _open(self, originals: dict[str, Any], side: str) -> Side:
        alias = self.source_alias if side == "source" else self.target_alias
        bootstrap = client_props(originals, side, "admin")["bootstrap.servers"]
        if self.clients is None:
            raise ConnectError(f"flow {self.source_alias}->{self.target_alias}: no Kafka clients to open it with")
        admin = admin_client(self.clients, originals, side, f"mirrorline-failover-{alias}")
        # short fetch waits: every lookup re-assigns the consumer, and an in-flight fetch parked at the
        # end of a partition for the default 500 ms would delay each one
        consumer = consumer_for(self.clients, originals, side, f"mirrorline-failover-{alias}",
                                {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 10})
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await connect_admin(admin, originals, side)
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await consumer.start()
        except BaseException as exc:
            await admin.close()
            await consumer.stop()
            if isinstance(exc, asyncio.TimeoutError):
                raise ConnectionError(f"no answer from {bootstrap} within {CONNECT_TIMEOUT_S:.0f} s") from None
            raise
        return Side(alias, bootstrap, admin, consumer)

    async def __aexit__(self, *exc) -> None:
        for side in (self.source, self.target):
            if side is not None:
                await side.consumer.stop()
                await side.admin.close()
        self.source = self.target = None
