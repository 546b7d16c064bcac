"""Settings shared by MM2's three connectors, and the per-cluster client settings they derive.

Names and defaults are MirrorMaker 2's (``MirrorConnectorConfig``), so connector configs
written for Kafka Connect work unchanged. Client settings follow MM2's layering: for the
source cluster's consumer, ``source.cluster.*`` then ``consumer.*`` then ``source.consumer.*``
(later wins); likewise ``producer`` / ``admin`` and the ``target`` side.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from framework.api import ConfigDef, ConfigKey, ConfigError, Importance, NonEmptyString, OneOf, Range, RegexList, Type

from .filters import TOPICS_EXCLUDE_DEFAULT, TOPICS_INCLUDE_DEFAULT
from .policies import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy, SuffixReplicationPolicy

GROUP = "MirrorMaker"

SOURCE_CLUSTER_ALIAS = "source.cluster.alias"
TARGET_CLUSTER_ALIAS = "target.cluster.alias"
REPLICATION_POLICY_CLASS = "replication.policy.class"
ENABLED = "enabled"
ADMIN_TIMEOUT_MS = "admin.timeout.ms"
OFFSET_SYNCS_TOPIC_LOCATION = "offset-syncs.topic.location"
CONSUMER_POLL_TIMEOUT_MS = "consumer.poll.timeout.ms"

#: Names ``replication.policy.class`` accepts besides a Python ``module.Class`` path.
POLICY_ALIASES: dict[str, type[ReplicationPolicy]] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
    "SuffixReplicationPolicy": SuffixReplicationPolicy,
}

COMMON_CONFIG_DEF = ConfigDef([
    ConfigKey(ENABLED, Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Whether to replicate source->target (mm2 mode sets it from 'A->B.enabled')."),
    ConfigKey(SOURCE_CLUSTER_ALIAS, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              group=GROUP, doc="Alias of the source cluster."),
    ConfigKey(TARGET_CLUSTER_ALIAS, Type.STRING, default="target", importance=Importance.HIGH, group=GROUP,
              doc="Alias of the target cluster. Used in metrics and in the offset-syncs topic name."),
    ConfigKey(REPLICATION_POLICY_CLASS, Type.CLASS, default="org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
              importance=Importance.LOW, group=GROUP,
              doc="How remote topics are named: MM2's Default (A.orders) or Identity (orders) policy by their "
                  "Java or short names, SuffixReplicationPolicy (orders.A), or a Python module.Class path."),
    ConfigKey("replication.policy.separator", Type.STRING, default=".", importance=Importance.LOW, group=GROUP,
              doc="Separator between the cluster alias and the topic name in remote topic names."),
    ConfigKey("replication.policy.internal.topic.separator.enabled", Type.BOOLEAN, default="true",
              importance=Importance.LOW, group=GROUP,
              doc="Use the custom separator in internal topic names (offset-syncs, checkpoints) too."),
    ConfigKey(ADMIN_TIMEOUT_MS, Type.LONG, default=60000, validator=Range(min=1), importance=Importance.LOW,
              group=GROUP, doc="Timeout of each admin operation (listing, creating, describing topics)."),
    ConfigKey("topics", Type.LIST, default=TOPICS_INCLUDE_DEFAULT, validator=RegexList(),
              importance=Importance.HIGH, group=GROUP,
              doc="Topics to replicate: comma-separated regular expressions, each matching a whole name."),
    ConfigKey("topics.exclude", Type.LIST, default=TOPICS_EXCLUDE_DEFAULT, validator=RegexList(),
              importance=Importance.HIGH, group=GROUP,
              doc="Topics never to replicate: comma-separated regular expressions (full match)."),
    ConfigKey(OFFSET_SYNCS_TOPIC_LOCATION, Type.STRING, default="source", validator=OneOf(("source", "target")),
              importance=Importance.LOW, group=GROUP,
              doc="Cluster holding the offset-syncs topic: 'source' (MM2's default) or 'target' "
                  "(replicate with read-only access to the source)."),
    ConfigKey(CONSUMER_POLL_TIMEOUT_MS, Type.LONG, default=1000, validator=Range(min=1), importance=Importance.LOW,
              group=GROUP, doc="How long a task's consumer waits for records in one poll."),
])

_ROLES = ("consumer", "producer", "admin")


def client_props(originals: Mapping[str, Any], side: str, role: str) -> dict[str, str]:
    """Java-style client settings for ``role`` (consumer/producer/admin) on ``side`` (source/target).

    ``<side>.cluster.*`` (connection and security: bootstrap.servers, ssl.*, sasl.* ...), then
    ``<role>.*``, then ``<side>.<role>.*``; later layers win.
    """
    props: dict[str, str] = {}
    cluster_prefix = f"{side}.cluster."
    for key, value in originals.items():
        if key.startswith(cluster_prefix) and key not in (SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS):
            sub = key[len(cluster_prefix):]
            if not sub.startswith(_ROLES) and sub != "alias":
                props[sub] = str(value)
    for prefix in (f"{role}.", f"{side}.{role}."):
        for key, value in originals.items():
            if key.startswith(prefix):
                props[key[len(prefix):]] = str(value)
    if "bootstrap.servers" not in props:
        raise ConfigError(f"{side}.cluster.bootstrap.servers is required to reach the {side} cluster")
    return props


def load_replication_policy(config: Mapping[str, Any]) -> ReplicationPolicy:
    """Instantiate and configure the policy ``replication.policy.class`` names."""
    name = str(config.get(REPLICATION_POLICY_CLASS) or "DefaultReplicationPolicy")
    policy_class = POLICY_ALIASES.get(name)
    if policy_class is None:
        module_name, _, class_name = name.rpartition(".")
        try:
            policy_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError, ValueError):
            raise ConfigError(f"{REPLICATION_POLICY_CLASS}: cannot find replication policy {name!r}; use "
                              f"one of {', '.join(sorted(POLICY_ALIASES))} or a Python module.Class") from None
        if not (isinstance(policy_class, type) and issubclass(policy_class, ReplicationPolicy)):
            raise ConfigError(f"{REPLICATION_POLICY_CLASS}: {name} is not a ReplicationPolicy")
    policy = policy_class()
    policy.configure({k: str(v) for k, v in config.items()})
    return policy
