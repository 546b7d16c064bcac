"""MirrorCheckpointConnector: finds the consumer groups to checkpoint and splits them over tasks.

On start it creates the checkpoints topic (``<source>.checkpoints.internal`` on the target),
loads the groups once, and then re-checks them every ``refresh.groups.interval.seconds``;
a change asks the runtime to re-split. A group qualifies when the group filter accepts it
and it has a committed offset on a topic the topic filter accepts. Groups are split into
contiguous chunks over ``min(tasks.max, #groups)`` tasks (``task.assigned.groups``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any


from mirrorline.api import (Admin, BadRequestError, Config, ConfigValue, NewTopic, SourceConnector,
                            TopicAlreadyExistsError)

from mirrorline.connectors.checkpoint.config import CHECKPOINT_CONFIG_DEF, TASK_ASSIGNED_GROUPS, TASK_INDEX
from mirrorline.connectors.checkpoint.task import MirrorCheckpointTask
from mirrorline.connectors.mirror_client.config import ENABLED, SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS, load_replication_policy
from mirrorline.connectors.mirror_client.filters import GroupFilter, TopicFilter
from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin

log = logging.getLogger(__name__)


def contiguous_chunks(items: list[str], count: int) -> list[list[str]]:
    """Kafka's ConnectorUtils.groupPartitions: ``count`` contiguous chunks, the first ``n % count`` one longer."""
    size, extra = divmod(len(items), count)
    chunks, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return chunks


async def find_groups(admin: Admin, group_filter: GroupFilter, topic_filter: TopicFilter) -> list[str]:
    """Source groups the filter accepts that have committed offsets on an accepted topic (KAFKA-14837)."""
    groups = sorted({g[0] for g in await admin.list_consumer_groups() if group_filter.should_replicate_group(g[0])})
    committed = await admin.list_consumer_groups_offsets(groups) if groups else {}
    found = []
    for group in groups:
        offsets = committed.get(group)
        if isinstance(offsets, Exception) or offsets is None:
            log.warning("Could not read committed offsets of group %s: %s", group, offsets or "no answer for it")
            continue
        if any(topic_filter.should_replicate_topic(tp.topic) for tp in offsets):
            found.append(group)
    return found


class MirrorCheckpointConnector(SourceConnector):
    """Translates consumer-group offsets from source to target (MM2's MirrorCheckpointConnector)."""

    config_def = CHECKPOINT_CONFIG_DEF
    aliases = ("org.apache.kafka.connect.mirror.MirrorCheckpointConnector",)
    creates_own_topics = True  # the checkpoints topic is created compacted, with one partition

    def version(self) -> str:
        return "0.1.0"

    def task_class(self):
        return MirrorCheckpointTask

    def validate(self, config) -> list[ConfigValue]:
        values = super().validate(config)
        if str(config.get(ENABLED, "true")).lower() == "false":
            return values
        by_name = {v.name: v for v in values}
        if str(config.get("emit.checkpoints.enabled", "true")).lower() == "false":
            by_name["emit.checkpoints.enabled"].errors.append(
                "MirrorCheckpointConnector can't run with emit.checkpoints.enabled set to false")
        if str(config.get("emit.offset-syncs.enabled", "true")).lower() == "false":
            by_name["emit.offset-syncs.enabled"].errors.append(
                "MirrorCheckpointConnector can't run without offset syncs (emit.offset-syncs.enabled=false)")
        return values

    async def start(self, config: Config) -> None:
        self.config = config
        self.groups: list[str] = []
        self._loop: asyncio.Task | None = None
        self.source_admin = self.target_admin = None
        if not config[ENABLED] or not config["emit.checkpoints.enabled"]:
            return
        originals = {k: str(v) for k, v in config.originals.items()}
        source, target = config[SOURCE_CLUSTER_ALIAS], config[TARGET_CLUSTER_ALIAS]
        flow = f"{source}->{target}|{self.context.name}"
        self.group_filter, self.topic_filter = GroupFilter(originals), TopicFilter(originals)
        clients = self.context.clients
        self.source_admin = admin_client(clients, originals, "source", f"{flow}|checkpoint-source-admin")
        self.target_admin = admin_client(clients, originals, "target", f"{flow}|checkpoint-target-admin")
        await connect_admin(self.source_admin, originals, "source")
        await connect_admin(self.target_admin, originals, "target")
        # a flow from a cluster into itself is accepted, as MM2 accepts it: checkpoints copy no record
        topic = load_replication_policy(originals).checkpoints_topic(source)
        response = await self.target_admin.create_topics([NewTopic(
            topic, 1, config["checkpoints.topic.replication.factor"], {"cleanup.policy": "compact"})])
        for name, error in response.items():
            if error is not None and not isinstance(error, TopicAlreadyExistsError):
                log.warning("Could not create checkpoints topic %s (error %s); assuming it exists", name, error.code)
        self.groups = await find_groups(self.source_admin, self.group_filter, self.topic_filter)
        if config["refresh.groups.enabled"]:
            self._loop = self.context.run_in_background(self._refresh_loop(config["refresh.groups.interval.seconds"]),
                                                        "refresh-groups")

    async def _refresh_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                found = await find_groups(self.source_admin, self.group_filter, self.topic_filter)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("Refreshing consumer groups failed, retrying in %ss: %r", interval_s, exc)
                continue
            if found != self.groups:
                log.info("Consumer groups to checkpoint changed (%d -> %d); re-splitting tasks",
                         len(self.groups), len(found))
                self.groups = found
                self.context.request_task_reconfiguration()

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.config[ENABLED] or not self.config["emit.checkpoints.enabled"] or not self.groups:
            return []
        base = {k: str(v) for k, v in self.config.originals.items()}
        chunks = contiguous_chunks(self.groups, min(max_tasks, len(self.groups)))
        return [{**base, TASK_ASSIGNED_GROUPS: ",".join(chunk), TASK_INDEX: str(i)} for i, chunk in enumerate(chunks)]

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
        for admin in (self.source_admin, self.target_admin):
            if admin is not None:
                await admin.close()

    async def alter_offsets(self, config: Any, offsets) -> None:
        for partition, offset in offsets:
            if not (isinstance(partition.get("group"), str) and isinstance(partition.get("topic"), str)
                    and isinstance(partition.get("partition"), int) and partition["partition"] >= 0):
                raise BadRequestError(f"Invalid source partition {partition}: expected "
                                      '{"group": <name>, "topic": <name>, "partition": <int >= 0>}')
            if offset is not None and offset != {"offset": 0}:
                raise BadRequestError(f"Invalid offset {offset}: checkpoint offsets can only be {{\"offset\": 0}} or null")
