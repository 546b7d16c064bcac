"""The runtime's implementations of the API's context objects."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from mirrorline.api.clients import KafkaClients
from mirrorline.api.context import ConnectorContext, OffsetReader, SourceTaskContext
from mirrorline.api.errors import ConnectError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.api.sink import ErrantRecordReporter, SinkTaskContext, TopicPartition
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.runtime.background import BackgroundTasks, without_stray_cancellation
from mirrorline.storage.offsets import OffsetStore


class StoreOffsetReader(OffsetReader):
    """Reads one connector's offsets from the worker's offset store."""

    def __init__(self, store: OffsetStore, connector: str):
        self._store = store
        self._connector = connector

    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        return await self._store.get(self._connector, list(partitions))


class BackgroundCrash(ConnectError):
    """A plugin's background coroutine (``context.run_in_background``) raised: it fails its owner."""


class OwnedBackground:
    """``run_in_background`` for the runtime's contexts: the tasks are owned here, cancelled and awaited
    by :meth:`close_background` when the plugin stops, and a crash is handed to ``on_crash`` (which
    marks the connector or task FAILED) wrapped in a :class:`BackgroundCrash` naming the coroutine."""

    def _init_background(self, owner: str, on_crash: Callable[[BaseException], None]) -> None:
        self._background = BackgroundTasks(owner)
        self._on_crash = on_crash

    def run_in_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        return self._background.spawn(self._guarded(coro, name), name)

    async def _guarded(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            await without_stray_cancellation(coro, f"{self._background.owner}: background task {name!r}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            crash = BackgroundCrash(f"{self._background.owner}: background task {name!r} crashed: {exc!r}")
            crash.__cause__ = exc
            self._on_crash(crash)

    def cancel_background(self) -> None:
        """Cancel the plugin's background tasks without waiting (its stop was given up on)."""
        self._background.cancel_all()

    async def close_background(self, timeout: float = 10.0) -> None:
        """Cancel the plugin's background tasks and wait (up to ``timeout``) for them to end."""
        await self._background.close(timeout)


class WorkerConnectorContext(OwnedBackground, ConnectorContext):
    """Forwards a connector's requests to the herder through two callbacks."""

    def __init__(self, name: str, offsets: OffsetReader, on_reconfigure: Callable[[str], None],
                 on_error: Callable[[str, BaseException], None], on_warning: Callable[[str, str], None],
                 clients: KafkaClients = KAFKA_CLIENTS, jobs: Any = None):
        self.name = name
        self.offsets = offsets
        self.clients = clients
        self._jobs = jobs
        self._init_background(f"connector {name}", lambda exc: on_error(name, exc))
        self._on_reconfigure = on_reconfigure
        self._on_error = on_error
        self._on_warning = on_warning

    def report_warning(self, message: str) -> None:
        self._on_warning(self.name, message)

    def request_task_reconfiguration(self) -> None:
        self._on_reconfigure(self.name)

    def raise_error(self, error: BaseException) -> None:
        self._on_error(self.name, error)

    def partitions_held_by_jobs(self) -> list[tuple[dict[str, Any], str]]:
        return self._jobs.held(self.name) if self._jobs is not None else []

    async def submit_job(self, name: str, config: Mapping[str, str]) -> None:
        if self._jobs is None:
            raise ConnectError("this worker runs no jobs")
        await self._jobs.submit(self.name, name, config)

    def job_status(self, name: str) -> dict[str, Any] | None:
        return self._jobs.info(name) if self._jobs is not None else None

    async def remove_job(self, name: str) -> None:
        if self._jobs is None:
            raise ConnectError("this worker runs no jobs")
        await self._jobs.remove(name)


class WorkerSourceTaskContext(OwnedBackground, SourceTaskContext):
    """A task's identity, its offset reader, the warnings shown in its status, its commit requests and its
    background work."""

    def __init__(self, task_id: ConnectorTaskId, offsets: OffsetReader, warnings: dict[str, str],
                 on_crash: Callable[[BaseException], None] | None = None, clients: KafkaClients = KAFKA_CLIENTS,
                 accepts_batches: bool = False, on_commit_request: Callable[[], None] | None = None,
                 client_share: str | None = None):
        self.task_id = task_id
        self.offsets = offsets
        self.clients = clients
        self.accepts_batches = accepts_batches
        self.client_share = client_share
        self._warnings = warnings
        self._on_commit_request = on_commit_request
        self._init_background(f"task {task_id}", on_crash or _unowned_crash)

    def request_commit(self) -> None:
        if self._on_commit_request is not None:
            self._on_commit_request()

    def report_warning(self, message: str, key: str | None = None) -> None:
        self._warnings[message if key is None else key] = message

    def clear_warning(self, key: str) -> None:
        self._warnings.pop(key, None)


def _unowned_crash(exc: BaseException) -> None:
    raise exc  # no owner to fail: BackgroundTasks logs it as a crash


class WorkerSinkTaskContext(OwnedBackground, SinkTaskContext):
    """Forwards a sink task's requests (pause, resume, offset reset, commit) to its runner; owns its background work."""

    def __init__(self, runner: Any, warnings: dict[str, str], clients: KafkaClients = KAFKA_CLIENTS):
        self._runner = runner
        self.task_id = runner.id
        self.clients = clients
        self._warnings = warnings
        self._init_background(f"task {runner.id}", runner._fail)

    def assignment(self) -> frozenset[TopicPartition]:
        return self._runner.assignment()

    def pause(self, *partitions: TopicPartition) -> None:
        self._runner.pause_partitions(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._runner.resume_partitions(partitions)

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self._runner.reset_offsets(offsets)

    def request_commit(self) -> None:
        self._runner.request_commit()

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._runner.errant_record_reporter()

    def report_warning(self, message: str, key: str | None = None) -> None:
        self._warnings[message if key is None else key] = message

    def clear_warning(self, key: str) -> None:
        self._warnings.pop(key, None)
