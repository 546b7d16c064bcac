"""Connectors plan the work; tasks do it. This module is the connector half of the contract.

Lifecycle, as the runtime drives it (each call on the worker's event loop, one at a time
per connector instance):

1. The class is instantiated with no arguments, then ``initialize(context)``.
2. ``await start(config)`` with the connector's config parsed by :attr:`Connector.config_def`
   merged with the framework's own connector settings (``name``, ``connector.class``,
   ``tasks.max`` ...). Raising here marks the connector FAILED with the trace; raising
   :class:`~mirrorline.api.errors.ConfigError` also fails a REST create with 400.
3. ``await task_configs(max_tasks)``: a list of at most ``max_tasks`` string maps, one per
   task to run. It is called after ``start`` and again whenever the connector calls
   ``context.request_task_reconfiguration()``. Returning ``[]`` runs no tasks.
4. ``await stop()`` when the connector is deleted, paused into STOPPED, reconfigured or the
   worker shuts down. It is called once per successful ``start``; it is not guaranteed to
   be called if the process is killed.

``validate`` may run on a fresh instance that was never started (REST ``config/validate``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from mirrorline.api.config import Config, ConfigDef, ConfigValue

if TYPE_CHECKING:
    from mirrorline.api.context import ConnectorContext
    from mirrorline.api.sink import SinkTask
    from mirrorline.api.task import SourceTask


class Connector(ABC):
    """Base of every connector: declares its config, starts, splits the work into task configs, stops."""

    #: The connector's settings, declared once: they drive validation, REST and the docs.
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: Extra names ``connector.class`` may use for this connector (e.g. a Java class name).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: ``"source"`` or ``"sink"``, as shown by the REST API.
    type: ClassVar[str] = "unknown"

    context: ConnectorContext

    def version(self) -> str:
        """The connector's version string (shown by ``GET /connector-plugins``)."""
        return "unknown"

    def initialize(self, context: ConnectorContext) -> None:
        """Receive the context; called once, before ``start``. Override only to add set-up, then call super."""
        self.context = context

    @abstractmethod
    async def start(self, config: Config) -> None:
        """Begin: read the config, connect to what must be watched, start background work."""

    @abstractmethod
    def task_class(self) -> type[SourceTask] | type[SinkTask]:
        """The task class the runtime instantiates for each task config."""

    @abstractmethod
    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Split the work into at most ``max_tasks`` task configs (string to string maps).

        Each map is passed to one task's ``start``; include whatever the task needs
        (the runtime does not merge the connector config in). Keep it deterministic: the
        runtime restarts tasks only when the list changes.
        """

    @abstractmethod
    async def stop(self) -> None:
        """Stop background work and release resources. Must return promptly."""

    def validate(self, config: Mapping[str, Any]) -> list[ConfigValue]:
        """Check a raw config, returning every problem found; never raises for bad input.

        The default checks each key against :attr:`config_def`. Override to add
        cross-field rules: call ``super().validate(config)`` and append errors to the values.
        """
        return self.config_def.validate(config)


class ExactlyOnceSupport(str, Enum):
    """What :meth:`SourceConnector.exactly_once_support` answers (Connect's ``ExactlyOnceSupport``)."""

    #: The connector's tasks provide exactly-once delivery when the runtime writes in transactions.
    SUPPORTED = "SUPPORTED"
    #: They do not (e.g. they cannot resume exactly from the offsets they returned).
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(str, Enum):
    """What :meth:`SourceConnector.can_define_transaction_boundaries` answers (Connect's enum of that name)."""

    #: The connector's tasks define transaction boundaries through ``context.transaction_context``.
    SUPPORTED = "SUPPORTED"
    #: They do not; ``transaction.boundary=connector`` is refused for this connector.
    UNSUPPORTED = "UNSUPPORTED"


class SourceConnector(Connector):
    """A connector whose tasks read from an external system and write records to Kafka.

    Exactly-once (Kafka Connect's KIP-618, distributed workers with
    ``exactly.once.source.support=enabled``): the runtime writes each task's records and source
    offsets in one Kafka transaction, so a restarted task resumes exactly after what was
    committed. A connector says whether its tasks can honour that with
    :meth:`exactly_once_support` (checked when ``exactly.once.support=required``) and whether they
    can choose where transactions end with :meth:`can_define_transaction_boundaries` (checked when
    ``transaction.boundary=connector``).
    """

    type: ClassVar[str] = "source"
    #: True when the connector itself creates every topic its tasks write to, before they write (as
    #: MirrorSource creates remote topics with their source's partition count). The task's producer
    #: then never lets a broker auto-create a topic: a record for a topic that is not there yet waits
    #: for it. False (the default): unless the connector has Kafka Connect's ``topic.creation.*``
    #: settings (the worker then creates missing topics with them), the producer lets the broker's
    #: ``auto.create.topics.enable`` decide, as Kafka Connect's producer does.
    creates_own_topics: ClassVar[bool] = False

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport | None:
        """Whether this connector's tasks give exactly-once delivery with ``config`` (raw settings).

        Called on a fresh instance (never started) when a connector with
        ``exactly.once.support=required`` is validated or created; anything but
        :attr:`ExactlyOnceSupport.SUPPORTED` refuses it with the reason. The default, None, means
        "not declared": ``required`` is refused, ``requested`` (the default) runs anyway.
        Connect's ``SourceConnector.exactlyOnceSupport``.
        """
        return None

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> ConnectorTransactionBoundaries:
        """Whether this connector's tasks define their own transaction boundaries with ``config``.

        Checked when ``transaction.boundary=connector``: anything but
        :attr:`ConnectorTransactionBoundaries.SUPPORTED` refuses the config. Tasks then say where
        transactions end through ``self.context.transaction_context``
        (:class:`~mirrorline.api.context.TransactionContext`). The default is UNSUPPORTED.
        Connect's ``SourceConnector.canDefineTransactionBoundaries``.
        """
        return ConnectorTransactionBoundaries.UNSUPPORTED

    async def alter_offsets(self, config: Mapping[str, Any],
                            offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        """Check offsets a user wants written (``PATCH /connectors/{name}/offsets``) before they are.

        Called on a stopped connector with (source partition, offset or None to remove)
        pairs. Raise :class:`~mirrorline.api.errors.BadRequestError` to refuse with a
        message; return to accept. The default accepts anything.
        """

    def task_partitions(self, task_config: Mapping[str, str]) -> list[dict[str, Any]] | None:
        """The source partitions (as offsets are keyed) a task with ``task_config`` reads; None when unknown.

        A connector that answers (and leaves out of its task configs the partitions
        :meth:`~mirrorline.api.context.ConnectorContext.partitions_held_by_jobs` lists) can hand
        partitions to a bulk job while it runs: the runtime starts such a job only once no task
        instance of the connector reads any of them. The default (None) means the connector
        must be STOPPED while a job writes its partitions. Called on any instance (it need not
        be started); must not block.

        API addition (jobs): connectors written before it keep the default.
        """
        return None


class SinkConnector(Connector):
    """A connector whose tasks consume records from Kafka and write them to an external system.

    Every sink connector has two settings the runtime handles (Kafka Connect's): ``topics``, a
    list of topics to consume, or ``topics.regex``, a pattern of them; exactly one must be set.
    The runtime runs one consumer per task in the group ``connect-<connector name>``, so the
    group spreads the partitions over the tasks: ``task_configs`` usually returns ``max_tasks``
    copies of the connector's settings. See :mod:`mirrorline.api.sink` for the task's lifecycle.
    """

    type: ClassVar[str] = "sink"
