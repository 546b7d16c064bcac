"""The connector's view of topics: which source partitions to mirror, and keeping the target in step.

MM2's rules (reference §3.1-3.4): a topic is mirrored when the topic filter (or the heartbeat
rule) selects it, it is not internal, it is not a cycle, and its remote name is a legal
Kafka topic name. Remote topics get the source's partition count; partitions only grow;
nothing on the target is ever deleted. Topic configs are copied at creation (non-default,
non-sensitive, non-read-only, non-static, not excluded) and then synced incrementally.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api import Admin, ConfigSource, NewTopic, TopicAlreadyExistsError

from mirrorline.connectors.mirror_client.filters import TOPICS_INCLUDE_CONFIG, TopicFilter, compile_pattern_list
from mirrorline.connectors.mirror_client.policies import ReplicationPolicy, is_cycle
from mirrorline.connectors.source_mirror import metrics
from mirrorline.connectors.source_mirror.config import TASK_ASSIGNED_PARTITIONS

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
#: Partitions one MirrorSource task mirrors without slowing down; more get a warning naming tasks.max.
#: See docs/performance.md ("Partitions per task") for how it was chosen.
MAX_PARTITIONS_PER_TASK = 4000
#: ``task.assigned.partitions`` texts longer than this are stored compressed (see format_assigned):
#: well under the config topic's default max.message.bytes (1 MB) so a task record fits with its
#: connector settings; below it the text stays readable in GET /connectors/{name}/tasks.
COMPRESS_ABOVE = 64 * 1024
COMPRESSED_PREFIX = "zlib:"
#: The ``reason`` label values of the skipped-topics counter.
SKIP_REASONS = ("remote-name-too-long", "illegal-remote-name")
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
# Describing a topic CreateTopics just reported as existing: a few short tries before the next refresh.
_DESCRIBE_ATTEMPTS = 5
_DESCRIBE_BACKOFF_S = 0.2
#: topic verdicts remembered before starting over (a cluster whose topic names keep changing)
_MAX_VERDICTS = 200_000
_STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG
_DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG


@dataclass
class TopicSelection:
    """Decides which source topics a flow mirrors, and remembers the ones skipped (logged once each)."""

    source_alias: str
    target_alias: str
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    heartbeats_enabled: bool
    on_skip: Callable[[str], None] | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    # Each topic's verdict under ``_verdicts_of`` (the topic_filter they were reached with): every
    # refresh asks again about every topic of the cluster, and the regular expressions and policy
    # checks, thousands of topics each refresh, were a large part of an idle refresh.
    _verdicts: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    _verdicts_of: TopicFilter | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the skipped-topics series exist at 0 from the start, so panels and alerts read 0, not "No data"
        for reason in SKIP_REASONS:
            metrics.SKIPPED_TOPICS.labels(self.source_alias, self.target_alias, reason)

    def should_replicate(self, topic: str) -> bool:
        """MM2's shouldReplicateTopic, plus refusing remote names Kafka would reject.

        The answer depends on nothing but the name and the topic filter, so it is remembered until
        ``topic_filter`` is replaced (a new stored topic selection)."""
        if self._verdicts_of is not self.topic_filter or len(self._verdicts) > _MAX_VERDICTS:
            self._verdicts = {}
            self._verdicts_of = self.topic_filter
        verdict = self._verdicts.get(topic)
        if verdict is None:
            verdict = self._verdicts[topic] = self._decide(topic)
        return verdict

    def _decide(self, topic: str) -> bool:
        selected = self.topic_filter.should_replicate_topic(topic) or (
            self.heartbeats_enabled and self.policy.is_heartbeats_topic(topic))
        if not selected or self.policy.is_internal_topic(topic) or is_cycle(self.policy, self.target_alias, topic):
            return False
        remote = self.policy.format_remote_topic(self.source_alias, topic)
        if len(remote) > MAX_TOPIC_NAME_LENGTH or not _LEGAL_TOPIC.fullmatch(remote):
            if topic not in self.skipped:
                reason = (f"remote topic name {remote!r} is {len(remote)} characters, over Kafka's limit of "
                          f"{MAX_TOPIC_NAME_LENGTH}" if len(remote) > MAX_TOPIC_NAME_LENGTH
                          else f"remote topic name {remote!r} is not a legal Kafka topic name")
                self.skipped[topic] = reason
                metrics.SKIPPED_TOPICS.labels(self.source_alias, self.target_alias,
                                              SKIP_REASONS[0] if len(remote) > MAX_TOPIC_NAME_LENGTH
                                              else SKIP_REASONS[1]).inc()
                message = (f"Topic {topic} is not mirrored: {reason}. Shorten the source topic name or the "
                           f"cluster alias, or choose another replication policy.")
                log.warning(message)
                if self.on_skip is not None:
                    self.on_skip(message)
            return False
        return True


def topic_filter_for(originals: dict[str, Any], includes: list[str] | tuple[str, ...] | None) -> TopicFilter:
    """The connector's topic filter, with ``includes`` (a stored topic selection) in place of ``topics``.

    ``includes`` None keeps the configured ``topics``; ``topics.exclude`` applies either way.
    ValueError if a pattern does not compile.
    """
    if includes is None:
        return TopicFilter(originals)
    return TopicFilter({**originals, TOPICS_INCLUDE_CONFIG: list(includes)})


def assigned_topics(task_configs: list[dict[str, str]]) -> list[str]:
    """The source topics a connector's task configs assign (``task.assigned.partitions``), sorted."""
    return sorted({topic for config in task_configs
                   for topic, _ in parse_assigned(str(config.get(TASK_ASSIGNED_PARTITIONS, "")))})


