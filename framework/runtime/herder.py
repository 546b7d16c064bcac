"""The Herder: the one interface through which the REST API and the CLI manage connectors.

REST handlers and CLI commands are very simple wrappers of these methods: they parse a
request, call one method, and map the result or the exception to a response. Every
method is a coroutine running on the worker's event loop. Errors are
:mod:`mirrorline.api.errors` types: NotFoundError (404), AlreadyExistsError (409),
BadRequestError / ConfigError (400), RebalanceInProgressError (409).

Return values are plain JSON-ready dicts and lists in Kafka Connect's REST shapes
(``../shared/reference/mm2.md`` section 8), so the REST layer serialises them unchanged:

- ConnectorInfo ``{"name", "config", "tasks": [{"connector", "task"}], "type"}``
- ConnectorStateInfo ``{"name", "connector": {"state", "worker_id"[, "trace"]},
  "tasks": [{"id", "state", "worker_id"[, "trace"]}], "type"}``
- TaskInfo ``{"id": {"connector", "task"}, "config"}``
- ConnectorOffsets ``{"offsets": [{"partition": {...}, "offset": {...}}]}``

Implementations: :class:`mirrorline.runtime.standalone.StandaloneHerder` (one worker, file
and memory stores) and :class:`mirrorline.runtime.distributed.herder.DistributedHerder` (a
cluster of workers sharing Kafka-backed stores).

The herder never speaks HTTP. A request only another worker can carry out (a leader-only
write, a restart of an instance running elsewhere) raises :class:`NotLeaderError` or
:class:`NotAssignedError` carrying that worker's URL, and the REST layer forwards the request
there, as Connect's herder throws ``NotLeaderException`` and its
``HerderRequestHandler.completeOrForwardRequest`` forwards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from mirrorline.api.errors import BadRequestError, ConnectError, NotFoundError


class RequestElsewhereError(ConnectError):
    """This worker cannot carry out the request; the worker at :attr:`url` can.

    The caller forwards the request unchanged to :attr:`url` (REST: with ``?forward=false``). A
    request that was already forwarded once is not forwarded again: it is answered 409 with this
    message, since the cluster is then between two views of who does what (a rebalance).
    """

    http_status = 409

    def __init__(self, message: str, url: str):
        super().__init__(message)
        self.url = url


class NotLeaderError(RequestElsewhereError):
    """Only the leader makes this change (connector configs, deletions, stop, restart plans); :attr:`url` is the leader's."""


class NotAssignedError(RequestElsewhereError):
    """The instance runs on another worker; :attr:`url` is that worker's."""


