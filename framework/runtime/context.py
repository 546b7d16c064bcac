"""The runtime's implementations of the API's context objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from framework.api.context import ConnectorContext, OffsetReader, SourceTaskContext
from framework.api.records import ConnectorTaskId
from framework.storage.offsets import OffsetStore


class StoreOffsetReader(OffsetReader):
    """Reads one connector's offsets from the worker's offset store."""

    def __init__(self, store: OffsetStore, connector: str):
        self._store = store
        self._connector = connector

    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        return await self._store.get(self._connector, list(partitions))


class WorkerConnectorContext(ConnectorContext):
    """Forwards a connector's requests to the herder through two callbacks."""

    def __init__(self, name: str, offsets: OffsetReader, on_reconfigure: Callable[[str], None],
                 on_error: Callable[[str, BaseException], None], on_warning: Callable[[str, str], None]):
        self.name = name
        self.offsets = offsets
        self._on_reconfigure = on_reconfigure
        self._on_error = on_error
        self._on_warning = on_warning

    def report_warning(self, message: str) -> None:
        self._on_warning(self.name, message)

    def request_task_reconfiguration(self) -> None:
        self._on_reconfigure(self.name)

    def raise_error(self, error: BaseException) -> None:
        self._on_error(self.name, error)


class WorkerSourceTaskContext(SourceTaskContext):
    """A task's identity, its offset reader, and the warnings shown in its status."""

    def __init__(self, task_id: ConnectorTaskId, offsets: OffsetReader, warnings: dict[str, str]):
        self.task_id = task_id
        self.offsets = offsets
        self._warnings = warnings

    def report_warning(self, message: str, key: str | None = None) -> None:
        self._warnings[message if key is None else key] = message

    def clear_warning(self, key: str) -> None:
        self._warnings.pop(key, None)
