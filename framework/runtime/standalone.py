"""StandaloneHerder: the Herder of a single worker, like Kafka Connect's standalone mode.

Connector configs live in memory (given on the command line or over REST each run);
source offsets live in ``offset.storage.file.filename``. Every change to a connector runs
under one lock, so REST calls, background reconfigurations and automatic restarts never
interleave; every start and stop under it is bounded in time (see the Worker), so the lock
is never held without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mirrorline.api.errors import AlreadyExistsError, NotFoundError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import AbstractHerder
from mirrorline.runtime.background import BackgroundTasks
from mirrorline.storage.configs import ConfigStore, TargetState
from mirrorline.storage.offsets import OffsetStore
from mirrorline.storage.status import State, StatusStore

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
        self._lock = asyncio.Lock()
        self._background = BackgroundTasks("herder")
        self._started = False
        self._init_worker(worker_id)

    @property
    def worker_id(self) -> str:
        """This worker's id (its advertised REST host:port)."""
        return self.worker.worker_id

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Load stores; the herder is healthy from here on."""
        for store in (self.offset_store, self.config_store, self.status_store):
            await store.start()
        support = str(getattr(self.worker_config, "originals", {}).get("exactly.once.source.support", "disabled"))
        if support.strip().lower() != "disabled":
            # Connect's standalone mode ignores the setting without a word; say it once
            log.warning("exactly.once.source.support=%s is ignored: standalone workers write source records "
                        "at-least-once (exactly-once needs distributed workers or mirrorline mm2), and refuse "
                        "connectors with exactly.once.support=required", support)
        self.job_manager.on_jobs_changed = self._jobs_changed
        self.job_manager.attach()
        self._started = True

    def _jobs_changed(self) -> None:
        """A job was added or removed: this one worker runs every job that has not finished."""
        self._schedule_change(lambda: self.job_manager.run_here(self.job_manager.runnable()))

    async def stop(self) -> None:
        """Stop every job, task and connector (tasks store their offsets), then the stores."""
        await self.job_manager.close()
        await self.supervisor.close()
        await self._background.close()
        async with self._lock:
            await self.worker.stop()
        for store in (self.status_store, self.config_store, self.offset_store):
            await store.stop()

    # -- serialising changes (AbstractHerder) ----------------------------------------------
    def _schedule_change(self, change: Callable[[], Awaitable[None]]) -> None:
        self._background.spawn(self._locked(change), "change")

    async def _locked(self, change: Callable[[], Awaitable[None]]) -> None:
        async with self._lock:
            try:
                await change()
            except Exception:
                log.exception("A background change of the standalone herder failed")

    def _changes_serialised(self):
        return self._lock

    async def _restart_failed_connector(self, name: str) -> None:
        if name in self.config_store.connectors() and name not in self.worker.connectors:
            await self._start_connector_and_tasks(name, force=False)

    async def _restart_failed_task(self, task_id: ConnectorTaskId) -> None:
        if self._should_restart_task(task_id):
            await self._start_tasks(task_id.connector, only={task_id.task})

    async def _regenerate_task_configs(self, name: str) -> None:
        if name in self.worker.connectors and self.config_store.target_state(name) != TargetState.STOPPED:
            await self._update_tasks(name)

    # -- what runs ---------------------------------------------------------------------------
    async def _start_connector_and_tasks(self, name: str, force: bool = True) -> None:
        if await self._start_connector_in_target_state(name):
            await self._update_tasks(name, force=force)

    async def _update_tasks(self, name: str, force: bool = False) -> None:
        configs = await self._generate_task_configs(name)
        if configs is None:
            return
        if not force and configs == self.config_store.task_configs(name) and self.worker.connector_tasks(name):
            return
        await self._stop_tasks(name)
        await self.config_store.put_task_configs(name, configs)
        await self._start_tasks(name)

    async def _start_tasks(self, name: str, only: set[int] | None = None) -> None:
        await self._start_side_by_side(
            self._start_task(ConnectorTaskId(name, index), task_config)
            for index, task_config in enumerate(self.config_store.task_configs(name))
            if only is None or index in only)

    async def _stop_tasks(self, name: str, only: set[int] | None = None) -> None:
        await self.worker.stop_tasks([t for t in self.worker.connector_tasks(name) if only is None or t.task in only])
        if only is None:
            await self.status_store.remove(name, keep_connector=True)

    async def _stop_all(self, name: str) -> None:
        self.supervisor.forget_connector(name)
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
            await self._offset_store_of(name)  # says once that offsets.storage.topic has no effect here
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
                for task in tasks:
                    self.supervisor.forget(ConnectorTaskId(name, task))
                await self._stop_tasks(name, only=tasks)
                await self._start_tasks(name, only=tasks)
            return plan

    async def _restart_connector_instance(self, name: str, tasks_too: bool = False) -> None:
        self.supervisor.forget(name)
        await self.worker.stop_connector(name)
        if tasks_too:
            self.supervisor.forget_connector(name)
        await self._start_connector_and_tasks(name, force=tasks_too or not self.worker.connector_tasks(name))

    async def restart_task(self, name: str, task: int) -> None:
        async with self._lock:
            self._require(name)
            if task not in range(len(self.config_store.task_configs(name))):
                raise NotFoundError(f"Task {name}-{task} not found")
            self.supervisor.forget(ConnectorTaskId(name, task))
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
