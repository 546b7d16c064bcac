"""Kafka clients as the contract offers them to plugins: ``context.clients`` and ``launcher.clients``.

Connectors talk to Kafka with aiokafka's clients, but they never build client settings, producers or
admin requests the runtime already knows how to make: they ask :class:`KafkaClients`, which the
runtime implements (``mirrorline.clients``) and hands out on every context
(:attr:`~mirrorline.api.context.PluginContext.clients`) and on the
:class:`~mirrorline.api.launcher.WorkerLauncher` given to CLI commands. A test may hand a plugin its
own implementation (``mirrorline.testing.plugin_kit`` does).

What lives here is interface and data: the :class:`KafkaClients` methods, and the ACL types
(:class:`AclBinding`, :class:`AclFilter` and Kafka's numeric codes) that its ACL methods take and
return. Errors raised are aiokafka's error classes (``aiokafka.errors``) or the ones in
:mod:`mirrorline.api.errors`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

__all__ = [
    "AclBinding", "AclFilter", "AclOperation", "AclPermissionType", "KafkaClients", "PatternType", "ResourceType",
]

class ResourceType(IntEnum):
    """Kafka's ResourceType codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's PatternType codes (``ANY`` and ``MATCH`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    """Kafka's AclPermissionType codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    """One ACL: ``principal`` (``User:name``) from ``host`` (``*`` for any) is ``permission_type``-ed
    ``operation`` on the resource ``resource_name`` of ``resource_type``, matched as ``pattern_type``
    (LITERAL: that exact name, or ``*`` for every resource; PREFIXED: every name starting with it).
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        def name(value) -> str:
            return getattr(value, "name", str(value))
        return (f"{name(self.permission_type)} {self.principal} {name(self.operation)} from {self.host} on "
                f"{name(self.resource_type)} {name(self.pattern_type)} {self.resource_name!r}")


@dataclass(frozen=True)
class AclFilter:
    """Which ACLs :meth:`KafkaClients.describe_acls` returns; ``None`` and the ``ANY`` codes match everything.

    ``pattern_type=MATCH`` returns every binding that applies to ``resource_name`` (literal,
    wildcard and prefixed); ``ANY`` only bindings whose own name equals ``resource_name``.
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def exactly(cls, binding: AclBinding) -> AclFilter:
        """The filter matching ``binding`` and nothing else."""
        return cls(binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal,
                   binding.host, binding.operation, binding.permission_type)


class KafkaClients(ABC):
    """Builds Kafka clients from Java-style client settings and runs the admin requests MM2 needs.

    Settings are Kafka's own names (``bootstrap.servers``, ``security.protocol``, ``ssl.*``,
    ``sasl.*``, ``acks``...) as strings or parsed values. Admin methods take an aiokafka
    ``AIOKafkaAdminClient`` that has been started; partitions are aiokafka ``TopicPartition``.
    """

    @abstractmethod
    def client_kwargs(self, props: Mapping[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
        """``(kwargs, ignored keys)`` for an aiokafka client of ``role`` (producer, consumer or admin).

        ``kwargs`` go straight to ``AIOKafkaProducer`` / ``AIOKafkaConsumer`` /
        ``AIOKafkaAdminClient``; ``ignored`` lists the settings that mean nothing to that role.
        Raises :class:`~mirrorline.api.errors.ConfigError` with one line naming the setting (never a
        secret) when a security setting is wrong.
        """

    @abstractmethod
    def record_producer(self, **kwargs: Any) -> Any:
        """An unstarted aiokafka producer (``kwargs`` as from :meth:`client_kwargs`) for copying records.

        Unlike ``AIOKafkaProducer`` it writes records with neither key nor value, and waits (bounded by
        ``max_block_ms``, Java's ``max.block.ms``) for an explicit partition its metadata does not know
        yet, then raises the retriable :class:`~mirrorline.api.errors.PartitionNotAvailableError`.
        """

    @abstractmethod
    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        """Why these client settings cannot log in to the cluster (one line), or None.

        None also when no broker can be reached at all: the caller's own error says that.
        """

    @abstractmethod
    async def describe_consumer_group_state(self, admin: Any, group: str) -> str:
        """The state of ``group`` as the broker names it: "Empty", "Stable", ..., "Dead" when it does not exist."""

    @abstractmethod
    async def alter_consumer_group_offsets(self, admin: Any, group: str,
                                           offsets: Mapping[Any, int | tuple[int, str]]) -> None:
        """Set committed offsets of ``group`` (partition -> offset or ``(offset, metadata)``) as an admin would.

        The broker accepts it only while the group has no active members; otherwise the runtime's
        ``GroupNotEmptyError`` (a plain ``Exception``) is raised.
        """

    @abstractmethod
    async def incremental_alter_configs(self, admin: Any, topic: str, set_configs: Mapping[str, str],
                                        delete_configs: Iterable[str] = ()) -> None:
        """Set and/or delete configs of ``topic`` without touching any other config (IncrementalAlterConfigs)."""

    @abstractmethod
    async def describe_acls(self, admin: Any, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches. Needs DESCRIBE on the cluster (else aiokafka's
        ``ClusterAuthorizationFailedError``; ``SecurityDisabled`` when the cluster has no authorizer)."""

    @abstractmethod
    async def create_acls(self, admin: Any, bindings: Iterable[AclBinding]) -> list[tuple[AclBinding, Exception]]:
        """Create ``bindings``; returns the ones refused, with the error. Needs ALTER on the cluster
        (else ``ClusterAuthorizationFailedError`` is raised at the first binding)."""