async def topic_partitions(admin: Admin, topics: list[str]) -> dict[str, int]:
    """Partition counts of existing topics (missing or failing topics are left out)."""
    if not topics:
        return {}
    return await admin.partition_counts(topics)


async def source_topics(admin: Admin, selection: TopicSelection) -> dict[str, int]:
    """Mirrored source topics and their partition counts, from one request that describes every topic
    (listing the names first and describing the selected ones cost a second full Metadata answer per
    refresh, which at thousands of partitions is most of an idle mirror's refresh)."""
    counts = await admin.partition_counts(None)
    return {name: counts[name] for name in sorted(counts) if selection.should_replicate(name)}


class ConfigFilter:
    """Which topic config properties are copied (``config.properties.exclude``, ``use.defaults.from``)."""

    def __init__(self, exclude: list[str], use_defaults_from: str):
        self._exclude = compile_pattern_list("config.properties.exclude", exclude)
        self.replicate_source_defaults = use_defaults_from == "source"

    def target_config(self, entries: list[tuple], incremental: bool) -> dict[str, str | None]:
        """MM2's targetConfig: name -> value to set, or None to reset the target to its own default."""
        out: dict[str, str | None] = {}
        for name, value, read_only, source, sensitive, *_ in entries:
            is_default = source == _DEFAULT_CONFIG
            if read_only or sensitive or source == _STATIC_BROKER_CONFIG or self._exclude.fullmatch(name):
                continue
            if is_default and not self.replicate_source_defaults:
                if incremental:
                    out[name] = None
                continue
            out[name] = value
        return out


async def describe_topic_configs(admin: Admin, topics: list[str]) -> dict[str, list[tuple]]:
    """Config entries ``(name, value, read_only, source, sensitive)`` per topic."""
    if not topics:
        return {}
    return await admin.describe_topic_configs(topics)


async def create_remote_topics(source: Admin, target: Admin, source_alias: str,
                               policy: ReplicationPolicy, topics: dict[str, int], replication_factor: int,
                               config_filter: ConfigFilter) -> dict[str, int]:
    """Create missing remote topics and grow remote topics that have fewer partitions than their source.

    A remote topic that turns out to exist when we create it (TOPIC_ALREADY_EXISTS: another
    worker, an auto-creating client, or a describe that missed it) is described again and grown
    in the same round, so no task is started or re-split towards a remote topic that is still
    short of partitions. Returns the partition count of each remote topic as known at the end
    (a topic whose creation or growth failed keeps its last known count, or is left out); the
    next refresh retries what failed.
    """
    remote_of = {t: policy.format_remote_topic(source_alias, t) for t in topics}
    existing = await topic_partitions(target, sorted(remote_of.values()))
    missing = [t for t, remote in remote_of.items() if remote not in existing]
    if missing:
        configs = await describe_topic_configs(source, missing)
        new_topics = [NewTopic(remote_of[t], topics[t], replication_factor,
                               configs={k: v for k, v in config_filter.target_config(
                                   configs.get(t, []), incremental=False).items() if v is not None})
                      for t in missing]
        response = await target.create_topics(new_topics)
        already = []
        for name, error in response.items():
            if error is None:
                log.info("Created remote topic %s", name)
                existing[name] = next(n.num_partitions for n in new_topics if n.name == name)
            elif isinstance(error, TopicAlreadyExistsError):
                already.append(name)
            else:
                log.error("Could not create remote topic %s (error %s: %s); retrying at the next refresh",
                          name, error.code, error)
        if already:
            existing.update(await _describe_existing(target, already))
    grow = {remote_of[t]: count for t, count in topics.items()
            if remote_of[t] in existing and existing[remote_of[t]] < count}
    for remote, count in sorted(grow.items()):
        existing[remote] = await _grow(target, remote, existing[remote], count)
    return {remote: existing[remote] for remote in remote_of.values() if remote in existing}


