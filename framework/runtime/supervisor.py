"""Supervisor: what happens when a connector or task fails, written once for every herder.

A failure (an exception escaping ``start``, ``poll``, a runtime loop, ``task_configs``, or a
connector's ``raise_error``) is recorded by the :class:`~mirrorline.runtime.worker.Worker` as
FAILED with its trace, an ERROR log line and a metric. The Worker then tells the supervisor,
which restarts the failed instance after an exponential back-off
(``restart.backoff.initial.ms`` doubling up to ``restart.backoff.max.ms``), as long as
``restart.on.failure.enable`` is on. An instance that ran for longer than the maximum back-off
before failing again starts over from the initial delay.

The supervisor decides *when*; the herder decides *how*: restarts are handed to the herder's
``schedule`` callback, so they run serialised with every other change the herder makes (under
the standalone herder's lock, on the distributed herder's one coroutine), and the herder
checks then whether the instance should still run here (not deleted, stopped or moved).
A manual restart or a stop cancels a pending automatic restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mirrorline.api.config import Config
from mirrorline.api.records import ConnectorTaskId
from mirrorline.runtime import metrics
from mirrorline.runtime.background import BackgroundTasks

log = logging.getLogger(__name__)

#: A connector's name or a task's id.
Key = str | ConnectorTaskId
Schedule = Callable[[Callable[[], Awaitable[None]]], None]


@dataclass
class _Record:
    """Failure history of one connector or task."""

    failures: int = 0
    restarts: int = 0
    started_at: float = field(default_factory=time.monotonic)
    pending: asyncio.Task | None = None
    next_restart_at: float | None = None


class Supervisor:
    """Restarts failed connectors and tasks with exponential back-off, and says so in status."""

    def __init__(self, config: Config, schedule: Schedule,
                 restart_connector: Callable[[str], Awaitable[None]],
                 restart_task: Callable[[ConnectorTaskId], Awaitable[None]]):
        """``restart_connector``/``restart_task`` are the herder's own restarts; they are run through
        ``schedule`` and must check that the instance should still run on this worker."""
        self.enabled: bool = config["restart.on.failure.enable"]
        self.initial_s: float = config["restart.backoff.initial.ms"] / 1000
        self.max_s: float = max(config["restart.backoff.max.ms"] / 1000, self.initial_s)
        self._schedule = schedule
        self._restart_connector = restart_connector
        self._restart_task = restart_task
        self._records: dict[Key, _Record] = {}
        self._background = BackgroundTasks("supervisor")

    def started(self, key: Key) -> None:
        """Note that ``key`` (re)started now: a later failure long after this resets the back-off."""
        self._records.setdefault(key, _Record()).started_at = time.monotonic()

    def failed(self, key: Key) -> float | None:
        """Record a failure of ``key`` and schedule its restart; the delay in seconds, or None if off."""
        record = self._records.setdefault(key, _Record())
        if time.monotonic() - record.started_at > self.max_s:
            record.failures = 0  # it ran well for a while: this is a new incident
        delay = min(self.initial_s * (2 ** record.failures), self.max_s)
        record.failures += 1
        self._cancel_pending(record)
        if not self.enabled:
            return None
        record.next_restart_at = time.monotonic() + delay
        record.pending = self._background.spawn(self._restart_later(key, record, delay), f"restart-{key}")
        return delay

    async def _restart_later(self, key: Key, record: _Record, delay: float) -> None:
        await asyncio.sleep(delay)
        record.pending = None
        record.next_restart_at = None
        self._schedule(lambda: self._restart(key, record))

    async def _restart(self, key: Key, record: _Record) -> None:
        if self._records.get(key) is not record:
            return  # forgotten (deleted, restarted by hand) meanwhile
        record.restarts += 1
        record.started_at = time.monotonic()
        if isinstance(key, ConnectorTaskId):
            metrics.TASK_RESTARTS.labels(key.connector, str(key.task)).inc()
            log.info("Restarting failed task %s (automatic restart %d)", key, record.restarts)
            await self._restart_task(key)
        else:
            metrics.CONNECTOR_RESTARTS.labels(key).inc()
            log.info("Restarting failed connector %s (automatic restart %d)", key, record.restarts)
            await self._restart_connector(key)

    def forget(self, key: Key) -> None:
        """Cancel a pending restart of ``key`` and clear its history (manual restart, stop, delete)."""
        record = self._records.pop(key, None)
        if record is not None:
            self._cancel_pending(record)

    def forget_connector(self, name: str) -> None:
        """Forget a connector and all of its tasks."""
        for key in [k for k in self._records if k == name or (isinstance(k, ConnectorTaskId) and k.connector == name)]:
            self.forget(key)

    def info(self, key: Key) -> dict:
        """What status shows beyond Connect: ``{"restarts": n[, "next_restart_in_ms": ms]}`` (empty if none)."""
        record = self._records.get(key)
        if record is None or (not record.restarts and record.next_restart_at is None):
            return {}
        out = {"restarts": record.restarts}
        if record.next_restart_at is not None:
            out["next_restart_in_ms"] = max(0, int((record.next_restart_at - time.monotonic()) * 1000))
        return out

    @staticmethod
    def _cancel_pending(record: _Record) -> None:
        if record.pending is not None:
            record.pending.cancel()
            record.pending = None
        record.next_restart_at = None

    async def close(self) -> None:
        """Cancel every pending restart."""
        await self._background.close()
