"""StandaloneHerder: the Herder of a single worker, like Kafka Connect's standalone mode.

Connector configs live in memory (given on the command line or over REST each run);
source offsets live in ``offset.storage.file.filename``. Every change to a connector runs
under one lock, so REST calls and background reconfigurations never interleave.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from framework.api.connector import SourceConnector
from framework.api.errors import AlreadyExistsError, NotFoundError
from framework.api.records import ConnectorTaskId
from framework.plugins import PluginRegistry
from framework.runtime.abstract_herder import AbstractHerder
from framework.runtime.background import BackgroundTasks
from framework.runtime.worker import Worker
from framework.storage.configs import ConfigStore, TargetState
from framework.storage.offsets import OffsetStore
from framework.storage.status import State, StatusStore

log = logging.getLogger(__name__)


class StandaloneHerder(AbstractHerder):
    """Runs every connector on this one worker."""

    def __init__(self, worker_id: str, worker_config, plugins: PluginRegistry, *, offset_store: OffsetStore,
                 config_store: ConfigStore, status_store: StatusStore, kafka_cluster_id: str | None = None):
        self.plugins = plugins
        self.config_store = config_store
        self.status_store = status_store
        self.offset_store = offset_store
        self.worker_config = worker_config
        self.kafka_cluster_id = kafka_cluster_id
        self.worker = Worker(worker_id, worker_config, plugins, offset_store, status_store,
                             on_reconfigure=self._request_reconfiguration,
                             on_connector_error=self._connector_error, on_topic=self._record_topic)
        self._lock = asyncio.Lock()
        self._background = BackgroundTasks("herder")
        self._active_topics: dict[str, set[str]] = {}
        self._reconfiguring: set[str] = set()
        self._started = False

    @property
    def worker_id(self) -> str:
        """This worker's id (its advertised REST host:port)."""
        return self.worker.worker_id

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Load stores; the herder is healthy from here on."""
        for store in (self.offset_store, self.config_store, self.status_store):
            await store.start()
        self._started = True

    async def stop(self) -> None:
        """Stop every task and connector, storing their offsets, then the stores."""
        await self._background.close()
        async with self._lock:
            await self.worker.stop()
        for store in (self.status_store, self.config_store, self.offset_store):
            await store.stop()

    # -- callbacks from connectors and tasks ----------------------------------------------
    def _request_reconfiguration(self, name: str) -> None:
        if name in self._reconfiguring:  # one is already pending: it will see the latest state
            return
        self._reconfiguring.add(name)
        self._background.spawn(self._reconfigure(name), f"reconfigure-{name}")

    async def _reconfigure(self, name: str) -> None:
        async with self._lock:
            self._reconfiguring.discard(name)
            if name in self.worker.connectors and self.config_store.target_state(name) != TargetState.STOPPED:
                await self._update_tasks(name)

    def _connector_error(self, name: str, error: BaseException) -> None:
        self._background.spawn(self._fail_connector(name, error), f"fail-{name}")

    async def _fail_connector(self, name: str, error: BaseException) -> None:
        async with self._lock:
            log.error("Connector %s reported a fatal error and is stopped: %s", name, error)
            await self.worker.stop_connector(name)
            await self.worker.set_connector_state(name, State.FAILED, "".join(traceback.format_exception(error)))

    def _record_topic(self, connector: str, topic: str) -> None:
        if self.worker_config["topic.tracking.enable"]:
            self._active_topics.setdefault(connector, set()).add(topic)

    async def _start_connector_and_tasks(self, name: str) -> None:
        state = self.config_store.target_state(name)
        if state == TargetState.STOPPED:
            await self.worker.set_connector_state(name, State.STOPPED)
            return
        if await self.worker.start_connector(name, self._require(name), paused=state == TargetState.PAUSED):
            await self._update_tasks(name, force=True)

    async def _update_tasks(self, name: str, force: bool = False) -> None:
        try:
            configs = await self.worker.task_configs(name)
        except Exception as exc:
            log.error("Connector %s failed to generate task configs: %s", name, exc)
            await self.worker.stop_connector(name)
            await self.worker.set_connector_state(name, State.FAILED, "".join(traceback.format_exception(exc)))
            return
        if not force and configs == self.config_store.task_configs(name) and self.worker.connector_tasks(name):
            return
        await self._stop_tasks(name)
        await self.config_store.put_task_configs(name, configs)
        await self._start_tasks(name)

    async def _start_tasks(self, name: str, only: set[int] | None = None) -> None:
        paused = self.config_store.target_state(name) == TargetState.PAUSED
        for index, task_config in enumerate(self.config_store.task_configs(name)):
            if only is None or index in only:
                await self.worker.start_task(ConnectorTaskId(name, index), task_config, paused=paused)

    async def _stop_tasks(self, name: str, only: set[int] | None = None) -> None:
        for task_id in self.worker.connector_tasks(name):
            if only is None or task_id.task in only:
                await self.worker.stop_task(task_id)
        if only is None:
            await self.status_store.remove(name, keep_connector=True)

    async def _stop_all(self, name: str) -> None:
        await self._stop_tasks(name)
        await self.worker.stop_connector(name)

    async def health(self) -> tuple[str, str]:
        if not self._started:
            return "starting", "Worker is still starting up."
        return "healthy", "Worker has completed startup and is ready to handle requests."

    async def put_connector_config(self, name, config, *, allow_replace, initial_state=None):
        config, target = self._checked_config(name, config, initial_state)
        async with self._lock:
            exists = name in self.config_store.connectors()
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            if exists:
                await self._stop_all(name)
            await self.config_store.put_connector(name, config)
            if not exists:
                await self.config_store.put_target_state(name, target)
            await self._start_connector_and_tasks(name)
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        async with self._lock:
            self._require(name)
            await self._stop_all(name)
            await self.config_store.remove_connector(name)
            await self.status_store.remove(name)
            self.worker.warnings.pop(name, None)
            self._active_topics.pop(name, None)

    async def restart_connector(self, name, *, include_tasks=False, only_failed=False):
        async with self._lock:
            self._require(name)
            if not include_tasks and not only_failed:
                await self._restart_connector_instance(name)
                return None
            plan, restart_connector, statuses = await self._restart_plan(name, include_tasks, only_failed)
            tasks = set(statuses)
            if restart_connector:
                await self._restart_connector_instance(name, tasks_too=bool(tasks))
            if tasks and not (restart_connector and self.config_store.task_configs(name)):
                await self._stop_tasks(name, only=tasks)
                await self._start_tasks(name, only=tasks)
            return plan

    async def _restart_connector_instance(self, name: str, tasks_too: bool = False) -> None:
        await self.worker.stop_connector(name)
        state = self.config_store.target_state(name)
        if state == TargetState.STOPPED:
            await self.worker.set_connector_state(name, State.STOPPED)
            return
        if await self.worker.start_connector(name, self._require(name), paused=state == TargetState.PAUSED):
            if tasks_too or not self.worker.connector_tasks(name):
                await self._update_tasks(name, force=True)
            else:
                await self._update_tasks(name)

    async def restart_task(self, name: str, task: int) -> None:
        async with self._lock:
            self._require(name)
            if task not in range(len(self.config_store.task_configs(name))):
                raise NotFoundError(f"Task {name}-{task} not found")
            await self._stop_tasks(name, only={task})
            await self._start_tasks(name, only={task})

    async def pause_connector(self, name: str) -> None:
        async with self._lock:
            self._require(name)
            await self.config_store.put_target_state(name, TargetState.PAUSED)
            if name in self.worker.connectors:
                await self.worker.set_connector_state(name, State.PAUSED)
            for task_id in self.worker.connector_tasks(name):
                await self.worker.tasks[task_id].pause()

    async def resume_connector(self, name: str) -> None:
        async with self._lock:
            self._require(name)
            was = self.config_store.target_state(name)
            await self.config_store.put_target_state(name, TargetState.STARTED)
            if was == TargetState.STOPPED or name not in self.worker.connectors:
                await self._stop_all(name)
                await self._start_connector_and_tasks(name)
                return
            await self.worker.set_connector_state(name, State.RUNNING)
            for task_id in self.worker.connector_tasks(name):
                await self.worker.tasks[task_id].resume()

    async def stop_connector(self, name: str) -> None:
        async with self._lock:
            self._require(name)
            await self.config_store.put_target_state(name, TargetState.STOPPED)
            await self._stop_all(name)
            await self.config_store.put_task_configs(name, [])
            await self.worker.set_connector_state(name, State.STOPPED)

    # -- offsets --------------------------------------------------------------------------
    def _runs_tasks_here(self, name: str) -> bool:
        return bool(self.worker.connector_tasks(name))

    def connector_warnings(self, name: str) -> list[str]:
        return self.worker.warnings.get(name, [])

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        async with self._lock:
            config = self._require_stopped(name)
            pairs = self._parse_offsets(offsets)
            connector_class = self.plugins.connector_class(config["connector.class"])
            if issubclass(connector_class, SourceConnector):
                await connector_class().alter_offsets(config, pairs)
            await self.offset_store.put(name, pairs)
            return "The offsets for this connector have been altered successfully"

    async def reset_connector_offsets(self, name: str) -> str:
        async with self._lock:
            self._require_stopped(name)
            pairs = await self.offset_store.all(name)
            await self.offset_store.put(name, [(p, None) for p, _ in pairs])
            return "The offsets for this connector have been reset successfully"