#: How many topic names one log line lists before saying how many more there are
_NAMES_SHOWN = 10


async def _describe_existing(target: Admin, names: list[str]) -> dict[str, int]:
    """Partition counts of topics CreateTopics said exist; a fresh topic may take a moment to describe."""
    found: dict[str, int] = {}
    for attempt in range(_DESCRIBE_ATTEMPTS):
        found.update(await topic_partitions(target, [n for n in names if n not in found]))
        if len(found) == len(names):
            break
        await asyncio.sleep(_DESCRIBE_BACKOFF_S * (attempt + 1))
    for name in names:
        if name in found:
            log.info("Remote topic %s already exists with %d partition(s); it is grown now if its source "
                     "has more", name, found[name])
    unknown = [name for name in names if name not in found]
    if unknown:
        # one line, not one per topic: right after thousands of topics were created the target's
        # brokers may not describe them yet, which the next refresh usually finds over
        shown = ", ".join(unknown[:_NAMES_SHOWN]) + (f" and {len(unknown) - _NAMES_SHOWN} more"
                                                      if len(unknown) > _NAMES_SHOWN else "")
        log.warning("%d remote topic(s) already exist but cannot be described yet (%s); their partition "
                    "counts are checked again at the next refresh. If this repeats, check the target cluster's "
                    "brokers",
                    len(unknown), shown)
    return found


async def _grow(target: Admin, remote: str, current: int, wanted: int) -> int:
    """Grow ``remote`` from ``current`` to ``wanted`` partitions; returns the count it has afterwards."""
    try:
        await target.create_partitions({remote: wanted})
    except Exception as exc:
        # INVALID_PARTITIONS also answers a concurrent grow by another worker: look before warning.
        try:
            now = (await topic_partitions(target, [remote])).get(remote, current)
        except Exception:
            now = current
        if now >= wanted:
            log.info("Remote topic %s already has %d partitions", remote, now)
        else:
            log.warning("Could not increase partitions of remote topic %s from %d to %d (%s); retrying at the "
                        "next refresh", remote, now, wanted, exc)
        return now
    log.info("Increased partitions of remote topic %s from %d to %d to follow its source topic",
             remote, current, wanted)
    return wanted


async def sync_topic_configs(source: Admin, target: Admin,
                             source_alias: str, policy: ReplicationPolicy, topics: list[str],
                             config_filter: ConfigFilter) -> None:
    """Copy source topic configs to existing remote topics with IncrementalAlterConfigs (``target.incremental_alter_configs``)."""
    remote_of = {t: policy.format_remote_topic(source_alias, t) for t in topics}
    existing = await topic_partitions(target, sorted(remote_of.values()))
    replicated = [t for t in topics if remote_of[t] in existing]
    configs = await describe_topic_configs(source, replicated)
    for topic in replicated:
        wanted = config_filter.target_config(configs.get(topic, []), incremental=True)
        to_set = {k: v for k, v in wanted.items() if v is not None}
        to_delete = [k for k, v in wanted.items() if v is None]
        try:
            await target.incremental_alter_configs(remote_of[topic], to_set, to_delete)
        except Exception as exc:
            log.warning("Could not sync configs of %s to %s: %s", topic, remote_of[topic], exc)


