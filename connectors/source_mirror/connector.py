"""MirrorSourceConnector: plans the copying of a source cluster's topics to a target cluster.

Lifecycle (MM2's, reference §3.2): on start it creates the offset-syncs topic, finds the
source topics to mirror, creates or grows their remote topics, and schedules its loops —
topic-config sync and topic-ACL sync (first runs at once) and topic refresh (first run after
one interval).
A refresh that finds new topics or partitions creates them on the target and asks the
runtime to re-split tasks. A refresh that finds the source unchanged checks the remote topics
(re-creating one deleted on the target, growing one short of partitions) only if the last check
found something missing or is :func:`remote_check_interval` old: three refresh intervals, at
most 30 s (beyond MM2, which describes every remote topic at every refresh: at thousands of
partitions and a short ``refresh.topics.interval.seconds`` that was a large part of an idle
mirror's CPU; from a refresh interval of 30 s, MM2's default is 600 s, every refresh checks).

Topic selection at run time (beyond MM2, as IBM Event Streams' mirroring controls): at start and
at every refresh the connector reads its stored selection from
``mirrorline-topic-selection.internal`` on the target
(:mod:`mirrorline.connectors.source_mirror.topic_selection`, written by ``POST
/admin/mirroring/topic-selection`` or ``mirrorline mirroring topic-selection set``). When one is
stored, its include patterns replace ``topics`` (``topics.exclude`` still applies), so a change
reaches the tasks within one ``refresh.topics.interval.seconds``, without a restart.

Task split (``task_configs``): every mirrored (topic, partition), in a stable order, dealt
round-robin to ``min(tasks.max, #partitions)`` tasks; each task config carries the whole
connector config plus ``task.assigned.partitions`` (``orders-0,orders-3``) and ``task.index``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from mirrorline.api import BadRequestError, Config, ConfigValue, ExactlyOnceSupport, NewTopic, SourceConnector

from mirrorline.connectors.mirror_client.clients import admin_client, check_distinct_clusters, connect_admin
from mirrorline.connectors.mirror_client.config import (
    ENABLED,
    OFFSET_SYNCS_TOPIC_LOCATION,
    SOURCE_CLUSTER_ALIAS,
    TARGET_CLUSTER_ALIAS,
    load_replication_policy,
)
from mirrorline.connectors.mirror_client.formats import source_partition
from mirrorline.connectors.source_mirror.topic_selection import SelectionAccessDenied, SelectionKey, TopicSelectionStore
from mirrorline.connectors.source_mirror.acls import TopicAclSync
from mirrorline.connectors.source_mirror.config import (BACKFILL_SPARK_CONF_PREFIX, BACKFILL_SPARK_ENABLED,
                                                        BACKFILL_SPARK_MIN_RECORDS, RECONCILE_INTERVAL_MS,
                                                        RECONCILE_SPARK_CONF_PREFIX, SOURCE_CONFIG_DEF,
                                                        TASK_ASSIGNED_PARTITIONS, TASK_INDEX)
from mirrorline.connectors.source_mirror.spark_jobs import HistoryHandoff, ScheduledReconcile, prefixed
from mirrorline.connectors.source_mirror.task import MirrorSourceTask
from mirrorline.connectors.source_mirror.topics import (
    ConfigFilter,
    TopicSelection,
    create_remote_topics,
    format_assigned,
    overload_warning,
    offset_syncs_topic_config,
    parse_partition,
    source_topics,
    sync_topic_configs,
    task_partitions,
    topic_filter_for,
    topic_partitions,
)

log = logging.getLogger(__name__)

VERSION = "0.1.0"
READ_COMMITTED = "read_committed"
#: The longest a refresh that finds the source unchanged goes without checking the remote topics.
REMOTE_CHECK_INTERVAL_S = 30.0
#: ... and in refresh intervals, when they are short.
REMOTE_CHECK_REFRESHES = 3


def remote_check_interval(refresh_s: float) -> float:
    """How often remote topics are checked while the source is unchanged (module docstring).

    >>> remote_check_interval(2), remote_check_interval(10), remote_check_interval(600)
    (6.0, 30.0, 30.0)
    """
    return float(min(REMOTE_CHECK_INTERVAL_S, REMOTE_CHECK_REFRESHES * refresh_s))


def source_isolation_level(config) -> str:
    """The source consumer's ``isolation.level``: ``source.consumer.*`` wins over ``consumer.*``; mirrorline's
    default is read_committed."""
    level = READ_COMMITTED
    for key in ("consumer.isolation.level", "source.consumer.isolation.level"):
        if key in config:
            level = str(config[key]).strip().lower()
    return level

_UNSET = object()


class MirrorSourceConnector(SourceConnector):
    """Replicates topics from a source cluster to a target cluster (MM2's MirrorSourceConnector)."""

    config_def = SOURCE_CONFIG_DEF
    aliases = ("org.apache.kafka.connect.mirror.MirrorSourceConnector",)
    # remote topics get their source's partition count, the offset-syncs topic its own settings: never a broker's
    creates_own_topics = True

    def version(self) -> str:
        return VERSION

    def task_class(self):
        return MirrorSourceTask

    def exactly_once_support(self, config) -> ExactlyOnceSupport:
        """SUPPORTED when the source consumer reads committed records only (MM2's rule).

        mirrorline's source consumer reads with ``isolation.level=read_committed`` unless
        ``source.consumer.isolation.level`` (or ``consumer.isolation.level``) says otherwise, so by
        default MirrorSource supports exactly-once; MM2's reads uncommitted unless told.
        """
        return ExactlyOnceSupport.SUPPORTED if source_isolation_level(config) == READ_COMMITTED \
            else ExactlyOnceSupport.UNSUPPORTED

    def validate(self, config) -> list[ConfigValue]:
        """The connector's own settings, plus MM2's reason when ``exactly.once.support=required`` cannot hold."""
        values = super().validate(config)
        if str(config.get("exactly.once.support", "")).strip().lower() == "required" \
                and source_isolation_level(config) != READ_COMMITTED:
            values.append(ConfigValue("exactly.once.support", config.get("exactly.once.support"), errors=[
                "MirrorSourceConnector can only provide exactly-once guarantees when its source consumer is "
                "configured with isolation.level set to 'read_committed'; otherwise, records from aborted and "
                "uncommitted transactions will be replicated from the source cluster to the target cluster."]))
        return values

    async def start(self, config: Config) -> None:
        self.config = config
        self.topics: dict[str, int] = {}
        self._next_remote_check = 0.0
        self._loops: list[asyncio.Task] = []
        if not config[ENABLED]:
            log.info("Flow %s->%s is not enabled; no topics are replicated",
                     config[SOURCE_CLUSTER_ALIAS], config[TARGET_CLUSTER_ALIAS])
            return
        originals = {k: str(v) for k, v in config.originals.items()}
        self.source_alias = config[SOURCE_CLUSTER_ALIAS]
        self.target_alias = config[TARGET_CLUSTER_ALIAS]
        flow = f"{self.source_alias}->{self.target_alias}|{self.context.name}"
        self.policy = load_replication_policy(originals)
        self._originals = originals
        self.selection = TopicSelection(self.source_alias, self.target_alias, self.policy,
                                        topic_filter_for(originals, None), config["heartbeats.replication.enabled"],
                                        on_skip=self.context.report_warning)
        self._selection_key = SelectionKey(self.context.name, self.source_alias, self.target_alias)
        self._stored_includes: object = _UNSET
        self._selection_denied = False
        self.config_filter = ConfigFilter(config["config.properties.exclude"], config["use.defaults.from"])
        clients = self.context.clients
        self.source_admin = admin_client(clients, originals, "source", f"{flow}|replication-source-admin")
        self.target_admin = admin_client(clients, originals, "target", f"{flow}|replication-target-admin")
        self.selection_store = TopicSelectionStore(clients, originals, f"{flow}|topic-selection", admin=self.target_admin)
        try:
            await connect_admin(self.source_admin, originals, "source")
            await connect_admin(self.target_admin, originals, "target")
            await check_distinct_clusters(config, self.source_admin, self.target_admin)
            await self._apply_stored_selection()
        except BaseException:
            await self.stop()  # the runtime never stops a connector whose start failed
            raise
        if config["emit.offset-syncs.enabled"]:
            await self._create_offset_syncs_topic()
        self.history_handoff = None
        if config[BACKFILL_SPARK_ENABLED]:
            self.history_handoff = HistoryHandoff(self.context, originals, clients, self.source_alias,
                                                  self.target_alias, self.policy, config[BACKFILL_SPARK_MIN_RECORDS],
                                                  prefixed(originals, BACKFILL_SPARK_CONF_PREFIX))
        await self._refresh(initial=True)
        if config[RECONCILE_INTERVAL_MS] > 0:
            scheduled = ScheduledReconcile(self.context, self.source_alias, self.target_alias,
                                           config[RECONCILE_INTERVAL_MS] / 1000,
                                           prefixed(originals, RECONCILE_SPARK_CONF_PREFIX))
            self._loops.append(self.context.run_in_background(scheduled.loop(), "scheduled-reconcile"))
        if config["sync.topic.acls.enabled"]:
            acl_sync = TopicAclSync(self.source_admin, self.target_admin, self.source_alias, self.target_alias,
                                    self.policy, self.selection.should_replicate, self.context.report_warning)
            self._loops.append(self.context.run_in_background(self._periodic(
                acl_sync.sync_topic_acls, config["sync.topic.acls.interval.seconds"], first_now=True), "sync-topic-acls"))
        if config["sync.topic.configs.enabled"]:
            self._loops.append(self.context.run_in_background(self._periodic(
                self._sync_configs, config["sync.topic.configs.interval.seconds"], first_now=True), "sync-topic-configs"))
        if config["refresh.topics.enabled"]:
            self._loops.append(self.context.run_in_background(self._periodic(
                self._refresh, config["refresh.topics.interval.seconds"], first_now=False), "refresh-topics"))

    async def _create_offset_syncs_topic(self) -> None:
        on_source = self.config[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
        admin = self.source_admin if on_source else self.target_admin
        name = self.policy.offset_syncs_topic(self.target_alias if on_source else self.source_alias)
        response = await admin.create_topics([NewTopic(name, 1, self.config["offset-syncs.topic.replication.factor"],
                                                       offset_syncs_topic_config())])
        for topic, error in response.items():
            if error is None:
                log.info("Created offset-syncs topic %s", topic)
                continue
            # MM2 goes on whatever the answer (e.g. no CREATE permission), but says what it found.
            error_code, detail = error.code, str(error)
            try:
                partitions = (await topic_partitions(admin, [topic])).get(topic)
            except Exception as exc:
                partitions, detail = None, f"{detail}; describing it failed too: {exc}"
            if partitions:
                log.info("Offset-syncs topic %s already exists (%d partition(s))", topic, partitions)
            else:
                log.warning("Could not create offset-syncs topic %s (error %s: %s) and cannot see it; offset "
                            "syncs cannot be written until it exists", topic, error_code, detail)

    async def _periodic(self, action, interval_s: float, first_now: bool) -> None:
        if not first_now:
            await asyncio.sleep(interval_s)
        while True:
            try:
                async with asyncio.timeout(self.config["admin.timeout.ms"] / 1000):
                    await action()
            except asyncio.CancelledError:
                raise
            except TimeoutError:  # its str() is empty: say what timed out
                log.warning("%s did not finish within admin.timeout.ms=%d; retrying in %ss",
                            action.__name__.strip("_"), self.config["admin.timeout.ms"], interval_s)
            except Exception as exc:  # MM2: scheduled admin work logs and retries at the next interval
                log.warning("%s failed, retrying in %ss: %r", action.__name__.strip("_"), interval_s, exc)
            await asyncio.sleep(interval_s)

    async def _apply_stored_selection(self) -> None:
        """Read this connector's stored topic selection and use it (or ``topics`` when none is stored)."""
        try:
            stored = await self.selection_store.read(self._selection_key)
        except SelectionAccessDenied as exc:
            # a principal with only MM2's ACLs: the mirroring controls are not in use, `topics` applies
            if not self._selection_denied:
                log.info("Connector %s uses its configured topics: %s", self.context.name, exc)
            self._selection_denied = True
            stored = None
        includes = None if stored is None else stored.includes
        if includes == self._stored_includes:
            return
        try:
            topic_filter = topic_filter_for(self._originals, includes)
        except ValueError as exc:
            message = (f"The stored topic selection of connector {self.context.name} is ignored: {exc}. Set a "
                       f"valid one with POST /admin/mirroring/topic-selection.")
            log.warning(message)
            self.context.report_warning(message)
            return
        self.selection.topic_filter = topic_filter
        first = self._stored_includes is _UNSET
        self._stored_includes = includes
        if includes is not None:
            log.info("Connector %s mirrors the topics of its stored topic selection: %s", self.context.name,
                     list(includes))
        elif not first:
            log.info("Connector %s has no stored topic selection any more; it mirrors its configured topics",
                     self.context.name)

    async def _refresh(self, initial: bool = False) -> None:
        if not initial:
            try:
                await self._apply_stored_selection()
            except Exception as exc:  # the topics found last are kept; the next refresh reads it again
                log.warning("Could not read the topic selection of connector %s (%s); keeping the current one "
                            "until the next refresh", self.context.name, exc)
        found = await source_topics(self.source_admin, self.selection)
        changed = found != self.topics
        # A remote topic may be missing (deleted, or its creation failed last time) even when the
        # source is unchanged: checked at least every remote_check_interval (module docstring).
        now = time.monotonic()
        if changed or now >= self._next_remote_check:
            self._next_remote_check = 0.0  # a check that raises is tried again at the next refresh
            remote = await create_remote_topics(self.source_admin, self.target_admin, self.source_alias,
                                                self.policy, found, self.config["replication.factor"],
                                                self.config_filter)
            complete = len(remote) == len(found) and all(
                remote.get(self.policy.format_remote_topic(self.source_alias, topic), 0) >= count
                for topic, count in found.items())
            if complete:
                self._next_remote_check = now + remote_check_interval(
                    self.config["refresh.topics.interval.seconds"]) - 1.0
        # only now: had the check raised, the next refresh would still see the change (and re-split)
        self.topics = found
        if self.history_handoff is not None:  # before task configs include a new topic's partitions
            try:
                await self.history_handoff.consider(found)
            except Exception as exc:  # streamed instead: slower, never wrong
                message = f"could not hand long histories to a Spark backfill ({exc}); they are streamed"
                log.warning("Connector %s: %s", self.context.name, message)
                self.context.report_warning(message)
        if changed and not initial:
            log.info("Source topics or partitions changed; re-splitting tasks over %d partitions",
                     sum(found.values()))
            self.context.request_task_reconfiguration()

    async def _sync_configs(self) -> None:
        await sync_topic_configs(self.source_admin, self.target_admin, self.source_alias, self.policy,
                                 sorted(self.topics), self.config_filter)

    def task_partitions(self, task_config) -> list[dict]:
        """The source partitions a task config assigns (``task.assigned.partitions``), keyed as offsets are."""
        alias = task_config.get(SOURCE_CLUSTER_ALIAS)
        return [source_partition(alias, *parse_partition(text))
                for text in str(task_config.get(TASK_ASSIGNED_PARTITIONS, "")).split(",") if text]

    def held_partitions(self) -> dict[tuple[str, int], str]:
        """This flow's partitions a bulk job holds (a backfill copying them), with the job's name."""
        held = {}
        for partition, job in self.context.partitions_held_by_jobs():
            if partition.get("cluster") == self.source_alias:
                held[(partition.get("topic"), partition.get("partition"))] = job
        return held

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.config[ENABLED] or not self.topics:
            return []
        held = self.held_partitions()
        partitions = [tp for tp in task_partitions(self.topics) if tp not in held]
        if held:
            log.info("Connector %s: %d partition(s) are held by job(s) %s and are not streamed until handed back",
                     self.context.name, len(held), ", ".join(sorted(set(held.values()))))
        if not partitions:
            return []
        count = min(max_tasks, len(partitions))
        self._warn_if_overloaded(len(partitions), count)
        base = {k: str(v) for k, v in self.config.originals.items()}
        return [{**base, TASK_ASSIGNED_PARTITIONS: format_assigned(partitions[i::count]), TASK_INDEX: str(i)}
                for i in range(count)]

    def _warn_if_overloaded(self, partitions: int, tasks: int) -> None:
        """Say so (log and connector status) when each task gets more than MAX_PARTITIONS_PER_TASK."""
        message = overload_warning(partitions, tasks)
        if message is not None and message != getattr(self, "_overload", None):
            log.warning("Connector %s: %s", self.context.name, message)
            self.context.report_warning(message)
        self._overload = message

    async def stop(self) -> None:
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops = []
        store = getattr(self, "selection_store", None)
        if store is not None:
            await store.close()
        for admin in (getattr(self, "source_admin", None), getattr(self, "target_admin", None)):
            if admin is not None:
                await admin.close()

    async def alter_offsets(self, config, offsets) -> None:
        for partition, offset in offsets:
            if set(partition) != {"cluster", "topic", "partition"} or not isinstance(partition.get("partition"), int) \
                    or partition["partition"] < 0:
                raise BadRequestError(f"Invalid source partition {partition}: expected "
                                      '{"cluster": <alias>, "topic": <name>, "partition": <int >= 0>}')
            if offset is not None and (set(offset) != {"offset"} or not isinstance(offset["offset"], int)
                                       or offset["offset"] < 0):
                raise BadRequestError(f"Invalid offset {offset}: expected {{\"offset\": <int >= 0>}} or null")
