"""The Worker: runs connector instances and their tasks on this process's event loop.

It knows nothing of REST, stores of configs or cluster membership: a herder tells it what
to run. It reports every state change through the status store, tagged with its worker id.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.api.config import Config
from framework.api.connector import Connector
from framework.api.kafka_clients import client_kwargs
from framework.api.records import ConnectorTaskId
from framework.plugins import PluginRegistry
from framework.runtime.connector_config import CONNECTOR_CONFIG_DEF, PRODUCER_OVERRIDE_PREFIX
from framework.runtime.context import StoreOffsetReader, WorkerConnectorContext
from framework.runtime.worker_config import PRODUCER_PREFIX
from framework.runtime.worker_task import WorkerSourceTask
from framework.storage.offsets import OffsetStore
from framework.storage.status import State, Status, StatusStore

log = logging.getLogger(__name__)


@dataclass
class RunningConnector:
    """A started connector instance and the config it was started with."""

    connector: Connector
    config: Config


def _as_setting(value: Any) -> str:
    """A task-config value as a Connect string setting (lists comma-joined, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_as_setting(v) for v in value)
    return "" if value is None else str(value)


class Worker:
    """Starts and stops connectors and tasks, and records their statuses."""

    def __init__(self, worker_id: str, worker_config: Config, plugins: PluginRegistry,
                 offset_store: OffsetStore, status_store: StatusStore, *,
                 on_reconfigure: Callable[[str], None], on_connector_error: Callable[[str, BaseException], None],
                 on_topic: Callable[[str, str], None] | None = None):
        self.warnings: dict[str, list[str]] = {}
        self.worker_id = worker_id
        self.config = worker_config
        self.plugins = plugins
        self.offset_store = offset_store
        self.status_store = status_store
        self._on_reconfigure = on_reconfigure
        self._on_connector_error = on_connector_error
        self._on_topic = on_topic
        self.connectors: dict[str, RunningConnector] = {}
        self.tasks: dict[ConnectorTaskId, WorkerSourceTask] = {}
        #: The group generation written with every status (distributed mode; 0 otherwise).
        self.generation = 0

    # -- statuses ------------------------------------------------------------------------
    async def set_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        """Record a connector's state under this worker's id."""
        await self.status_store.put_connector(name, Status(state, self.worker_id, trace, self.generation))

    async def set_task_state(self, task_id: ConnectorTaskId, state: State, trace: str | None = None) -> None:
        """Record a task's state under this worker's id."""
        await self.status_store.put_task(task_id.connector, task_id.task,
                                         Status(state, self.worker_id, trace, self.generation))

    async def _task_status(self, task_id: ConnectorTaskId, state: State, trace: str | None) -> None:
        await self.set_task_state(task_id, state, trace)

    def _warn(self, name: str, message: str) -> None:
        messages = self.warnings.setdefault(name, [])
        if message not in messages:
            messages.append(message)

    # -- connectors ----------------------------------------------------------------------
    def parse_connector_config(self, raw: dict[str, Any]) -> tuple[type[Connector], Config]:
        """Resolve the connector class and parse ``raw`` with the common and the connector's settings."""
        connector_class = self.plugins.connector_class(str(raw.get("connector.class", "")))
        return connector_class, CONNECTOR_CONFIG_DEF.merged(connector_class.config_def).parse(raw)

    async def start_connector(self, name: str, raw: dict[str, Any], paused: bool = False) -> bool:
        """Instantiate, initialise and start a connector; False (and FAILED status) if that fails."""
        try:
            connector_class, config = self.parse_connector_config(raw)
            connector = connector_class()
            self.warnings.pop(name, None)
            connector.initialize(WorkerConnectorContext(
                name, StoreOffsetReader(self.offset_store, name), self._on_reconfigure, self._on_connector_error,
                self._warn))
            await connector.start(config)
        except Exception as exc:
            log.error("Connector %s failed to start: %s. Fix its config and restart it "
                      "(POST /connectors/%s/restart).", name, exc, name)
            await self.set_connector_state(name, State.FAILED, "".join(traceback.format_exception(exc)))
            return False
        self.connectors[name] = RunningConnector(connector, config)
        await self.set_connector_state(name, State.PAUSED if paused else State.RUNNING)
        return True

    async def stop_connector(self, name: str) -> None:
        """Stop a running connector instance (its tasks are stopped separately)."""
        running = self.connectors.pop(name, None)
        if running is None:
            return
        try:
            await running.connector.stop()
        except Exception:
            log.exception("Connector %s raised from stop()", name)

    async def task_configs(self, name: str) -> list[dict[str, str]]:
        """Ask a running connector for its task configs, capped at ``tasks.max``."""
        running = self.connectors[name]
        max_tasks = running.config["tasks.max"]
        configs = await running.connector.task_configs(max_tasks)
        if len(configs) > max_tasks:
            log.warning("Connector %s returned %d task configs for tasks.max=%d; using the first %d",
                        name, len(configs), max_tasks, max_tasks)
        return [{str(k): _as_setting(v) for k, v in c.items()} for c in configs[:max_tasks]]

    # -- tasks ---------------------------------------------------------------------------
    async def start_task(self, task_id: ConnectorTaskId, task_config: dict[str, str], paused: bool = False,
                         connector_config: dict[str, Any] | None = None) -> None:
        """Start one task; a failure to start leaves it FAILED (with its trace) in the status store.

        The connector's settings (producer overrides, the task class) come from the connector
        instance when it runs here, otherwise from ``connector_config`` (distributed mode runs
        tasks on workers other than their connector's).
        """
        running = self.connectors.get(task_id.connector)
        try:
            if running is not None:
                connector_class, connector_settings = type(running.connector), running.config
            else:
                if connector_config is None:
                    raise ValueError(f"connector {task_id.connector} does not run here and no config was given")
                connector_class, connector_settings = self.parse_connector_config(connector_config)
            task = connector_class().task_class()()
        except Exception as exc:
            log.error("Task %s cannot be created: %s", task_id, exc)
            await self.set_task_state(task_id, State.FAILED, "".join(traceback.format_exception(exc)))
            return
        producer_props = {
            "bootstrap.servers": ",".join(self.config["bootstrap.servers"]),
            "client.id": f"{self.config['client.id']}-{task_id}",
            **self.config.with_prefix(PRODUCER_PREFIX),
            **connector_settings.with_prefix(PRODUCER_OVERRIDE_PREFIX),
        }
        kwargs, ignored = client_kwargs(producer_props, "producer")
        if ignored:
            log.info("Task %s: producer settings with no aiokafka equivalent are ignored: %s", task_id, ignored)
        worker_task = WorkerSourceTask(
            task_id, task, task_config, producer_kwargs=kwargs, offset_store=self.offset_store,
            on_status=self._task_status, flush_interval_s=self.config["offset.flush.interval.ms"] / 1000,
            on_topic=self._on_topic)
        self.tasks[task_id] = worker_task
        await self.set_task_state(task_id, State.UNASSIGNED)
        await worker_task.start(paused=paused)

    async def stop_task(self, task_id: ConnectorTaskId) -> None:
        """Stop one task, storing the offsets of what it wrote."""
        worker_task = self.tasks.pop(task_id, None)
        if worker_task is not None:
            await worker_task.stop(self.config["offset.flush.timeout.ms"] / 1000)

    def connector_tasks(self, name: str) -> list[ConnectorTaskId]:
        """Ids of this connector's tasks running here, sorted."""
        return sorted(t for t in self.tasks if t.connector == name)

    async def stop(self) -> None:
        """Stop every task, then every connector."""
        for task_id in list(self.tasks):
            await self.stop_task(task_id)
        for name in list(self.connectors):
            await self.stop_connector(name)
