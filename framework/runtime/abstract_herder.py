"""AbstractHerder: what every herder shares, as Kafka Connect's AbstractHerder.

Reads answered from the config and status stores (connector lists, configs, statuses, task
configs, offsets), config validation with the one ConfigDef of each plugin, and the plugin
listings. Subclasses decide how changes are made: :class:`~framework.runtime.standalone.
StandaloneHerder` applies them on its one worker, :class:`~framework.runtime.distributed.herder.
DistributedHerder` through the cluster's config topic.
"""

from __future__ import annotations

from typing import Any

from framework import __version__
from framework.api.config import Config
from framework.api.config import ConfigValue
from framework.api.connector import Connector
from framework.api.errors import BadRequestError, ForbiddenError, NotFoundError
from framework.plugins import PluginRegistry, full_name
from framework.runtime.connector_config import CONNECTOR_CONFIG_DEF
from framework.runtime.herder import Herder
from framework.runtime.worker import Worker
from framework.storage.configs import ConfigStore, TargetState
from framework.storage.offsets import OffsetStore
from framework.storage.status import State, StatusStore

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
    #: connector -> topics its tasks on this worker wrote to
    _active_topics: dict[str, set[str]]

    def connector_warnings(self, name: str) -> list[str]:
        """Warnings the connector reported on this worker (none by default)."""
        return []

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
        return {"name": name, "config": config, "tasks": tasks, "type": self._connector_type(config)}

    async def connector_config(self, name: str) -> dict[str, str]:
        return self._require(name)

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
        warnings = self.connector_warnings(name)
        if warnings:
            connector["warnings"] = list(warnings)
        tasks = [{"id": i, **s.info()} for i, s in self._task_statuses(name).items()]
        return {"name": name, "connector": connector, "tasks": tasks, "type": self._connector_type(config)}

    async def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._require(name)
        status = self._task_statuses(name).get(task)
        if status is None:
            raise NotFoundError(f"Task {name}-{task} not found")
        return {"id": task, **status.info()}

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        return [{"id": {"connector": name, "task": i}, "config": c}
                for i, c in enumerate(self.config_store.task_configs(name))]

    # -- offsets --------------------------------------------------------------------------
    async def connector_offsets(self, name: str) -> dict[str, Any]:
        self._require(name)
        pairs = await self.offset_store.all(name)
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
        return False

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
        return plugins

    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        cls = self.plugins.connector_class(plugin)
        return [key.info() for key in cls.config_def.keys.values()]

    async def validate_connector_config(self, plugin: str, config: dict[str, Any]) -> dict[str, Any]:
        cls = self.plugins.connector_class(plugin)
        named = config.get("connector.class")
        if named is not None and not self.plugins.matches(cls, str(named)):
            raise BadRequestError(f"Included connector type {named} does not match request type {plugin}")
        config = {**config, "connector.class": str(named or full_name(cls))}
        return _config_infos(full_name(cls), cls, config)

    def validate_or_raise(self, config: dict[str, Any]) -> None:
        """BadRequestError listing every problem of a connector config (class unknown, values invalid)."""
        try:
            cls = self.plugins.connector_class(str(config.get("connector.class", "")))
        except NotFoundError as exc:
            if not config.get("connector.class"):
                raise BadRequestError("Connector config is missing required configuration \"connector.class\"") from None
            raise BadRequestError(str(exc)) from None
        infos = _config_infos(full_name(cls), cls, config)
        errors = [f"{c['value']['name']}: {e}" for c in infos["configs"] for e in c["value"]["errors"]]
        if errors:
            raise BadRequestError(
                f"Connector configuration is invalid and contains the following {len(errors)} error(s):\n"
                + "\n".join(errors)
                + f"\nYou can also find the above list of errors at the endpoint "
                  f"`/connector-plugins/{cls.__name__}/config/validate`")


def _version_of(cls: type[Connector]) -> str | None:
    try:
        version = cls().version()
    except Exception:
        return None
    return None if version in (None, "", "unknown") else version


def _config_infos(name: str, cls: type[Connector], config: dict[str, Any]) -> dict[str, Any]:
    """Connect's ConfigInfos for ``config``: common settings, then the connector's own."""
    common_def = CONNECTOR_CONFIG_DEF
    values: list[tuple[Any, ConfigValue]] = [(common_def.keys[v.name], v) for v in common_def.validate(config)]
    try:
        own = cls().validate(config)
    except Exception as exc:  # a plugin's validate must not turn bad input into a 500
        own = [ConfigValue("connector.class", config.get("connector.class"),
                           errors=[f"The connector's validate() raised: {exc}"])]
    own_keys = cls.config_def.keys
    values += [(own_keys.get(v.name), v) for v in own if v.name not in common_def.keys or v.errors]
    configs = []
    for key, value in values:
        definition = key.info() if key is not None else {"name": value.name}
        configs.append({"definition": definition,
                        "value": value.info(key.type if key is not None else common_def.keys["name"].type)})
    groups = [*common_def.groups(), *[g for g in cls.config_def.groups() if g not in common_def.groups()]]
    return {"name": name, "error_count": sum(len(v.errors) for _, v in values), "groups": groups,
            "configs": configs}
