"""Kafka Connect's topic creation for source connectors (KIP-158): the settings, the groups, and the rules.

A source connector's config may say how the topics its tasks write to are created, in groups:

- ``topic.creation.groups``: aliases of groups besides ``default``, in order of precedence;
- ``topic.creation.<group>.include`` / ``.exclude``: lists of regular expressions (Python ``re``) a
  topic's whole name must match / must not match to belong to the group (exclusion wins);
- ``topic.creation.<group>.replication.factor`` / ``.partitions``: ``-1`` for the broker's default,
  else at least 1; required for ``default``, and a listed group without them takes ``default``'s;
- ``topic.creation.<group>.<any other name>``: a topic config (``cleanup.policy``, ``retention.ms``...).

The rules are Connect's. Topic creation is *in effect* for a connector when the worker's
``topic.creation.enable`` is true (the default) and the connector's config has any setting whose
name starts with ``topic.creation.``; then ``default``'s replication factor and partitions are
required. ``default`` always exists and takes every topic no listed group takes: its own
``include`` / ``exclude`` are ignored, and listing ``default`` in ``topic.creation.groups`` only
logs a warning. A topic belongs to the first listed group whose ``include`` matches it and whose
``exclude`` does not; a topic no listed group takes (for example, one a listed group excludes)
gets ``default``'s settings. A group with an empty ``include`` takes no topic.

Before a task's first record to a topic, :class:`TopicCreator` describes the topic with the
worker's admin client and creates it with its group's settings if it is missing; a topic found
(or created meanwhile by someone else) is remembered and never looked up again. A creation the
broker refuses fails the task, naming the topic, the group and, for an authorization failure,
the ACL operation the admin client's principal lacks.

Beyond Connect, which checks these settings only when a task starts (failing it), the enriched
keys (:func:`validate`) are checked by ``config/validate`` and by a create or update over REST,
each problem on its own field: ``topic.creation.default.partitions=0`` is a 400.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.config import (NO_DEFAULT, ConfigDef, ConfigKey, ConfigValue, Importance, Type, Validator,
                                   split_list)
from mirrorline.api.errors import ConfigError, ConnectError, KafkaError, UnknownTopicOrPartitionError
from mirrorline.api.kafka import NewTopic
from mirrorline.api.records import ConnectorTaskId
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.runtime.connector_config import UniqueAliases

log = logging.getLogger(__name__)

PREFIX = "topic.creation."
GROUPS = "topic.creation.groups"
DEFAULT_GROUP = "default"
INCLUDE = "include"
EXCLUDE = "exclude"
REPLICATION_FACTOR = "replication.factor"
PARTITIONS = "partitions"
#: ``partitions`` / ``replication.factor`` value that asks for the broker's default.
BROKER_DEFAULT = -1
#: The config group of these settings, as Connect names it.
GROUP_NAME = "Topic Creation"
_OWN = (INCLUDE, EXCLUDE, REPLICATION_FACTOR, PARTITIONS)

# Kafka error codes the creator tells apart.
_UNKNOWN_TOPIC_OR_PARTITION = 3
_LEADER_NOT_AVAILABLE = 5
_TOPIC_AUTHORIZATION_FAILED = 29
_CLUSTER_AUTHORIZATION_FAILED = 31
_TOPIC_ALREADY_EXISTS = 36


@dataclass(frozen=True)
class PartitionCount(Validator):
    """``-1`` (the broker's default) or at least 1 (Connect's message)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value != BROKER_DEFAULT and value < 1:
            raise ValueError("Number of partitions must be positive, or -1 to use the broker's default")

    def __str__(self) -> str:
        return "Positive number, or -1 to use the broker's default"


@dataclass(frozen=True)
class ReplicationFactor(Validator):
    """``-1`` (the broker's default) or 1..32767 (a Kafka SHORT; Connect's message)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if value != BROKER_DEFAULT and value < 1:
            raise ValueError("Replication factor must be positive and not larger than the number of brokers in "
                             "the Kafka cluster, or -1 to use the broker's default")
        if value > 32767:
            raise ValueError("Replication factor must be at most 32767 (a 16-bit number)")

    def __str__(self) -> str:
        return "Positive number not larger than the number of brokers in the Kafka cluster, or -1 to use the " \
               "broker's default"


@dataclass(frozen=True)
class TopicPatterns(Validator):
    """A list of regular expressions that all compile (Python ``re``; Connect's message)."""

    def __call__(self, name: str, value: Any) -> None:
        for pattern in value or ():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"Syntax error in regular expression: {exc} in {pattern!r}") from None

    def __str__(self) -> str:
        return "list of regular expressions"


