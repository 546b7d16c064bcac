"""Replication policies: how MirrorMaker 2 names remote topics and recognises internal topics.

A policy answers "what is topic T called on the target when copied from cluster S"
(:meth:`ReplicationPolicy.format_remote_topic`) and the inverse questions "which cluster was T
immediately copied from" (:meth:`~ReplicationPolicy.topic_source`) and "what was it called there"
(:meth:`~ReplicationPolicy.upstream_topic`). Methods return ``None`` where Java returns ``null``.

* :class:`DefaultReplicationPolicy` - MM2's default: ``A.orders``.
* :class:`IdentityReplicationPolicy` - MM2's no-rename policy (acyclic topologies only).
* :class:`SuffixReplicationPolicy` - **not part of MM2**: ``orders.A``.

:func:`is_cycle` is MirrorSourceConnector's cycle check.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ReplicationPolicy",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "SuffixReplicationPolicy",
    "is_cycle",
    "java_split",
    "check_separator",
    "SEPARATOR_CONFIG",
    "SEPARATOR_DEFAULT",
    "INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG",
    "INTERNAL_TOPIC_SEPARATOR_ENABLED_DEFAULT",
    "SOURCE_CLUSTER_ALIAS_CONFIG",
]

SEPARATOR_CONFIG = "replication.policy.separator"
SEPARATOR_DEFAULT = "."
INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG = "replication.policy.internal.topic.separator.enabled"
INTERNAL_TOPIC_SEPARATOR_ENABLED_DEFAULT = True
SOURCE_CLUSTER_ALIAS_CONFIG = "source.cluster.alias"


def java_split(text: str, separator: str) -> list[str]:
    """Split ``text`` on the literal ``separator`` like Java ``String.split(Pattern.quote(sep))``.

    Trailing empty strings are dropped (so ``"..."`` gives ``[]``), a leading empty string is kept,
    and text without the separator comes back whole. An empty separator splits into characters.
    """
    if separator == "":
        return list(text) if text else [""]
    parts = text.split(separator)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def check_separator(separator: Any) -> None:
    """Raise ValueError unless ``separator`` can serve as ``replication.policy.separator``.

    A mirrorline rule beyond MM2: an empty separator is refused, because no topic name then
    splits into alias and upstream name, so cycle detection never fires and flows in both
    directions copy each other's copies without end.
    """
    if not isinstance(separator, str):
        raise ValueError(f"must be a string, got {separator!r}")
    if not separator:
        raise ValueError("must not be empty: with no separator remote topics cannot be told apart from local "
                         "ones, so cycle detection is off and replication can loop; use e.g. '.' (the default)")


def _java_parse_boolean(value: Any) -> bool:
    """Java ``Boolean.parseBoolean(value.toString())``: true only for "true", ignoring case."""
    return str(value).lower() == "true"


class ReplicationPolicy(ABC):
    """Base class of naming policies (MM2's ``ReplicationPolicy`` interface with its defaults)."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        if config is not None:
            self.configure(config)

    def configure(self, config: Mapping[str, Any]) -> None:
        """Apply configuration; connectors pass all their properties. The base ignores them."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name of ``topic`` on the target when replicated from cluster ``source_alias``."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was immediately replicated from, or None if not remote."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` on its immediate upstream cluster, or None if not remote."""

    def original_topic(self, topic: str) -> str:
        """Root name of ``topic``: follow ``upstream_topic`` until it is None or unchanged."""
        seen = {topic}
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic or upstream in seen:
                return topic
            seen.add(upstream)
            topic = upstream

    def heartbeats_topic(self) -> str:
        """Name of the heartbeats topic: ``heartbeats``."""
        return "heartbeats"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """Name of the offset-syncs topic for ``cluster_alias`` (the *other* cluster of the flow)."""
        return "mm2-offset-syncs." + cluster_alias + ".internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """Name of the checkpoints topic, on the target, for source cluster ``cluster_alias``."""
        return cluster_alias + ".checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True if ``topic`` is a heartbeats topic or a (multi-hop) replica of one."""
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        """True if ``topic`` is a checkpoints topic."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """True if ``topic`` is one of MM2's internal topics (offset syncs, checkpoints, ...)."""
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """True if ``topic`` must never be replicated: MM2-internal, Kafka-internal (``__``/``.``
        prefix) or a Connect internal topic (``-internal``/``.internal`` suffix)."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith("-internal")
            or topic.endswith(".internal")
        )


class DefaultReplicationPolicy(ReplicationPolicy):
    """MM2's default policy: remote topic = ``<source alias><separator><topic>`` (``A.orders``).

    Config: ``replication.policy.separator`` (default ``.``; empty is refused, see
    :func:`check_separator`) and
    ``replication.policy.internal.topic.separator.enabled`` (default true; when false, internal
    topic names keep ``.`` even with a custom separator). As in MM2, the flag is only read when the
    separator key is present in the same ``configure`` call.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.separator = SEPARATOR_DEFAULT
        self.internal_topic_separator_enabled = INTERNAL_TOPIC_SEPARATOR_ENABLED_DEFAULT
        super().__init__(config)

    def configure(self, config: Mapping[str, Any]) -> None:
        """Read the separator settings from ``config`` (other keys are ignored)."""
        if SEPARATOR_CONFIG in config:
            separator = config[SEPARATOR_CONFIG]
            try:
                check_separator(separator)
            except ValueError as exc:
                raise ValueError(f"{SEPARATOR_CONFIG}: {exc}") from None
            self.separator = separator
            if INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG in config:
                self.internal_topic_separator_enabled = _java_parse_boolean(
                    config[INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG]
                )

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """``source_alias + separator + topic``."""
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        """First separator-delimited segment (Java split semantics), None if fewer than 2 parts."""
        parts = java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        """``topic`` without its leading ``source + separator``, or None if not remote."""
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """``mm2-offset-syncs<isep><alias><isep>internal`` with the internal separator."""
        return "mm2-offset-syncs" + self._internal_separator() + cluster_alias + self._internal_suffix()

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """``<alias><isep>checkpoints<isep>internal`` with the internal separator."""
        return cluster_alias + self._checkpoints_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        """True if ``topic`` ends with ``<isep>checkpoints<isep>internal``."""
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """True if ``topic`` ends with ``<isep>internal``."""
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """MM2's policy that keeps topic names unchanged; heartbeats are still renamed (``A.heartbeats``).

    Topics whose name *ends with* ``heartbeats`` are handled exactly like
    :class:`DefaultReplicationPolicy`. For other topics ``topic_source`` is the configured
    ``source.cluster.alias`` (None when unset) and ``upstream_topic`` is the topic itself, so
    cycles cannot be detected: use only in acyclic topologies.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.source_cluster_alias: str | None = None
        super().__init__(config)

    def configure(self, config: Mapping[str, Any]) -> None:
        """Read the separator settings and ``source.cluster.alias``."""
        super().configure(config)
        if SOURCE_CLUSTER_ALIAS_CONFIG in config:
            self.source_cluster_alias = config[SOURCE_CLUSTER_ALIAS_CONFIG]

    def _looks_like_heartbeat(self, topic: str | None) -> bool:
        return topic is not None and topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """``topic`` unchanged, except heartbeat topics which get the default prefix."""
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        """The configured source alias, except for heartbeat topics (default rule)."""
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        """``topic`` itself, except for heartbeat topics (default rule)."""
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic

    def original_topic(self, topic: str) -> str:
        """``topic`` itself, except for heartbeat topics (default rule)."""
        if self._looks_like_heartbeat(topic):
            return super().original_topic(topic)
        return topic


class SuffixReplicationPolicy(DefaultReplicationPolicy):
    """Remote topic = ``<topic><separator><source alias>`` (``orders.A``). **Not part of MM2.**

    A mirrorline extension for deployments that want names to sort by original topic. A topic is
    remote when it contains the separator with non-empty text on both sides of its *last*
    occurrence: that last segment is the source alias and the text before it the upstream name
    (``orders.A.B`` -> source ``B``, upstream ``orders.A``, original ``orders``). Like the default
    policy it cannot tell a genuine replica from a local topic that merely contains the separator.
    Internal topic names, separator settings and the heartbeats topic are as in
    :class:`DefaultReplicationPolicy`. Java MM2 workers cannot interpret these names.
    """

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """``topic + separator + source_alias``."""
        return topic + self.separator + source_alias

    def _split(self, topic: str) -> tuple[str, str] | None:
        if self.separator == "":
            return None
        head, sep, tail = topic.rpartition(self.separator)
        if not sep or not head or not tail:
            return None
        return head, tail

    def topic_source(self, topic: str) -> str | None:
        """The segment after the last separator, or None if ``topic`` is not a suffix-style replica."""
        split = self._split(topic)
        return None if split is None else split[1]

    def upstream_topic(self, topic: str) -> str | None:
        """The text before the last separator, or None if ``topic`` is not a suffix-style replica."""
        split = self._split(topic)
        return None if split is None else split[0]


def is_cycle(policy: ReplicationPolicy, target_alias: str, topic: str) -> bool:
    """MirrorSourceConnector's ``isCycle``: would replicating source ``topic`` to the cluster
    ``target_alias`` send data back to a cluster it already came from?

    Walks the topic's upstream chain: a cycle if any hop's ``topic_source`` equals the flow's
    **target** alias; stops with "no cycle" when the source is None or ``upstream_topic`` is None
    or unchanged (identity policy). E.g. ``B.A.orders`` is a cycle for flows to ``A`` and ``B``.
    """
    seen = set()
    while topic not in seen:
        seen.add(topic)
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
    return False