def format_assigned(partitions: list[tuple[str, int]]) -> str:
    """A task's partitions as ``task.assigned.partitions`` holds them, compactly (beyond MM2).

    MM2 lists every partition (``orders-0,orders-1,orders-2``); at tens of thousands of partitions
    that outgrows the config topic's 1 MB records. Here a topic's partitions that form an
    arithmetic run of three or more are one entry, ``orders-0..2`` (step 1) or ``orders-1..7/3``
    (every third), other partitions stay in MM2's form, and entries are comma-separated in
    topic order. A text longer than :data:`COMPRESS_ABOVE` is stored as ``zlib:`` + base64 of its
    zlib compression (``:`` never occurs in a topic name). :func:`parse_assigned` reads all of
    these, MM2's plain list included.
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    entries = []
    for topic in sorted(by_topic):
        entries.extend(f"{topic}-{run}" for run in _runs(sorted(set(by_topic[topic]))))
    text = ",".join(entries)
    if len(text) > COMPRESS_ABOVE:
        text = COMPRESSED_PREFIX + base64.b64encode(zlib.compress(text.encode(), 9)).decode("ascii")
    return text


def _runs(partitions: list[int]) -> list[str]:
    """Sorted distinct partitions as run texts: ``3``, ``0..5``, ``1..7/3``."""
    out, i = [], 0
    while i < len(partitions):
        j = i + 1
        if j < len(partitions):
            step = partitions[j] - partitions[i]
            while j + 1 < len(partitions) and partitions[j + 1] - partitions[j] == step:
                j += 1
            if j - i >= 2:  # three or more: one entry
                out.append(f"{partitions[i]}..{partitions[j]}" + (f"/{step}" if step != 1 else ""))
                i = j + 1
                continue
        out.append(str(partitions[i]))
        i += 1
    return out


def parse_assigned(text: str) -> list[tuple[str, int]]:
    """The ``(topic, partition)`` pairs of a ``task.assigned.partitions`` value (:func:`format_assigned`'s
    forms and MM2's), in the order written. ValueError naming the entry that is not one of them."""
    text = text.strip()
    if text.startswith(COMPRESSED_PREFIX):
        text = zlib.decompress(base64.b64decode(text[len(COMPRESSED_PREFIX):])).decode()
    out = []
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        topic, _, run = entry.rpartition("-")
        try:
            if ".." in run:
                bounds, _, step = run.partition("/")
                first, _, last = bounds.partition("..")
                out.extend((topic, p) for p in range(int(first), int(last) + 1, int(step or 1)))
            else:
                out.append((topic, int(run)))
        except ValueError:
            raise ValueError(f"task.assigned.partitions: {entry!r} is not TOPIC-N, TOPIC-A..B or TOPIC-A..B/STEP")
        if not topic:
            raise ValueError(f"task.assigned.partitions: {entry!r} names no topic")
    return out


def overload_warning(partitions: int, tasks: int) -> str | None:
    """The warning for ``partitions`` dealt to ``tasks`` tasks when each gets more than
    :data:`MAX_PARTITIONS_PER_TASK`, naming the ``tasks.max`` that would fit; None when they fit."""
    per_task = -(-partitions // tasks) if tasks else partitions
    if per_task <= MAX_PARTITIONS_PER_TASK:
        return None
    needed = -(-partitions // MAX_PARTITIONS_PER_TASK)
    return (f"{partitions} partitions over {tasks} task(s) is {per_task} per task, more than the "
            f"{MAX_PARTITIONS_PER_TASK} one task handles without slowing down (each fetch lists every partition "
            f"of the task); raise tasks.max to at least {needed}")


def task_partitions(topics: dict[str, int]) -> list[tuple[str, int]]:
    """Every (topic, partition) to mirror, in a deterministic order."""
    return [(t, p) for t in sorted(topics) for p in range(topics[t])]


def format_partition(topic: str, partition: int) -> str:
    """Java's TopicPartition.toString: ``orders-3``."""
    return f"{topic}-{partition}"


def parse_partition(text: str) -> tuple[str, int]:
    """Inverse of :func:`format_partition` (split at the last ``-``)."""
    topic, _, partition = text.rpartition("-")
    return topic, int(partition)


def offset_syncs_topic_config() -> dict[str, Any]:
    """Configs of the offset-syncs topic: compacted, one partition."""
    return {"cleanup.policy": "compact"}