_INCLUDE_DOC = ("A list of regular expression literals used to match the topic names used by the source connector. "
                "This list is used to include topics that should be created using the topic settings defined by "
                "this group.")
_EXCLUDE_DOC = ("A list of regular expression literals used to match the topic names used by the source connector. "
                "This list is used to exclude topics from being created with the topic settings defined by this "
                "group. Note that exclusion rules have precedent and override any inclusion rules for the topics.")
_RF_DOC = ("The replication factor for new topics created for this connector using this group. This value may be "
           "-1 to use the broker's default replication factor, or may be a positive number not larger than the "
           "number of brokers in the Kafka cluster. A value larger than the number of brokers in the Kafka cluster "
           "will result in an error when the new topic is created. For the default group this configuration is "
           "required. For any other group defined in topic.creation.groups this config is optional and if it's "
           "missing it gets the value of the default group")
_PARTITIONS_DOC = ("The number of partitions new topics created for this connector. This value may be -1 to use the "
                   "broker's default number of partitions, or a positive number representing the desired number of "
                   "partitions. For the default group this configuration is required. For any other group defined in "
                   "topic.creation.groups this config is optional and if it's missing it gets the value of the "
                   "default group")

#: The setting every source connector has (Connect's ``SourceConnectorConfig``); the per-group ones
#: depend on the config and are made by :func:`group_keys`.
SOURCE_CONFIG_DEF = ConfigDef([
    ConfigKey(GROUPS, Type.LIST, default="", importance=Importance.LOW, validator=UniqueAliases("topic creation group"),
              group=GROUP_NAME, order=1, display_name="Topic Creation Groups",
              doc="Groups of configurations for topics created by source connectors. The default group always "
                  "exists; see topic.creation.default.* and topic.creation.<group>.* (used when the worker's "
                  "topic.creation.enable is true and the connector has any topic.creation.* setting)."),
])


