"""Statuses of connectors and tasks: state, failure trace and the worker running them.

Records: ``connector name -> Status`` and ``(connector, task id) -> Status``. States are
Kafka Connect's: UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED (connector only).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum

from mirrorline.storage.jobs import JobStatuses


class State(str, Enum):
    """A connector's or task's state, named as Kafka Connect names them."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class Status:
    """One status record."""

    state: State
    worker_id: str
    trace: str | None = None
    generation: int = 0
    #: Beyond Connect: a digest of the task config the instance runs (tasks only; None when unknown)
    config_digest: str | None = None

    def info(self) -> dict:
        """Connect's JSON shape: ``{"state", "worker_id"[, "trace"]}`` (trace omitted when empty)."""
        out = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace:
            out["trace"] = self.trace
        return out


class StatusStore(ABC):
    """Reads and writes statuses."""

    async def start(self) -> None:
        """Load existing statuses."""

    async def stop(self, writes_wait_s: float | None = None) -> None:
        """Release resources. ``writes_wait_s``: how long to wait for writes not yet stored (None:
        the store's own bound; 0 when the caller has already waited for its cluster in vain)."""

    @abstractmethod
    async def put_connector(self, connector: str, status: Status) -> None:
        """Record a connector's status."""

    @abstractmethod
    async def put_task(self, connector: str, task: int, status: Status) -> None:
        """Record a task's status."""

    @abstractmethod
    def connector(self, connector: str) -> Status | None:
        """A connector's latest status, or None."""

    @abstractmethod
    def tasks(self, connector: str) -> dict[int, Status]:
        """Latest statuses of a connector's tasks, by task id."""

    @abstractmethod
    async def remove(self, connector: str, keep_connector: bool = False) -> None:
        """Forget a connector's task statuses (and its own unless ``keep_connector``)."""


class MemoryStatusStore(StatusStore):
    """Statuses in dicts."""

    def __init__(self) -> None:
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[str, dict[int, Status]] = {}
        #: Bulk jobs' statuses.
        self.jobs = JobStatuses()

    async def put_connector(self, connector, status):
        self._connectors[connector] = status

    async def put_task(self, connector, task, status):
        self._tasks.setdefault(connector, {})[task] = status

    def connector(self, connector):
        return self._connectors.get(connector)

    def tasks(self, connector):
        return dict(sorted(self._tasks.get(connector, {}).items()))

    async def remove(self, connector, keep_connector=False):
        self._tasks.pop(connector, None)
        if not keep_connector:
            self._connectors.pop(connector, None)
