"""The Worker: runs connector instances and their tasks on this process's event loop.

It knows nothing of REST, stores of configs or cluster membership: a herder tells it what
to run. It reports every state change through the status store, tagged with its worker id.

Failures go one way, whatever their source (``start``, ``task_configs``, a task loop, a
connector's ``raise_error``): :meth:`Worker.fail_connector` / the task's failure callback
record FAILED with the trace, log one ERROR line saying what to do, count it, release the
instance, and tell the herder's supervisor (``on_failure``), which restarts it later. Every
call into plugin code that starts or stops something is bounded by a timeout
(``start.timeout.ms``, ``task.shutdown.graceful.timeout.ms``), and tasks stop in parallel.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import Config
from mirrorline.api.connector import Connector
from mirrorline.api.errors import ConfigError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.api.secrets import scrub, secret_values
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime import metrics
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.config_providers import ConfigResolver, has_references, provider_classes
from mirrorline.runtime.context import StoreOffsetReader, WorkerConnectorContext
from mirrorline.runtime.converters import validate_converters
from mirrorline.runtime.exactly_once_task import ExactlyOnceSettings
from mirrorline.runtime.sink_config import connector_config_def, is_sink
from mirrorline.runtime.task_factory import TaskFactory
from mirrorline.runtime.task_runner import TaskRunner
from mirrorline.storage.offsets import OffsetStore
from mirrorline.storage.status import State, Status, StatusStore

log = logging.getLogger(__name__)

#: ``on_failure(key)`` -> seconds until the automatic restart, or None when there is none.
FailureListener = Callable[[str | ConnectorTaskId], float | None]


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


def task_config_digest(task_config: dict[str, Any]) -> str:
    """A short digest of a task config as stored (before config providers resolve it): equal configs, equal digests."""
    text = json.dumps({str(k): str(v) for k, v in task_config.items()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


class Worker:
    """Starts and stops connectors and tasks, and records their statuses."""

    def __init__(self, worker_id: str, worker_config: Config, plugins: PluginRegistry,
                 offset_store: OffsetStore, status_store: StatusStore, *,
                 on_reconfigure: Callable[[str], None], on_connector_error: Callable[[str, BaseException], None],
                 on_failure: FailureListener | None = None, on_topic: Callable[[str, str], None] | None = None):
        self.warnings: dict[str, list[str]] = {}
        self.worker_id = worker_id
        self.config = worker_config
        self.plugins = plugins
        self.offset_store = offset_store
        self.status_store = status_store
        self._on_reconfigure = on_reconfigure
        self._on_connector_error = on_connector_error
        self._on_failure = on_failure
        self._on_topic = on_topic
        self.connectors: dict[str, RunningConnector] = {}
        self.tasks: dict[ConnectorTaskId, TaskRunner] = {}
        self._stopping: dict[ConnectorTaskId, asyncio.Task] = {}
        #: What connectors' contexts may ask of bulk jobs (set by the herder; None: no jobs here).
        self.job_access: Any = None
        #: task -> digest of the (stored) task config its instance here was started with (statuses carry it)
        self._task_digests: dict[ConnectorTaskId, str] = {}
        #: connector -> its secret values, so failure messages never log them
        self._secrets: dict[str, list[str]] = {}
        #: The group generation written with every status (distributed mode; 0 otherwise).
        self.generation = 0
        #: The worker's config providers, resolving ``${provider:path:key}`` when instances start.
        self.resolver = ConfigResolver.from_worker_config(
            worker_config.originals, provider_classes(getattr(plugins, "config_provider_classes", list)()))
        #: connector -> (its stored config, the same resolved), to keep resolved values out of task configs
        self._resolved: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.start_timeout_s = worker_config["start.timeout.ms"] / 1000
        #: Builds every task's runner, reporting to this worker (the TaskListener).
        self.task_factory = TaskFactory(worker_config, plugins, self, offset_store, self.start_timeout_s)
        self.stop_timeout_s = worker_config["task.shutdown.graceful.timeout.ms"] / 1000
        # A worker-level converter every task would fail with is bad input: refuse to start, naming it.
        problems = [f"{value.name}: {'; '.join(value.errors)}"
                    for value in validate_converters(worker_config.originals, plugins) if value.errors]
        if problems:
            raise ConfigError(f"worker config: {' '.join(problems)}")

    # -- statuses ------------------------------------------------------------------------
    async def set_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        """Record a connector's state under this worker's id."""
        await self.status_store.put_connector(name, Status(state, self.worker_id, trace, self.generation))

    async def set_task_state(self, task_id: ConnectorTaskId, state: State, trace: str | None = None) -> None:
        """Record a task's state under this worker's id, with the digest of the config the instance runs."""
        await self.status_store.put_task(task_id.connector, task_id.task,
                                         Status(state, self.worker_id, trace, self.generation,
                                                self._task_digests.get(task_id)))

    @property
    def exactly_once(self) -> Callable[[ConnectorTaskId, Config, OffsetStore], ExactlyOnceSettings] | None:
        """Set by a distributed herder whose worker has exactly.once.source.support=enabled: gives the
        exactly-once settings of a source task (transactional id, boundary, fencing checks)."""
        return self.task_factory.exactly_once

    @exactly_once.setter
    def exactly_once(self, value) -> None:
        self.task_factory.exactly_once = value

    @property
    def offset_store_for(self) -> Callable[[str, Config], Awaitable[OffsetStore]] | None:
        """Set by a distributed herder: the offset store of a source connector (its own
        ``offsets.storage.topic`` when it has one, else the worker's)."""
        return self.task_factory.offset_store_for

    @offset_store_for.setter
    def offset_store_for(self, value) -> None:
        self.task_factory.offset_store_for = value

    # -- what running tasks report (TaskListener) --------------------------------------------
    async def task_state_changed(self, task_id: ConnectorTaskId, state: State, trace: str | None) -> None:
        """A task's runner reports a state: record it."""
        await self.set_task_state(task_id, state, trace)

    def topic_written(self, connector: str, topic: str) -> None:
        """A task used ``topic`` for the first time: tell the herder (active-topic tracking)."""
        if self._on_topic is not None:
            self._on_topic(connector, topic)

    def _warn(self, name: str, message: str) -> None:
        messages = self.warnings.setdefault(name, [])
        if message not in messages:
            messages.append(message)

    def task_warnings(self, task_id: ConnectorTaskId) -> list[str]:
        """Conditions the task running here reports (retrying, stalled, data lost...)."""
        task = self.tasks.get(task_id)
        return list(task.warnings.values()) if task is not None else []

    def _restart_note(self, delay: float | None) -> str:
        if delay is None:
            return "Fix the cause, then restart it with POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true"
        return (f"It restarts by itself in {delay:g}s (restart.on.failure.enable); the trace is in "
                f"GET /connectors/{{name}}/status")

    # -- failures ------------------------------------------------------------------------
    async def fail_connector(self, name: str, exc: BaseException, what: str = "failed") -> None:
        """Stop the connector instance (if it runs) and record it FAILED; its tasks keep running, as in Connect."""
        await self.stop_connector(name)
        metrics.CONNECTOR_FAILURES.labels(name).inc()
        delay = self._on_failure(name) if self._on_failure is not None else None
        log.error("Connector %s %s: %s. %s", name, what, scrub(str(exc), self._secrets.get(name, ())),
                  self._restart_note(delay).format(name=name))
        await self.set_connector_state(name, State.FAILED, _trace(exc))

    async def task_failed(self, task_id: ConnectorTaskId, exc: BaseException) -> None:
        """A task failed: FAILED with trace, log, metric, supervisor; then release its resources."""
        metrics.TASK_FAILURES.labels(task_id.connector, str(task_id.task)).inc()
        delay = self._on_failure(task_id) if self._on_failure is not None else None
        failed = self.tasks.get(task_id)
        secrets = [*self._secrets.get(task_id.connector, ()), *(secret_values(failed.config) if failed else ())]
        log.error("Task %s failed: %s. %s", task_id, scrub(str(exc), secrets),
                  self._restart_note(delay).format(name=task_id.connector))
        await self.set_task_state(task_id, State.FAILED, _trace(exc))
        if failed is not None and failed.failed:
            await self.stop_task(task_id)  # flushes what was acknowledged, closes clients

    # -- connectors ----------------------------------------------------------------------
    def parse_connector_config(self, raw: dict[str, Any]) -> tuple[type[Connector], Config]:
        """Resolve the connector class and parse ``raw`` with the common and the connector's settings."""
        connector_class = self.plugins.connector_class(str(raw.get("connector.class", "")))
        return connector_class, connector_config_def(connector_class).merged(connector_class.config_def).parse(raw)

    async def start_connector(self, name: str, raw: dict[str, Any], paused: bool = False) -> bool:
        """Instantiate, initialise and start a connector; False (and FAILED status) if that fails."""
        connector = None
        self._secrets[name] = secret_values(raw)
        # at 0 from the start, as the task series (TaskRunner): panels and alerts read 0, not "No data"
        metrics.CONNECTOR_FAILURES.labels(name)
        metrics.CONNECTOR_RESTARTS.labels(name)
        try:
            resolved = await self._resolve(name, raw)
            connector_class, config = self.parse_connector_config(resolved)
            self._secrets[name] = [*secret_values(raw, connector_class.config_def), *self._secrets[name]]
            connector = connector_class()
            self.warnings.pop(name, None)
            store = self.offset_store if self.offset_store_for is None or is_sink(connector_class) else \
                await self.offset_store_for(name, config)
            connector.initialize(WorkerConnectorContext(
                name, StoreOffsetReader(store, name), self._on_reconfigure, self._on_connector_error,
                self._warn, jobs=self.job_access))
            await bounded(connector.start(config), self.start_timeout_s, f"Connector {name}: start()")
        except Exception as exc:
            if connector is not None:  # release what a half-done start() opened
                await self._stop_instance(name, connector)
            await self.fail_connector(name, exc, "failed to start")
            return False
        self.connectors[name] = RunningConnector(connector, config)
        await self.set_connector_state(name, State.PAUSED if paused else State.RUNNING)
        return True

    async def _resolve(self, name: str, raw: dict[str, Any], remember: bool = True) -> dict[str, Any]:
        """``raw`` with its provider references resolved (off the event loop); their values join
        the connector's secrets. A config without references is returned as it is. ``remember``
        (a connector's own config) keeps both, for :meth:`task_configs` to restore references."""
        if not self.resolver.providers or not has_references(raw):
            return raw
        resolved = await asyncio.to_thread(self.resolver.resolve, raw)
        self._secrets[name] = sorted({*self._secrets.get(name, ()), *resolved.secrets}, key=len, reverse=True)
        if remember:
            self._resolved[name] = (dict(raw), resolved.values)
        return resolved.values

    async def stop_connector(self, name: str) -> None:
        """Stop a running connector instance (its tasks are stopped separately); bounded in time."""
        running = self.connectors.pop(name, None)
        if running is not None:
            await self._stop_instance(name, running.connector)

    async def _stop_instance(self, name: str, connector: Connector) -> None:
        try:
            await bounded(connector.stop(), self.stop_timeout_s, f"Connector {name}: stop()")
        except Exception as exc:
            log.error("Connector %s: stop() raised or hung (%r); the worker goes on, but the connector's "
                      "resources may leak", name, exc)
        context = getattr(connector, "context", None)
        if isinstance(context, WorkerConnectorContext):  # its context.run_in_background work
            await context.close_background(self.stop_timeout_s)

    async def task_configs(self, name: str) -> list[dict[str, str]]:
        """Ask a running connector for its task configs, capped at ``tasks.max``."""
        running = self.connectors[name]
        max_tasks = running.config["tasks.max"]
        configs = await bounded(running.connector.task_configs(max_tasks), self.start_timeout_s,
                                f"Connector {name}: task_configs()")
        if len(configs) > max_tasks:
            log.warning("Connector %s returned %d task configs for tasks.max=%d; using the first %d",
                        name, len(configs), max_tasks, max_tasks)
        out = [{str(k): _as_setting(v) for k, v in c.items()} for c in configs[:max_tasks]]
        if name in self._resolved:  # task configs are stored: keep the references, not the values
            raw, resolved = self._resolved[name]
            out = [ConfigResolver.restore(c, raw, resolved) for c in out]
        return out

    # -- tasks ---------------------------------------------------------------------------
    async def start_task(self, task_id: ConnectorTaskId, task_config: dict[str, str], paused: bool = False,
                         connector_config: dict[str, Any] | None = None) -> None:
        """Start one task; a failure to start leaves it FAILED (with its trace) in the status store.

        The connector's settings (producer overrides, the task class) come from the connector
        instance when it runs here, otherwise from ``connector_config`` (distributed mode runs
        tasks on workers other than their connector's). A previous instance of the same task
        still stopping is waited for first, so two never run side by side.
        """
        previous = self._stopping.get(task_id)
        if previous is not None:
            await asyncio.wait({previous})
        if task_id in self.tasks:
            await self.stop_task(task_id)
        self._task_digests[task_id] = task_config_digest(task_config)
        running = self.connectors.get(task_id.connector)
        try:
            task_config = await self._resolve(task_id.connector, task_config, remember=False)
            if running is None and connector_config is not None:
                connector_config = await self._resolve(task_id.connector, connector_config, remember=False)
            if running is not None:
                connector_class, connector_settings = type(running.connector), running.config
            else:
                if connector_config is None:
                    raise ValueError(f"connector {task_id.connector} does not run here and no config was given")
                connector_class, connector_settings = self.parse_connector_config(connector_config)
            task = connector_class().task_class()()
            runner = await self.task_factory.build(task_id, task, task_config, connector_class, connector_settings)
        except Exception as exc:
            await self.task_failed(task_id, exc)
            return
        self.tasks[task_id] = runner
        await self.set_task_state(task_id, State.UNASSIGNED)
        await runner.start(paused=paused)

    async def stop_task(self, task_id: ConnectorTaskId) -> None:
        """Stop one task, storing the offsets of what it wrote; bounded by the graceful timeout."""
        worker_task = self.tasks.pop(task_id, None)
        if worker_task is None:
            previous = self._stopping.get(task_id)
            if previous is not None:
                await asyncio.wait({previous})
            return
        stopping = asyncio.ensure_future(self._stop_bounded(worker_task))
        self._stopping[task_id] = stopping
        try:
            await asyncio.shield(stopping)
        finally:
            if stopping.done() and self._stopping.get(task_id) is stopping:
                del self._stopping[task_id]

    async def _stop_bounded(self, worker_task: TaskRunner) -> None:
        flush_s = min(self.config["offset.flush.timeout.ms"] / 1000, self.stop_timeout_s)
        try:
            await bounded(worker_task.stop(flush_s), self.stop_timeout_s + flush_s, f"Task {worker_task.id}: stop")
        except Exception as exc:
            worker_task.abandon()
            log.error("Task %s did not stop cleanly (%r); the worker goes on. Records after its last stored "
                      "offset are written again when it next starts", worker_task.id, exc)
            try:
                await bounded(worker_task.release_clients(), self.stop_timeout_s, f"Task {worker_task.id}: "
                              f"closing its clients")
            except Exception as closing:  # noqa: BLE001 - the worker goes on all the same
                log.warning("Task %s: its clients did not close (%r)", worker_task.id, closing)

    async def stop_tasks(self, task_ids: Iterable[ConnectorTaskId]) -> None:
        """Stop several tasks in parallel (as Connect does on a rebalance), each bounded in time."""
        await asyncio.gather(*(self.stop_task(t) for t in task_ids))

    def connector_tasks(self, name: str) -> list[ConnectorTaskId]:
        """Ids of this connector's tasks running here, sorted."""
        return sorted(t for t in self.tasks if t.connector == name)

    async def stop(self) -> None:
        """Stop every task (in parallel), then every connector."""
        await self.stop_tasks(list(self.tasks))
        await asyncio.gather(*(self.stop_connector(n) for n in list(self.connectors)))
