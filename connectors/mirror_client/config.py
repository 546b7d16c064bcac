"""Settings shared by MM2's three connectors, and the per-cluster client settings they derive.

Names and defaults are MirrorMaker 2's (``MirrorConnectorConfig``), so connector configs
written for Kafka Connect work unchanged. Client settings follow MM2's layering: for the
source cluster's consumer, ``source.cluster.*`` then ``consumer.*`` then ``source.consumer.*``
(later wins); likewise ``producer`` / ``admin`` and the ``target`` side.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mirrorline.api import (ConfigDef, ConfigKey, ConfigError, Importance, NonEmptyString, OneOf, Range, RegexList, Type,
                           Validator)
from mirrorline.api.hookspecs import registered_replication_policies

from .filters import TOPICS_EXCLUDE_DEFAULT, TOPICS_INCLUDE_DEFAULT
from .policies import (
    SEPARATOR_CONFIG,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    SuffixReplicationPolicy,
    check_separator,
)

GROUP = "MirrorMaker"

SOURCE_CLUSTER_ALIAS = "source.cluster.alias"
TARGET_CLUSTER_ALIAS = "target.cluster.alias"
REPLICATION_POLICY_CLASS = "replication.policy.class"
ENABLED = "enabled"
ADMIN_TIMEOUT_MS = "admin.timeout.ms"
OFFSET_SYNCS_TOPIC_LOCATION = "offset-syncs.topic.location"
CONSUMER_POLL_TIMEOUT_MS = "consumer.poll.timeout.ms"
ALLOW_SAME_CLUSTER_FLOW = "allow.same.cluster.flow"

log = logging.getLogger(__name__)


def _python_names(cls: type) -> list[str]:
    return [f"{cls.__module__}.{cls.__qualname__}", cls.__name__, *getattr(cls, "aliases", ())]


#: The built-in policies under every name ``replication.policy.class`` accepts for them: MM2's
#: Java class names, and the Python full and short class names.
POLICY_ALIASES: dict[str, type[ReplicationPolicy]] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    **{name: cls for cls in (DefaultReplicationPolicy, IdentityReplicationPolicy, SuffixReplicationPolicy)
       for name in _python_names(cls)},
}


def replication_policies() -> dict[str, type[ReplicationPolicy]]:
    """Every name ``replication.policy.class`` accepts, and its class: the built-ins
    (:data:`POLICY_ALIASES`), then the policies plugins register through the
    ``register_replication_policies`` hook (full name, simple name, ``aliases``). A plugin's
    name never replaces a built-in's; a class that is not a ReplicationPolicy is skipped."""
    names = dict(POLICY_ALIASES)
    for cls in registered_replication_policies():
        if not (isinstance(cls, type) and issubclass(cls, ReplicationPolicy)):
            log.warning("Ignoring %r registered as a replication policy: it is not a ReplicationPolicy subclass", cls)
            continue
        for name in _python_names(cls):
            names.setdefault(name, cls)
    return names


class SeparatorValidator(Validator):
    """``replication.policy.separator``: a non-empty string (see :func:`policies.check_separator`)."""

    def __call__(self, name: str, value: Any) -> None:
        check_separator(value)

    def __str__(self) -> str:
        return "non-empty string"


class PolicyValidator(Validator):
    """``replication.policy.class``: a name :func:`replication_policies` knows (nothing is imported)."""

    def __call__(self, name: str, value: Any) -> None:
        known = replication_policies()
        if value is not None and value not in known:
            raise ValueError(f"unknown replication policy; known policies are {', '.join(sorted(known))} (a plugin "
                             f"adds others through the register_replication_policies hook)")

    def recommended_values(self) -> list[str]:
        return sorted(replication_policies())

    def __str__(self) -> str:
        return "a built-in or plugin-registered replication policy"


REPLICATION_METRICS_LEVEL = "replication.metrics.level"
#: shared by MirrorSource (replication metrics) and MirrorCheckpoint (checkpoint latency): one declaration
REPLICATION_METRICS_LEVEL_KEY = ConfigKey(
    REPLICATION_METRICS_LEVEL, Type.STRING, default="partition", validator=OneOf(("partition", "topic")),
    importance=Importance.LOW, group=GROUP,
    doc="Beyond MM2, like Connect's metrics.recording.level: 'partition' (default) exports the replication "
        "metrics (MirrorSource) and checkpoint_latency_ms (MirrorCheckpoint) per partition, as MM2 tags them; "
        "'topic' exports one series per topic (the partition label empty: counters and lag summed over the "
        "topic's partitions, age and latency of its latest record; the latency of each group's latest "
        "checkpoint of the topic), so /metrics stays small at thousands of partitions. The dashboard and "
        "alert rules work at either level (docs/operations.md).")

COMMON_CONFIG_DEF = ConfigDef([
    ConfigKey(ENABLED, Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Whether to replicate source->target (mm2 mode sets it from 'A->B.enabled')."),
    ConfigKey(SOURCE_CLUSTER_ALIAS, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              group=GROUP, doc="Alias of the source cluster."),
    ConfigKey(TARGET_CLUSTER_ALIAS, Type.STRING, default="target", importance=Importance.HIGH, group=GROUP,
              doc="Alias of the target cluster. Used in metrics and in the offset-syncs topic name."),
    ConfigKey(REPLICATION_POLICY_CLASS, Type.CLASS, default="org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
              validator=PolicyValidator(), importance=Importance.LOW, group=GROUP,
              doc="How remote topics are named: MM2's Default (A.orders) or Identity (orders) policy by their "
                  "Java or Python names, SuffixReplicationPolicy (orders.A), or a policy a plugin registers "
                  "(register_replication_policies hook). No other module is imported."),
    ConfigKey(SEPARATOR_CONFIG, Type.STRING, default=".", validator=SeparatorValidator(), importance=Importance.LOW,
              group=GROUP, doc="Separator between the cluster alias and the topic name in remote topic names. "
                               "Must not be empty (mirrorline refuses it: it would turn cycle detection off)."),
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
    ConfigKey(ALLOW_SAME_CLUSTER_FLOW, Type.BOOLEAN, default="false", importance=Importance.LOW, group=GROUP,
              doc="mirrorline extension, not in MM2: let MirrorSource copy records between a source and a target "
                  "that are the same physical cluster (same cluster id). Refused by default because each topic "
                  "refresh would copy the "
                  "previous copies again (A.orders, A.A.orders ...) without end; allow it only with topics / "
                  "topics.exclude that keep the copies out."),
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
    """Instantiate and configure the policy ``replication.policy.class`` names.

    The name is looked up in :func:`replication_policies` only: no module is ever imported
    because a config names it (a REST caller must not make the worker import code). An
    unknown name is a ConfigError listing the known ones.
    """
    name = str(config.get(REPLICATION_POLICY_CLASS) or "DefaultReplicationPolicy").strip()
    known = replication_policies()
    policy_class = known.get(name)
    if policy_class is None:
        raise ConfigError(f"{REPLICATION_POLICY_CLASS}: unknown replication policy {name!r}; known policies are "
                          f"{', '.join(sorted(known))} (a plugin adds others through the "
                          f"register_replication_policies hook)")
    policy = policy_class()
    try:
        policy.configure({k: str(v) for k, v in config.items()})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return policy