class Herder(ABC):
    """Manages connectors and tasks for a worker or a cluster of workers."""

    # -- worker ---------------------------------------------------------------------------
    @abstractmethod
    async def server_info(self) -> dict[str, Any]:
        """ServerInfo: ``{"version", "commit", "kafka_cluster_id"}``."""

    @abstractmethod
    async def health(self) -> tuple[str, str]:
        """``(status, message)`` with status ``healthy``, ``starting`` or ``unhealthy``."""

    # -- connectors -----------------------------------------------------------------------
    @abstractmethod
    async def connectors(self) -> list[str]:
        """Names of all connectors, sorted."""

    @abstractmethod
    async def connector_info(self, name: str) -> dict[str, Any]:
        """ConnectorInfo of one connector; NotFoundError if unknown."""

    @abstractmethod
    async def connector_config(self, name: str) -> dict[str, str]:
        """The connector's config as submitted (plus ``name``); NotFoundError if unknown."""

    @abstractmethod
    async def put_connector_config(self, name: str, config: dict[str, Any], *, allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        """Create or replace a connector; returns ``(created, ConnectorInfo)``.

        Validates first: an invalid config raises BadRequestError whose message starts
        "Connector configuration is invalid and contains the following N error(s):" and lists
        them. With ``allow_replace=False`` an existing name raises AlreadyExistsError.
        ``initial_state`` is ``RUNNING`` (default), ``PAUSED`` or ``STOPPED`` and applies only
        on creation.
        """

    @abstractmethod
    async def patch_connector_config(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the config (a None value removes the key), then as put; ConnectorInfo."""

    @abstractmethod
    async def delete_connector(self, name: str) -> None:
        """Stop and remove a connector and its tasks; NotFoundError if unknown."""

    @abstractmethod
    async def connector_status(self, name: str) -> dict[str, Any]:
        """ConnectorStateInfo; NotFoundError if unknown."""

    @abstractmethod
    async def task_status(self, name: str, task: int) -> dict[str, Any]:
        """``{"id", "state", "worker_id"[, "trace"]}``; NotFoundError if the connector or task is unknown."""

    @abstractmethod
    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        """TaskInfo list of a connector, by task id."""

    @abstractmethod
    async def restart_connector(self, name: str, *, include_tasks: bool = False,
                                only_failed: bool = False) -> dict[str, Any] | None:
        """Restart the connector (and tasks per the flags).

        With both flags false restarts just the connector instance and returns None (REST
        204). Otherwise returns the ConnectorStateInfo showing the instances being
        restarted as ``RESTARTING`` (REST 202).
        """

    @abstractmethod
    async def restart_task(self, name: str, task: int) -> None:
        """Restart one task; NotFoundError if unknown."""

    @abstractmethod
    async def pause_connector(self, name: str) -> None:
        """Pause the connector and its tasks (idempotent)."""

    @abstractmethod
    async def resume_connector(self, name: str) -> None:
        """Resume a paused or stopped connector."""

    @abstractmethod
    async def stop_connector(self, name: str) -> None:
        """Stop the connector and shut its tasks down (task count becomes 0); config is kept."""

    async def fence_zombies(self, name: str) -> None:
        """Fence the previous generation of a source connector's tasks (Connect's internal
        ``PUT /connectors/{name}/fence``, KIP-618). Only distributed herders can; this default
        answers as Connect's standalone mode does."""
        raise BadRequestError("Kafka Connect in standalone mode does not support exactly-once source connectors.")

    # -- offsets --------------------------------------------------------------------------
    @abstractmethod
    async def connector_offsets(self, name: str) -> dict[str, Any]:
        """ConnectorOffsets: every committed source partition and offset of the connector."""

    @abstractmethod
    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """Write ``[{"partition", "offset"}]`` (offset None removes); returns the success message.

        BadRequestError unless the connector is STOPPED (target state stopped, no tasks), or
        when the list is empty or malformed.
        """

    @abstractmethod
    async def reset_connector_offsets(self, name: str) -> str:
        """Remove every committed offset of a STOPPED connector; returns the success message."""

    # -- topics (active-topic tracking) ---------------------------------------------------
    @abstractmethod
    async def connector_active_topics(self, name: str) -> dict[str, Any]:
        """``{name: {"topics": [...]}}``: topics the connector's tasks have written to."""

    @abstractmethod
    async def reset_connector_active_topics(self, name: str) -> None:
        """Forget the active topics of a connector."""

    # -- plugins --------------------------------------------------------------------------
    @abstractmethod
    async def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """PluginInfo list: ``{"class", "type", "version"}``."""

    @abstractmethod
    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """ConfigKeyInfo list of a plugin (framework connector settings included); NotFoundError."""

    @abstractmethod
    async def validate_connector_config(self, plugin: str, config: dict[str, Any]) -> dict[str, Any]:
        """ConfigInfos for ``config`` checked against ``plugin``; errors are in the body.

        BadRequestError when ``config`` names a ``connector.class`` that is not ``plugin``.
        """

    # -- bulk jobs (beyond Connect; herders that run none keep these defaults) ---------------
    async def job_plugins(self) -> list[dict[str, Any]]:
        """The installed job classes: ``{"class", "name", "type": "job", "version", "description", ...}``."""
        return []

    async def jobs(self) -> list[str]:
        """Names of all jobs, sorted."""
        return []

    async def job_info(self, name: str) -> dict[str, Any]:
        """A job's config, state, progress, rate, ETA, Spark UI, result and ``worker_id``; NotFoundError."""
        raise NotFoundError(f"Job {name} not found")

    async def create_job(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Accept a job (``{"job.class", "connector"?, ...}``); its info. 4xx naming the field for bad input."""
        raise BadRequestError("this worker runs no jobs")

    async def delete_job(self, name: str) -> tuple[int, dict[str, Any]]:
        """Cancel a job that has not finished (202) or remove a finished one (200, with its result)."""
        raise NotFoundError(f"Job {name} not found")
