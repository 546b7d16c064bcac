"""Connector configs, task configs and target states.

Records: ``connector -> config`` (None when deleted), ``connector -> [task config, ...]``
(replaced as a whole, so tasks never see half a reconfiguration) and ``connector ->
target state`` (what the user asked for: STARTED, PAUSED or STOPPED).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum

from mirrorline.storage.jobs import JobConfigs


class TargetState(str, Enum):
    """The state a user asked a connector to be in."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class ConfigStore(ABC):
    """Reads and writes connector configs, task configs and target states."""

    async def start(self) -> None:
        """Load existing configs."""

    async def stop(self, writes_wait_s: float | None = None) -> None:
        """Release resources. ``writes_wait_s``: how long to wait for writes not yet stored (None:
        the store's own bound; 0 when the caller has already waited for its cluster in vain)."""

    @abstractmethod
    def connectors(self) -> dict[str, dict[str, str]]:
        """Configs of every connector, by name."""

    @abstractmethod
    def task_configs(self, connector: str) -> list[dict[str, str]]:
        """The connector's current task configs (empty when none or stopped)."""

    @abstractmethod
    def target_state(self, connector: str) -> TargetState:
        """The connector's target state (STARTED when never set)."""

    @abstractmethod
    async def put_connector(self, connector: str, config: dict[str, str]) -> None:
        """Create or replace a connector's config."""

    @abstractmethod
    async def remove_connector(self, connector: str) -> None:
        """Delete a connector's config, task configs and target state."""

    @abstractmethod
    async def put_task_configs(self, connector: str, configs: list[dict[str, str]]) -> None:
        """Replace all task configs of a connector at once."""

    @abstractmethod
    async def put_target_state(self, connector: str, state: TargetState) -> None:
        """Record the state the user asked for."""


class MemoryConfigStore(ConfigStore):
    """Configs in dicts (standalone mode: connector configs come from files or REST each run)."""

    def __init__(self) -> None:
        #: Bulk jobs' configs and target states.
        self.jobs = JobConfigs()
        self._configs: dict[str, dict[str, str]] = {}
        self._tasks: dict[str, list[dict[str, str]]] = {}
        self._states: dict[str, TargetState] = {}

    def connectors(self):
        return {name: dict(config) for name, config in sorted(self._configs.items())}

    def task_configs(self, connector):
        return [dict(c) for c in self._tasks.get(connector, [])]

    def target_state(self, connector):
        return self._states.get(connector, TargetState.STARTED)

    async def put_connector(self, connector, config):
        self._configs[connector] = dict(config)

    async def remove_connector(self, connector):
        self._configs.pop(connector, None)
        self._tasks.pop(connector, None)
        self._states.pop(connector, None)

    async def put_task_configs(self, connector, configs):
        self._tasks[connector] = [dict(c) for c in configs]

    async def put_target_state(self, connector, state):
        self._states[connector] = state