def uses_topic_creation(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` has any ``topic.creation.*`` setting (Connect's ``usesTopicCreation``)."""
    return any(str(key).startswith(PREFIX) for key in config)


def listed_groups(config: Mapping[str, Any]) -> list[str]:
    """The aliases ``topic.creation.groups`` lists, each once, in order, without ``default``."""
    value = config.get(GROUPS) or ""
    listed = value if isinstance(value, (list, tuple)) else split_list(str(value))
    return [g for g in dict.fromkeys(str(a) for a in listed if str(a)) if g != DEFAULT_GROUP]


def group_keys(alias: str, replication_default: Any = None, partitions_default: Any = None,
               patterns: Validator | None = TopicPatterns()) -> list[ConfigKey]:
    """The four ``topic.creation.<alias>.*`` keys, with these defaults for replication factor and partitions."""
    prefix = f"{PREFIX}{alias}."
    group = f"{GROUP_NAME}: {alias}"
    return [
        ConfigKey(prefix + INCLUDE, Type.LIST, default=".*" if alias == DEFAULT_GROUP else "", validator=patterns,
                  importance=Importance.LOW, group=group, order=1, doc=_INCLUDE_DOC,
                  display_name=f"Inclusion Topic Pattern for {alias}"),
        ConfigKey(prefix + EXCLUDE, Type.LIST, default="", validator=patterns, importance=Importance.LOW, group=group,
                  order=2, doc=_EXCLUDE_DOC, display_name=f"Exclusion Topic Pattern for {alias}"),
        ConfigKey(prefix + REPLICATION_FACTOR, Type.INT, default=replication_default, validator=ReplicationFactor(),
                  importance=Importance.LOW, group=group, order=3, doc=_RF_DOC,
                  display_name=f"Replication Factor for Topics in {alias}"),
        ConfigKey(prefix + PARTITIONS, Type.INT, default=partitions_default, validator=PartitionCount(),
                  importance=Importance.LOW, group=group, order=4, doc=_PARTITIONS_DOC,
                  display_name=f"Partition Count for Topics in {alias}"),
    ]


def default_group_keys() -> ConfigDef:
    """The ``topic.creation.default.*`` keys: replication factor and partitions required; include and
    exclude are declared (as in Connect) but never used."""
    return ConfigDef(group_keys(DEFAULT_GROUP, NO_DEFAULT, NO_DEFAULT, None))


def validate(config: Mapping[str, Any]) -> list[tuple[ConfigKey, ConfigValue]]:
    """Every ``topic.creation.<group>.*`` key (``default`` first, then each listed group) with its
    validated value; a listed group's replication factor and partitions default to ``default``'s."""
    defaults = default_group_keys()
    values = defaults.validate(config)
    out = [(defaults.keys[v.name], v) for v in values]
    parsed = {v.name: v.value for v in values if not v.errors}
    replication = parsed.get(f"{PREFIX}{DEFAULT_GROUP}.{REPLICATION_FACTOR}")
    partitions = parsed.get(f"{PREFIX}{DEFAULT_GROUP}.{PARTITIONS}")
    for alias in listed_groups(config):
        # when default's own values are bad they are reported there; the group then just has none
        keys = ConfigDef(group_keys(alias, replication, partitions))
        out += [(keys.keys[v.name], v) for v in keys.validate(config)]
    return out


@dataclass(frozen=True)
class TopicCreationGroup:
    """One group: which topics it takes and the settings they are created with."""

    name: str
    include: re.Pattern
    exclude: re.Pattern
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whether the whole topic name matches ``include`` and not ``exclude`` (Java's ``matches``)."""
        return self.include.fullmatch(topic) is not None and self.exclude.fullmatch(topic) is None

    def describe(self) -> str:
        """The group and its settings, for log lines and failure messages."""
        def shown(value: int) -> str:
            return "broker default" if value == BROKER_DEFAULT else str(value)
        configs = ", ".join(f"{k}={v}" for k, v in sorted(self.configs.items()))
        return (f"group {self.name} (partitions={shown(self.partitions)}, replication.factor="
                f"{shown(self.replication_factor)}{', ' + configs if configs else ''})")


@dataclass(frozen=True)
class TopicCreation:
    """A connector's topic creation groups: the listed ones in order, then ``default``."""

    groups: tuple[TopicCreationGroup, ...]
    default: TopicCreationGroup

    @classmethod
    def from_config(cls, config: Mapping[str, Any], enabled: bool) -> TopicCreation | None:
        """The groups of a source connector's raw config, or None when topic creation is not in effect
        (the worker's ``topic.creation.enable`` is false, or no ``topic.creation.*`` setting is given).

        Raises :class:`ConfigError` naming each bad field."""
        if not enabled or not uses_topic_creation(config):
            return None
        if DEFAULT_GROUP in split_list(str(config.get(GROUPS) or "")):
            log.warning("'%s' topic creation group always exists and does not need to be listed explicitly",
                        DEFAULT_GROUP)
        checked = validate(config)
        errors = [f"{value.name}: {error}" for _, value in checked for error in value.errors]
        errors += [f"{GROUPS}: {e}" for v in SOURCE_CONFIG_DEF.validate(config) for e in v.errors]
        if errors:
            raise ConfigError("Invalid topic creation settings: " + "; ".join(errors))
        parsed = {value.name: value.value for _, value in checked}
        groups = tuple(_group(alias, parsed, config) for alias in listed_groups(config))
        return cls(groups, _group(DEFAULT_GROUP, parsed, config))

    def group_for(self, topic: str) -> TopicCreationGroup:
        """The first listed group that takes ``topic``, else ``default``."""
        for group in self.groups:
            if group.matches(topic):
                return group
        return self.default


def _group(alias: str, parsed: Mapping[str, Any], config: Mapping[str, Any]) -> TopicCreationGroup:
    prefix = f"{PREFIX}{alias}."
    if alias == DEFAULT_GROUP:  # takes every topic the listed groups do not: its own include/exclude are ignored
        include, exclude = re.compile(".*", re.S), re.compile("")
    else:
        include = re.compile("|".join(parsed[prefix + INCLUDE]))
        exclude = re.compile("|".join(parsed[prefix + EXCLUDE]))
    configs = {key[len(prefix):]: str(value) for key, value in config.items()
               if str(key).startswith(prefix) and key[len(prefix):] not in _OWN}
    return TopicCreationGroup(alias, include, exclude, parsed[prefix + PARTITIONS],
                              parsed[prefix + REPLICATION_FACTOR], configs)


class TopicCreationError(ConnectError):
    """A topic a task writes to could not be created: the task fails with this message."""


class TopicCreator:
    """Creates the topics one source task writes to, before its first record to each (Connect's
    ``maybeCreateTopic``), with the worker's admin client.

    ``known`` holds the topics found or created; the task checks it before calling :meth:`ensure`,
    so a topic costs one set lookup per record once known. Retriable broker errors are raised as
    they are (the task retries them, bounded); anything else is a :class:`TopicCreationError`.
    """

    def __init__(self, task_id: ConnectorTaskId, creation: TopicCreation, admin_props: Mapping[str, Any]):
        self.task_id = task_id
        self.creation = creation
        self.known: set[str] = set()
        self._admin_props = dict(admin_props)
        self._admin: KafkaAdmin | None = None

    async def _client(self) -> KafkaAdmin:
        if self._admin is None:
            admin = KafkaAdmin.from_settings(self._admin_props)
            try:
                await admin.start()
            except BaseException:
                await admin.close()
                raise
            self._admin = admin
        return self._admin

    async def ensure(self, topic: str) -> None:
        """Make sure ``topic`` exists: describe it, and create it with its group's settings if missing."""
        if topic in self.known:
            return
        admin = await self._client()
        log.info("Task %s will send records to topic '%s' for the first time; checking whether it exists",
                 self.task_id, topic)
        described = {entry.name: entry.error for entry in await admin.describe_topics([topic])}
        found = described.get(topic, UnknownTopicOrPartitionError(code=_UNKNOWN_TOPIC_OR_PARTITION))
        code = 0 if found is None else found.code
        if code in (0, _LEADER_NOT_AVAILABLE):  # the latter: it exists, its leaders are being elected
            log.info("Task %s: topic '%s' already exists", self.task_id, topic)
            self.known.add(topic)
            return
        if code == _TOPIC_AUTHORIZATION_FAILED:
            raise TopicCreationError(
                f"Task {self.task_id} is not authorized to describe topic '{topic}' (TOPIC_AUTHORIZATION_FAILED): "
                f"the principal of the worker's admin client (admin.* worker settings, admin.override.* connector "
                f"settings) needs the DESCRIBE operation on topic '{topic}' to find out whether it must be created. "
                f"Grant it, then restart the task")
        if code != _UNKNOWN_TOPIC_OR_PARTITION:
            raise found  # the broker's answer, naming the topic
        group = self.creation.group_for(topic)
        log.info("Task %s: creating topic '%s' with topic creation %s", self.task_id, topic, group.describe())
        timeout_ms = int(self._admin_props.get("request.timeout.ms") or 30_000)
        answer = await admin.create_topics([NewTopic(topic, group.partitions, group.replication_factor,
                                                     group.configs)], timeout_ms)
        error = answer.get(topic)
        code = 0 if error is None else error.code
        if code == 0:
            log.info("Task %s: created topic '%s' using topic creation %s", self.task_id, topic, group.describe())
        elif code == _TOPIC_ALREADY_EXISTS:
            log.info("Task %s: found existing topic '%s' (created meanwhile by someone else)", self.task_id, topic)
        elif code in (_TOPIC_AUTHORIZATION_FAILED, _CLUSTER_AUTHORIZATION_FAILED):
            name = "TOPIC_AUTHORIZATION_FAILED" if code == _TOPIC_AUTHORIZATION_FAILED else "CLUSTER_AUTHORIZATION_FAILED"
            raise TopicCreationError(
                f"Task {self.task_id} failed to create topic '{topic}' with topic creation {group.describe()}: not "
                f"authorized ({name}). The principal of the worker's admin client (admin.* worker settings, "
                f"admin.override.* connector settings) needs the CREATE operation on topic '{topic}' (or on the "
                f"cluster resource). Grant it, or create the topic yourself, then restart the task")
        else:
            assert error is not None
            detail = str(error)
            if error.retriable:
                raise KafkaError(f"creating topic '{topic}': {detail}", code=error.code, retriable=True) from error
            raise TopicCreationError(
                f"Task {self.task_id} failed to create topic '{topic}' with topic creation {group.describe()}: "
                f"{detail}. Fix the topic.creation.{group.name}.* settings (or create the topic yourself), then "
                f"restart the task")
        self.known.add(topic)

    async def close(self) -> None:
        """Close the admin client, if one was started."""
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()
