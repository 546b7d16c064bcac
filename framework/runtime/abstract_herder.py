"""AbstractHerder: what every herder shares, as Kafka Connect's AbstractHerder.

Reads answered from the config and status stores (connector lists, configs, statuses, task
configs, offsets), config validation with the one ConfigDef of each plugin, the plugin
listings, and the lifecycle rules written once: starting a connector according to its target
state, generating task configs (a failure fails the connector), failure handling and
automatic restarts (:class:`~mirrorline.runtime.supervisor.Supervisor`), and offset changes.

Subclasses decide how changes are made and serialised: :class:`~mirrorline.runtime.standalone.
StandaloneHerder` applies them on its one worker under one lock, :class:`~mirrorline.runtime.
distributed.herder.DistributedHerder` on one coroutine, learning of configs and assignments
through the cluster's config topic and group. Each implements ``_schedule_change`` (run a
change serialised with all others), ``_changes_serialised`` (an async context manager held
around offset changes), and the two restarts the supervisor asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from mirrorline import __version__
from mirrorline.api.config import Config, ConfigDef, ConfigValue
from mirrorline.api.connector import Connector, SourceConnector
from mirrorline.api.errors import BadRequestError, ForbiddenError, NotFoundError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.api.secrets import HIDDEN, is_secret, redact, restore_hidden, scrub, secret_values
from mirrorline.plugins import PluginRegistry, full_name
from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF
from mirrorline.runtime import sink_offsets
from mirrorline.runtime.herder import Herder
from mirrorline.runtime.jobs.manager import ConnectorJobs, JobManager
from mirrorline.runtime.converters import validate_converters
from mirrorline.runtime.exactly_once import add_exactly_once_errors, worker_support
from mirrorline.runtime.sink_config import add_topic_errors, connector_config_def
from mirrorline.runtime.supervisor import Supervisor
from mirrorline.runtime import topic_creation
from mirrorline.runtime.transform_config import alias_configs, iter_values, transform_config_def
from mirrorline.runtime.worker import Worker
from mirrorline.storage.configs import ConfigStore, TargetState
from mirrorline.storage.offsets import OffsetStore
from mirrorline.storage.status import State, StatusStore

log = logging.getLogger(__name__)

INITIAL_STATES = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}


class AbstractHerder(Herder):
    """Store-backed reads, validation and plugin listings shared by every herder."""

    plugins: PluginRegistry
    config_store: ConfigStore
    status_store: StatusStore
    offset_store: OffsetStore
    kafka_cluster_id: str | None
    worker_id: str
    worker: Worker
    worker_config: Config
    supervisor: Supervisor
    #: connector -> topics its tasks on this worker wrote to
    _active_topics: dict[str, set[str]]

    # -- what subclasses provide -------------------------------------------------------------
    def _schedule_change(self, change: Callable[[], Awaitable[None]]) -> None:
        """Run ``change()`` soon, serialised with every other change this herder makes."""
        raise NotImplementedError

    def _changes_serialised(self) -> contextlib.AbstractAsyncContextManager:
        """Held around offset changes so they never interleave with other changes (no-op by default)."""
        return contextlib.nullcontext()

    async def _restart_failed_connector(self, name: str) -> None:
        """Start a failed connector again if it should still run on this worker."""
        raise NotImplementedError

    async def _restart_failed_task(self, task_id: ConnectorTaskId) -> None:
        """Start a failed task again if it should still run on this worker."""
        raise NotImplementedError

    async def _regenerate_task_configs(self, name: str) -> None:
        """Ask the connector running here for task configs again and apply them if they changed."""
        raise NotImplementedError

    def _on_reconfigure_request(self, name: str) -> None:
        """A connector asked for new task configs; requests made while one is pending are merged."""
        if name in self._reconfiguring:  # the pending one will see the latest state
            return
        self._reconfiguring.add(name)
        self._schedule_change(lambda: self._reconfigure(name))

    async def _reconfigure(self, name: str) -> None:
        self._reconfiguring.discard(name)
        await self._regenerate_task_configs(name)

    # -- the worker and its supervision --------------------------------------------------------
    def _init_worker(self, worker_id: str) -> None:
        """Create the Worker and the Supervisor that restarts what fails on it."""
        self._active_topics = {}
        self._reconfiguring: set[str] = set()
        self._warned_offsets_topic: set[str] = set()
        self.supervisor = Supervisor(self.worker_config, self._schedule_change, self._restart_failed_connector,
                                     self._restart_failed_task)
        self.worker = Worker(worker_id, self.worker_config, self.plugins, self.offset_store, self.status_store,
                             on_reconfigure=self._on_reconfigure_request, on_connector_error=self._on_connector_error,
                             on_failure=self.supervisor.failed, on_topic=self._record_topic)
        #: The bulk jobs of this worker cluster (``POST /jobs``), and the ones running here.
        self.job_manager = JobManager(self)
        self.worker.job_access = ConnectorJobs(self)

    def _on_connector_error(self, name: str, error: BaseException) -> None:
        self._schedule_change(lambda: self.worker.fail_connector(name, error, "reported a fatal error"))

    def _record_topic(self, connector: str, topic: str) -> None:
        if self.worker_config["topic.tracking.enable"]:
            self._active_topics.setdefault(connector, set()).add(topic)

    async def _start_connector_in_target_state(self, name: str) -> bool:
        """Start the connector here as its target state says; True if it now runs (RUNNING or PAUSED)."""
        config = self.config_store.connectors().get(name)
        if config is None:
            return False
        state = self.config_store.target_state(name)
        if state == TargetState.STOPPED:
            await self.worker.set_connector_state(name, State.STOPPED)
            return False
        self.supervisor.started(name)
        return await self.worker.start_connector(name, config, paused=state == TargetState.PAUSED)

    async def _generate_task_configs(self, name: str) -> list[dict[str, str]] | None:
        """The running connector's task configs, or None after failing the connector if it could not make them."""
        try:
            return await self.worker.task_configs(name)
        except Exception as exc:  # the connector's failure, reported in its status
            await self.worker.fail_connector(name, exc, "failed to generate task configs")
            return None

    @staticmethod
    async def _start_side_by_side(starts: Iterable[Awaitable[None]]) -> None:
        """Run task starts side by side, as Connect starts each task on its own thread.

        A task's ``start()`` may take seconds (a first read of its offsets or of a topic, a broker
        slow to answer); one after another, every task after it would wait. Every start runs to
        its end; the first exception one raised is raised after all have finished (a task's own
        failure to start is not one: it leaves that task FAILED).
        """
        results = await asyncio.gather(*starts, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _start_task(self, task_id: ConnectorTaskId, task_config: dict[str, str],
                          connector_config: dict[str, Any] | None = None) -> None:
        """Start one task here in its connector's target state."""
        self.supervisor.started(task_id)
        paused = self.config_store.target_state(task_id.connector) == TargetState.PAUSED
        await self.worker.start_task(task_id, task_config, paused=paused, connector_config=connector_config)

    def _should_restart_task(self, task_id: ConnectorTaskId) -> bool:
        """Whether a failed task still has a config, a running target state, and no instance here."""
        name = task_id.connector
        return (name in self.config_store.connectors()
                and self.config_store.target_state(name) != TargetState.STOPPED
                and task_id.task < len(self.config_store.task_configs(name))
                and task_id not in self.worker.tasks)

    def connector_warnings(self, name: str) -> list[str]:
        """Warnings the connector reported on this worker."""
        return self.worker.warnings.get(name, [])

    def _task_info(self, name: str, task: int, status) -> dict[str, Any]:
        """A task's status in Connect's shape, plus (beyond Connect) its warnings and automatic restarts."""
        task_id = ConnectorTaskId(name, task)
        info = {"id": task, **status.info(), **self.supervisor.info(task_id)}
        warnings = self.worker.task_warnings(task_id)
        if warnings:
            info["warnings"] = warnings
        return info

    # -- helpers -------------------------------------------------------------------------
    def _require(self, name: str) -> dict[str, str]:
        config = self.config_store.connectors().get(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return config

    def _checked_config(self, name: str, config: dict[str, Any],
                        initial_state: str | None) -> tuple[dict[str, str], TargetState]:
        """A submitted config as strings (with ``name``) and its initial target state; 400 if invalid."""
        config = {str(k): str(v) for k, v in config.items() if v is not None}
        config["name"] = name
        config = self._restore_hidden(name, config)
        target = INITIAL_STATES.get((initial_state or "RUNNING").upper())
        if target is None:
            raise BadRequestError(f"Invalid initial state {initial_state}; expected RUNNING, PAUSED or STOPPED")
        self.validate_or_raise(config)
        return config, target

    async def _restart_plan(self, name: str, include_tasks: bool,
                            only_failed: bool) -> tuple[dict[str, Any], bool, dict[int, Any]]:
        """Connect's restart plan: the status showing what restarts as RESTARTING, whether the
        connector instance restarts, and the statuses of the tasks that do."""
        connector_status = self.status_store.connector(name)
        restart_connector = not only_failed or bool(connector_status and connector_status.state == State.FAILED)
        tasks = {i: s for i, s in self._task_statuses(name).items()
                 if include_tasks and (not only_failed or s.state == State.FAILED)}
        plan = await self.connector_status(name)
        if restart_connector:
            plan["connector"]["state"] = State.RESTARTING.value
        for task in plan["tasks"]:
            if task["id"] in tasks:
                task["state"] = State.RESTARTING.value
                task.pop("trace", None)
        return plan, restart_connector, tasks

    def _task_statuses(self, name: str) -> dict:
        """Statuses of the connector's current tasks (a status left by a task since removed is not shown)."""
        count = len(self.config_store.task_configs(name))
        return {i: s for i, s in self.status_store.tasks(name).items() if i < count}

    # -- secrets: the stores keep real values; what leaves through these read methods is redacted --
    def _config_def_of(self, config: dict[str, Any]) -> ConfigDef:
        """The settings of the connector ``config`` names (common ones alone if its class is unknown)."""
        transforms_def = transform_config_def(config, self.plugins)  # their PASSWORD settings are secrets too
        try:
            cls = self.plugins.connector_class(str(config.get("connector.class", "")))
        except NotFoundError:
            return CONNECTOR_CONFIG_DEF.merged(transforms_def)
        return CONNECTOR_CONFIG_DEF.merged(cls.config_def).merged(transforms_def)

    def _redacted(self, config: dict[str, Any], config_def: ConfigDef | None = None) -> dict[str, Any]:
        return redact(config, config_def if config_def is not None else self._config_def_of(config))

    def _secrets_of(self, name: str) -> list[str]:
        """Every secret string of the connector's config and task configs (to scrub from traces)."""
        config = self.config_store.connectors().get(name) or {}
        config_def = self._config_def_of(config)
        found = set(secret_values(config, config_def))
        for task_config in self.config_store.task_configs(name):
            found.update(secret_values(task_config, config_def))
        return sorted(found, key=len, reverse=True)

    def _restore_hidden(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with each secret sent as ``[hidden]`` replaced by the stored value (a GET
        written back unchanged must not overwrite the secret); 400 if there is none to keep."""
        stored = self.config_store.connectors().get(name)
        restored, missing = restore_hidden(config, stored, self._config_def_of(config))
        if missing:
            raise BadRequestError(
                f"{', '.join(sorted(missing))}: the value {HIDDEN} stands for a secret already stored, but "
                f"connector {name} has no stored value for it; send the secret itself")
        return restored

    def _connector_type(self, config: dict[str, Any]) -> str:
        try:
            return self.plugins.connector_class(str(config.get("connector.class", ""))).type
        except NotFoundError:
            return "unknown"

    # -- worker ---------------------------------------------------------------------------
    async def server_info(self) -> dict[str, Any]:
        return {"version": __version__, "commit": "unknown", "kafka_cluster_id": self.kafka_cluster_id}

    # -- connectors -----------------------------------------------------------------------
    async def connectors(self) -> list[str]:
        return sorted(self.config_store.connectors())

    async def connector_info(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        tasks = [{"connector": name, "task": i} for i in range(len(self.config_store.task_configs(name)))]
        return {"name": name, "config": self._redacted(config), "tasks": tasks, "type": self._connector_type(config)}

    async def connector_config(self, name: str) -> dict[str, str]:
        return self._redacted(self._require(name))

    async def patch_connector_config(self, name, patch):
        config = dict(self._require(name))
        for key, value in patch.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if str(config.get("name", name)) != name:
            raise BadRequestError("Connector name configuration (name) cannot be changed by PATCH")
        _, info = await self.put_connector_config(name, config, allow_replace=True)
        return info

    async def connector_status(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        status = self.status_store.connector(name)
        connector = status.info() if status else {"state": State.UNASSIGNED.value, "worker_id": self.worker_id}
        connector.update(self.supervisor.info(name))
        warnings = self.connector_warnings(name)
        if warnings:
            connector["warnings"] = list(warnings)
        tasks = [self._task_info(name, i, s) for i, s in self._task_statuses(name).items()]
        status = {"name": name, "connector": connector, "tasks": tasks, "type": self._connector_type(config)}
        held = self.job_manager.connector_jobs(name)
        if held:  # beyond Connect: partitions a bulk job holds (its tasks do not read them meanwhile)
            status["jobs"] = held
        return _scrubbed(status, self._secrets_of(name))

    async def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._require(name)
        status = self._task_statuses(name).get(task)
        if status is None:
            raise NotFoundError(f"Task {name}-{task} not found")
        return _scrubbed(self._task_info(name, task, status), self._secrets_of(name))

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        config_def = self._config_def_of(self._require(name))
        return [{"id": {"connector": name, "task": i}, "config": self._redacted(c, config_def)}
                for i, c in enumerate(self.config_store.task_configs(name))]

    # -- offsets --------------------------------------------------------------------------
    async def _offset_store_of(self, name: str) -> OffsetStore:
        """Where a source connector's offsets are: the worker's store (a distributed herder also knows
        a connector's own ``offsets.storage.topic``; a standalone worker ignores it, as Connect's)."""
        config = self.config_store.connectors().get(name) or {}
        if str(config.get("offsets.storage.topic") or "").strip() and name not in self._warned_offsets_topic:
            self._warned_offsets_topic.add(name)
            log.warning("Connector %s: offsets.storage.topic is only applicable in distributed mode; this standalone "
                        "worker keeps its offsets in offset.storage.file.filename", name)
        return self.offset_store

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        if self._connector_type(config) == "sink":  # its consumer group's offsets, as Connect
            return {"offsets": await sink_offsets.read(self.worker_config, name, config)}
        pairs = await (await self._offset_store_of(name)).all(name)
        return {"offsets": [{"partition": p, "offset": o} for p, o in pairs]}

    def _require_stopped(self, name: str) -> dict[str, str]:
        """The connector's config, or BadRequestError unless it is STOPPED (no task configs)."""
        config = self._require(name)
        if self.config_store.target_state(name) != TargetState.STOPPED or self.config_store.task_configs(name) \
                or self._runs_tasks_here(name):
            raise BadRequestError(
                "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
                f"for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")
        return config

    def _runs_tasks_here(self, name: str) -> bool:
        """Whether tasks of the connector still run on this worker."""
        return bool(self.worker.connector_tasks(name))

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        async with self._changes_serialised():
            config = self._require_stopped(name)
            pairs = self._parse_offsets(offsets)
            if self._connector_type(config) == "sink":
                await sink_offsets.alter(self.worker_config, name, config, sink_offsets.parse(pairs))
                return "The offsets for this connector have been altered successfully"
            connector_class = self.plugins.connector_class(config["connector.class"])
            if issubclass(connector_class, SourceConnector):
                await connector_class().alter_offsets(config, pairs)
            await (await self._offset_store_of(name)).put(name, pairs)
            return "The offsets for this connector have been altered successfully"

    async def reset_connector_offsets(self, name: str) -> str:
        async with self._changes_serialised():
            config = self._require_stopped(name)
            if self._connector_type(config) == "sink":
                await sink_offsets.reset(self.worker_config, name, config)
                return "The offsets for this connector have been reset successfully"
            store = await self._offset_store_of(name)
            pairs = await store.all(name)
            if pairs:
                await store.put(name, [(p, None) for p, _ in pairs])
            return "The offsets for this connector have been reset successfully"

    @staticmethod
    def _parse_offsets(offsets: list[dict[str, Any]]) -> list[tuple[dict, dict | None]]:
        """``[{"partition", "offset"}]`` as pairs, or BadRequestError naming what is malformed."""
        if not offsets:
            raise BadRequestError("The offsets to be altered must not be empty")
        pairs = []
        for entry in offsets:
            partition, offset = entry.get("partition"), entry.get("offset")
            if not isinstance(partition, dict) or not partition:
                raise BadRequestError("Each offset must have a non-empty JSON object as its 'partition'")
            if offset is not None and not isinstance(offset, dict):
                raise BadRequestError("Each 'offset' must be a JSON object or null")
            pairs.append((partition, offset))
        return pairs

    # -- topics (active-topic tracking, per worker) ----------------------------------------
    async def connector_active_topics(self, name: str) -> dict[str, Any]:
        if not self.worker_config["topic.tracking.enable"]:
            raise ForbiddenError("Topic tracking is disabled.")
        self._require(name)
        return {name: {"topics": sorted(self._active_topics.get(name, set()))}}

    async def reset_connector_active_topics(self, name: str) -> None:
        if not self.worker_config["topic.tracking.enable"]:
            raise ForbiddenError("Topic tracking is disabled.")
        if not self.worker_config["topic.tracking.allow.reset"]:
            raise ForbiddenError("Topic tracking reset is disabled.")
        self._require_stopped(name)
        self._active_topics.pop(name, None)
        for task in self.worker.tasks.values():
            if task.id.connector == name:
                task.forget_topics()

    # -- plugins --------------------------------------------------------------------------
    async def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        plugins = []
        for name, cls in self.plugins.connectors().items():
            info = {"class": name, "type": cls.type}
            version = _version_of(cls)
            if version is not None:
                info["version"] = version
            plugins.append(info)
        if not connectors_only:  # as Connect: type "transformation" / "predicate", sorted by class
            for kind, table in (("transformation", self.plugins.transforms), ("predicate", self.plugins.predicates)):
                plugins += [{"class": name, "type": kind, **_version_info(cls)} for name, cls in table.all().items()]
            for kind, table in (("converter", self.plugins.converters),
                                ("header_converter", self.plugins.header_converters)):
                plugins += [{"class": name, "type": kind, **_version_info(cls)} for name, cls in table.all().items()]
        return plugins

    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        try:
            cls = self.plugins.connector_class(plugin)
        except NotFoundError:  # Connect serves the settings of transformations and predicates too
            cls = _transform_or_predicate(self.plugins, plugin)
        return [key.info() for key in cls.config_def.keys.values()]

    async def validate_connector_config(self, plugin: str, config: dict[str, Any]) -> dict[str, Any]:
        cls = self.plugins.connector_class(plugin)
        named = config.get("connector.class")
        if named is not None and not self.plugins.matches(cls, str(named)):
            raise BadRequestError(f"Included connector type {named} does not match request type {plugin}")
        config = {**config, "connector.class": str(named or full_name(cls))}
        return _config_infos(full_name(cls), cls, config, self.plugins,
                             self.worker_config["topic.creation.enable"],
                             exactly_once=worker_support(self.worker_config))

    def validate_or_raise(self, config: dict[str, Any]) -> None:
        """BadRequestError listing every problem of a connector config (class unknown, values invalid)."""
        validate_or_raise(self.plugins, config, self.worker_config["topic.creation.enable"],
                          exactly_once=worker_support(self.worker_config))

    # -- bulk jobs ----------------------------------------------------------------------------
    async def job_plugins(self) -> list[dict[str, Any]]:
        return self.job_manager.plugins()

    async def jobs(self) -> list[str]:
        return self.job_manager.names()

    async def job_info(self, name: str) -> dict[str, Any]:
        return self.job_manager.info(name)

    async def create_job(self, name: str, config: dict[str, Any], *, origin: str = "rest") -> dict[str, Any]:
        return await self.job_manager.create(name, config, origin=origin)

    async def delete_job(self, name: str) -> tuple[int, dict[str, Any]]:
        return await self.job_manager.delete(name)


def validate_or_raise(plugins: PluginRegistry, config: dict[str, Any], topic_creation_enabled: bool = True, *,
                      exactly_once: str | None = None) -> None:
    """BadRequestError listing every problem of a connector config (class unknown, values invalid).

    ``topic_creation_enabled``: the worker's ``topic.creation.enable``; when true, a source
    connector's ``topic.creation.*`` settings are checked too (KIP-158). ``exactly_once`` is the
    worker's ``exactly.once.source.support`` (None: a standalone worker): a source connector's
    ``exactly.once.support=required`` that cannot hold is one of the problems."""
    try:
        cls = plugins.connector_class(str(config.get("connector.class", "")))
    except NotFoundError as exc:
        if not config.get("connector.class"):
            raise BadRequestError("Connector config is missing required configuration \"connector.class\"") from None
        raise BadRequestError(str(exc)) from None
    infos = _config_infos(full_name(cls), cls, config, plugins, topic_creation_enabled, exactly_once=exactly_once)
    errors = [f"{c['value']['name']}: {e}" for c in infos["configs"] for e in c["value"]["errors"]]
    if errors:
        raise BadRequestError(
            f"Connector configuration is invalid and contains the following {len(errors)} error(s):\n"
            + "\n".join(errors)
            + f"\nYou can also find the above list of errors at the endpoint "
              f"`/connector-plugins/{cls.__name__}/config/validate`")


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    """``value`` (a JSON-ready status) with every secret string in it replaced by ``[hidden]``."""
    if not secrets:
        return value
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {k: _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    return value


def _version_of(cls: type[Connector]) -> str | None:
    try:
        version = cls().version()
    except Exception:
        return None
    return None if version in (None, "", "unknown") else version


def _transform_or_predicate(plugins: PluginRegistry, plugin: str) -> type:
    """The transformation or predicate class ``plugin`` names; NotFoundError as for a connector if none."""
    for table in (plugins.transforms, plugins.predicates, plugins.converters, plugins.header_converters):
        try:
            return table.resolve(plugin)
        except NotFoundError:
            continue
    return plugins.connector_class(plugin)  # raises the usual "no such connector" error


def _version_info(cls: type) -> dict[str, str]:
    version = _version_of(cls)
    return {} if version is None else {"version": version}


def _config_infos(name: str, cls: type[Connector], config: dict[str, Any],
                  plugins: PluginRegistry | None = None, topic_creation_enabled: bool = True, *,
                  exactly_once: str | None = None) -> dict[str, Any]:
    """Connect's ConfigInfos for ``config``: common settings, the connector's own, then each
    transform's and predicate's (``transforms.<alias>.*``, ``predicates.<alias>.*``).

    A source connector's ``topic.creation.<group>.*`` settings follow the common ones when topic
    creation is in effect (``topic_creation_enabled`` and any ``topic.creation.*`` setting given).
    ``exactly_once``: the worker's ``exactly.once.source.support`` (None: standalone); a source
    connector's exactly-once settings are checked against it and the connector's own answers."""
    # with topics / topics.regex for a sink; topic.creation.groups and the exactly-once keys for a source
    common_def = connector_config_def(cls)
    values: list[tuple[Any, ConfigValue]] = [(common_def.keys[v.name], v) for v in common_def.validate(config)]
    add_topic_errors(cls, config, (v for _, v in values))
    add_exactly_once_errors(cls, config, (v for _, v in values), exactly_once)
    creation: list[tuple[Any, ConfigValue]] = []
    if cls.type == "source" and topic_creation_enabled and topic_creation.uses_topic_creation(config):
        creation = topic_creation.validate(config)
        values += creation
    if plugins is not None:  # an unknown converter class or bad converter setting, on its field
        converter_errors = {v.name: v.errors for v in validate_converters(config, plugins)}
        for _, value in values:
            value.errors.extend(converter_errors.get(value.name, ()))
    try:
        own = cls().validate(config)
    except Exception as exc:  # a plugin's validate must not turn bad input into a 500
        own = [ConfigValue("connector.class", config.get("connector.class"),
                           errors=[f"The connector's validate() raised: {exc}"])]
    own_keys = cls.config_def.keys
    values += [(own_keys.get(v.name), v) for v in own if v.name not in common_def.keys or v.errors]
    alias_entries = alias_configs(config, plugins) if plugins is not None else []
    values += list(iter_values(alias_entries))
    config_def = common_def.merged(cls.config_def).merged(ConfigDef(k for e in alias_entries for k in e.keys))
    config_def = config_def.merged(ConfigDef(k for k, _ in creation))
    secrets = secret_values(config, config_def)
    configs = []
    for key, value in values:
        definition = key.info() if key is not None else {"name": value.name}
        shown = value.info(key.type if key is not None else common_def.keys["name"].type)
        if shown["value"] is not None and is_secret(value.name, config_def):
            shown["value"] = HIDDEN
        shown["errors"] = [scrub(e, secrets) for e in shown["errors"]]
        configs.append({"definition": definition, "value": shown})
    groups = [*common_def.groups(), *dict.fromkeys(k.group for k, _ in creation)]
    groups += [g for g in cls.config_def.groups() if g not in groups]
    groups += [e.group for e in alias_entries]
    return {"name": name, "error_count": sum(len(v.errors) for _, v in values), "groups": groups,
            "configs": configs}
