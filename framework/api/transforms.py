"""Single message transforms (SMTs) and predicates: Kafka Connect's ``Transformation`` and ``Predicate``.

A connector config names a chain of transforms, applied in order to every record a source
task returns, between ``poll()`` and the producer (the same chain will serve the sink path,
between the consumer and ``put()``)::

    transforms=route,drop
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=A\\.(.*)
    transforms.route.replacement=mirrored.$1
    transforms.drop.type=Filter
    transforms.drop.predicate=audit
    predicates=audit
    predicates.audit.type=HasHeaderKey
    predicates.audit.name=audit

Each alias's own settings are ``transforms.<alias>.<setting>`` (``predicates.<alias>.<setting>``),
declared once in the class's ``config_def`` exactly as a connector declares its own. Every
transform also has the two settings the runtime handles itself: ``predicate`` (the alias of a
predicate; the transform then applies only to records the predicate matches) and ``negate``
(apply it only to records the predicate does *not* match).

Plugins provide classes through the ``register_transforms`` and ``register_predicates`` hooks.
A ``type`` resolves as ``connector.class`` does: the full name (``module.ClassName``), the
simple class name, or a name in the class's ``aliases`` (the built-ins list Connect's Java
names there, such as ``org.apache.kafka.connect.transforms.InsertField$Value``). No setting
ever imports a module by name.

Lifecycle, per task (each task has its own instances; calls on one instance never overlap):

1. the class is instantiated with no arguments;
2. ``configure(config)`` once, with the parsed settings of this alias;
3. ``apply(record)`` (``test(record)`` for a predicate) for every record, in order;
4. ``close()`` once when the task stops, fails or is reconfigured.

``configure`` is also called on throw-away instances to validate a config
(``PUT /connector-plugins/{plugin}/config/validate``, creating a connector), so it must only
check and remember its settings: no I/O, no threads, no connections.

Records: a transform receives a :class:`~mirrorline.api.records.SourceRecord` and returns a
**new** record (``dataclasses.replace(record, topic=...)``) or ``None`` to drop it; it never
changes the record it was given (the runtime still needs the original: it hands it to
``SourceTask.commit_record``, and its ``source_partition``/``source_offset`` are committed).
With the default ``ByteArrayConverter``, keys, values and header values are bytes, so a
transform that works on fields decodes the bytes itself (the built-in ``*Field`` transforms read
and write JSON objects, and also take dicts: data a converter made, or a source task returned).

Guarantees:

- ``apply`` runs on the worker's event loop, for one record at a time, in the order ``poll``
  returned them. It must be quick and must never block: it is plain synchronous code on the
  hot path (a transform that needs I/O does not belong here).
- A dropped record still counts as done: its source offset is committed once every earlier
  record of its source partition is written, and the task's ``commit_record`` is called
  with ``metadata=None`` for it, as Connect does.
- With no ``transforms`` configured, the runtime runs no transform code at all.

Not guaranteed:

- That an exception from ``apply`` is tolerated: with ``errors.tolerance=none`` (the default)
  it fails the task (FAILED, with a trace naming the alias, the topic, partition and source
  offset of the record); with ``all`` the record is skipped and counted (docs/errors.md).
  Raise :class:`~mirrorline.api.errors.DataError` with a message saying what is wrong with the data.
- That ``close`` is called if the process is killed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from mirrorline.api.config import Config, ConfigDef
from mirrorline.api.records import SourceRecord

__all__ = ["Predicate", "Transformation"]


class Transformation(ABC):
    """Changes, re-routes or drops one record at a time (Kafka Connect's ``Transformation``).

    Subclass it, declare ``config_def`` and implement ``apply``. ``configure`` stores nothing
    by default; override it to read your settings. Return new records, never mutate.
    """

    #: The settings of this transform, as ``transforms.<alias>.<name>`` (``predicate`` and
    #: ``negate`` are the runtime's own and must not be declared here).
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: Other names ``transforms.<alias>.type`` may use for this class (e.g. Connect's Java name).
    aliases: ClassVar[tuple[str, ...]] = ()

    def version(self) -> str:
        """The transform's version string (shown by ``GET /connector-plugins?connectorsOnly=false``)."""
        return "unknown"

    def configure(self, config: Config) -> None:
        """Receive this alias's settings, parsed with ``config_def``; called once, before ``apply``.

        Raise :class:`~mirrorline.api.errors.ConfigError` for a combination of settings that is
        invalid; the message is shown on ``transforms.<alias>.type`` by validation, and a task
        whose transform does not configure fails to start. Also called to validate configs,
        so: no I/O.
        """

    @abstractmethod
    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The transformed record (a new object), the same record to leave it unchanged, or
        ``None`` to drop it. Called on the event loop for every record: quick, never blocking.
        Raise :class:`~mirrorline.api.errors.DataError` for a record it cannot handle."""

    def close(self) -> None:
        """Release what ``configure`` acquired; called once when the task stops. Optional."""


class Predicate(ABC):
    """A condition on records that decides whether a transform applies (Connect's ``Predicate``).

    Subclass it, declare ``config_def`` and implement ``test``. A transform with
    ``transforms.<alias>.predicate=<p>`` is applied only to records for which ``test`` is true
    (false with ``negate=true``); other records pass through it unchanged.
    """

    #: The settings of this predicate, as ``predicates.<alias>.<name>``.
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: Other names ``predicates.<alias>.type`` may use for this class.
    aliases: ClassVar[tuple[str, ...]] = ()

    def version(self) -> str:
        """The predicate's version string (shown by ``GET /connector-plugins?connectorsOnly=false``)."""
        return "unknown"

    def configure(self, config: Config) -> None:
        """Receive this alias's parsed settings; called once, before ``test``. No I/O (see
        :meth:`Transformation.configure`)."""

    @abstractmethod
    def test(self, record: SourceRecord) -> bool:
        """Whether ``record`` satisfies the condition. Quick and non-blocking, as ``apply``."""

    def close(self) -> None:
        """Release what ``configure`` acquired; called once when the task stops. Optional."""
