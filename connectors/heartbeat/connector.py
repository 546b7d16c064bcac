"""MirrorHeartbeatConnector and MirrorHeartbeatTask: prove a flow is alive (reference mm2.md §5.1-5.2).

The connector creates the heartbeats topic (``heartbeats``: compacted, 1 partition) on the
**target** cluster and runs one task, which writes ``Heartbeat(source, target, now)`` to it every
``emit.heartbeats.interval.seconds``. MirrorSourceConnectors elsewhere replicate that topic
(``A.heartbeats`` ...), so a fresh heartbeat downstream shows data flows along the path.
As in MM2 the connector ignores ``enabled``: heartbeats are emitted for disabled flows too.
"""

from __future__ import annotations

import asyncio
import logging
import time


from mirrorline.api import (BadRequestError, Config, ConfigDef, ConfigKey, Importance, Range,
                           NewTopic, SourceConnector, SourceRecord, SourceTask, Type)

from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin
from mirrorline.connectors.mirror_client.config import (
    COMMON_CONFIG_DEF,
    SOURCE_CLUSTER_ALIAS,
    TARGET_CLUSTER_ALIAS,
    load_replication_policy,
)
from mirrorline.connectors.mirror_client.formats import Heartbeat, heartbeat_partition

log = logging.getLogger(__name__)

VERSION = "0.1.0"
GROUP = "MirrorHeartbeat"
EMIT_ENABLED = "emit.heartbeats.enabled"
EMIT_INTERVAL = "emit.heartbeats.interval.seconds"
REPLICATION_FACTOR = "heartbeats.topic.replication.factor"
#: Longest single wait inside ``poll``, so pause and stop stay prompt with long intervals. At the
#: default interval of 1 s a longer step than the interval only adds wake-ups (0.5 s was two a beat).
MAX_POLL_WAIT_S = 1.0
#: Kafka error codes: topic exists; authorization / unsupported / invalid config (MM2 only warns).
TOPIC_ALREADY_EXISTS = 36
_WARN_ONLY = {29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
              35: "UNSUPPORTED_VERSION", 40: "INVALID_CONFIG"}

HEARTBEAT_CONFIG_DEF = COMMON_CONFIG_DEF.merged(ConfigDef([
    ConfigKey(EMIT_ENABLED, Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Emit heartbeats; false runs the connector with no task."),
    ConfigKey(EMIT_INTERVAL, Type.LONG, default=1, validator=Range(min=0), importance=Importance.LOW, group=GROUP,
              doc="Seconds between two heartbeats."),
    ConfigKey(REPLICATION_FACTOR, Type.INT, default=3, validator=Range(min=-1), importance=Importance.LOW,
              group=GROUP, doc="Replication factor of the heartbeats topic (-1: broker default)."),
]))


class MirrorHeartbeatConnector(SourceConnector):
    """Emits heartbeats for the flow source -> target into the target's heartbeats topic (MM2's connector)."""

    config_def = HEARTBEAT_CONFIG_DEF
    aliases = ("org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",)
    creates_own_topics = True  # the heartbeats topic is created compacted, with one partition

    def version(self) -> str:
        return VERSION

    def task_class(self):
        return MirrorHeartbeatTask

    async def start(self, config: Config) -> None:
        """Create the heartbeats topic on the target.

        Unlike MirrorSource, a flow whose source and target are one cluster is accepted, as MM2
        accepts it: heartbeats copy no record, so nothing can loop (``allow.same.cluster.flow``
        guards record copies only).
        """
        self.config = config
        originals = {k: str(v) for k, v in config.originals.items()}
        topic = load_replication_policy(originals).heartbeats_topic()
        flow = f"{config[SOURCE_CLUSTER_ALIAS]}->{config[TARGET_CLUSTER_ALIAS]}|{self.context.name}"
        target_admin = admin_client(self.context.clients, originals, "target", f"{flow}|heartbeats-target-admin")
        try:
            await connect_admin(target_admin, originals, "target")
            async with asyncio.timeout(config["admin.timeout.ms"] / 1000):
                response = await target_admin.create_topics(
                    [NewTopic(topic, 1, config[REPLICATION_FACTOR], {"cleanup.policy": "compact"})])
        finally:
            await target_admin.close()
        for name, error in response.items():
            code = 0 if error is None else error.code
            if code in _WARN_ONLY:
                log.warning("Could not create heartbeats topic %s (%s); assuming it exists", name, _WARN_ONLY[code])
            elif code not in (0, TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"could not create heartbeats topic {name} on the target cluster "
                                   f"(Kafka error {code}); check {REPLICATION_FACTOR}")

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.config[EMIT_ENABLED] or max_tasks < 1:
            return []
        return [{k: str(v) for k, v in self.config.originals.items()}]

    async def stop(self) -> None:
        pass

    async def alter_offsets(self, config, offsets) -> None:
        # MM2: tombstones are always accepted; otherwise string aliases and offset 0.
        for partition, offset in offsets:
            if offset is None:
                continue
            if not isinstance(partition, dict):
                raise BadRequestError("The partition for a MirrorHeartbeatConnector offset cannot be null")
            for key in ("sourceClusterAlias", "targetClusterAlias"):
                if not isinstance(partition.get(key), str):
                    raise BadRequestError(f"Invalid source partition {partition}: {key!r} must be a string")
            value = offset.get("offset") if isinstance(offset, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value != 0:
                raise BadRequestError(f"Invalid offset {offset}: expected {{\"offset\": 0}} or null")


class MirrorHeartbeatTask(SourceTask):
    """Returns one heartbeat record every ``emit.heartbeats.interval.seconds``."""

    def version(self) -> str:
        return VERSION

    async def start(self, config: dict[str, str]) -> None:
        parsed = HEARTBEAT_CONFIG_DEF.parse(config)
        self.source_alias = parsed[SOURCE_CLUSTER_ALIAS]
        self.target_alias = parsed[TARGET_CLUSTER_ALIAS]
        self.topic = load_replication_policy(config).heartbeats_topic()
        self.interval_s = float(parsed[EMIT_INTERVAL])
        self.partition = heartbeat_partition(self.source_alias, self.target_alias)
        self.due = time.monotonic() + self.interval_s

    async def poll(self) -> list[SourceRecord]:
        wait = self.due - time.monotonic()
        if wait > 0:
            await asyncio.sleep(min(wait, MAX_POLL_WAIT_S))
            if time.monotonic() < self.due:
                return []
        self.due = max(self.due + self.interval_s, time.monotonic())
        now = int(time.time() * 1000)
        beat = Heartbeat(self.source_alias, self.target_alias, now)
        return [SourceRecord(self.partition, {"offset": 0}, self.topic, 0, beat.encode_key(), beat.encode_value(),
                             timestamp=now)]

    async def stop(self) -> None:
        pass
