"""Context objects: a plugin's only way back into the runtime. Each one is deliberately small.

Connectors and tasks never receive the worker, the herder or a store. What they may ask of
the runtime is listed here; anything new is added as a method on a context, so existing
plugins keep working.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from framework.api.records import ConnectorTaskId


class OffsetReader(ABC):
    """Reads the source offsets the runtime has committed for this connector."""

    @abstractmethod
    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        """The committed offset of each source partition, in the order asked; None where there is none.

        Partitions compare by value (key order does not matter). Offsets are those of
        records already acknowledged by Kafka and flushed to the offset store; records
        written after the last flush are not reflected.
        """

    async def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The committed offset of one source partition, or None."""
        return (await self.offsets([partition]))[0]


class ConnectorContext(ABC):
    """Handed to a connector in ``initialize``; valid until the connector is stopped."""

    #: The connector's name, as the user gave it.
    name: str
    #: Committed source offsets of this connector's tasks (e.g. to plan task splits).
    offsets: OffsetReader

    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again and restart tasks if the result changed.

        Call it when the work to split changes (new topics, new partitions). Returns at once;
        the runtime does the reconfiguration on its own coroutine shortly after. Requests made
        while one is pending are merged.
        """

    def report_warning(self, message: str) -> None:
        """Show a condition the user should act on, without failing the connector.

        The message appears (once, however often it is reported) in the connector's status as
        ``"warnings": [...]`` — an addition to Kafka Connect's status shape, which clients that
        do not know it ignore — until the connector is restarted or reconfigured. Example: a
        topic that cannot be mirrored because its remote name would be too long.
        """

    @abstractmethod
    def raise_error(self, error: BaseException) -> None:
        """Report a fatal error found in the background: the connector is marked FAILED with its trace.

        The runtime stops the connector. Tasks already running are left running, as
        Kafka Connect does; a restart of the connector clears the failure.
        """


class SourceTaskContext(ABC):
    """Handed to a source task in ``initialize``; valid until the task is stopped."""

    #: This task's identity.
    task_id: ConnectorTaskId
    #: Committed source offsets, to resume from on start.
    offsets: OffsetReader

    def report_warning(self, message: str, key: str | None = None) -> None:
        """Show a condition the user should act on in the task's status, without failing the task.

        The message appears in the task's status as ``"warnings": [...]`` (an addition to
        Kafka Connect's status shape) until :meth:`clear_warning` is called with the same
        ``key`` (default: the message itself) or the task restarts. Reporting the same key
        again replaces its message. Example: a source partition whose records were deleted
        by retention before they were copied.
        """

    def clear_warning(self, key: str) -> None:
        """Remove the warning reported under ``key`` (nothing happens if there is none)."""
