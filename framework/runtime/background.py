"""Ownership of background coroutines: every one is started here and stopped here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class BackgroundTasks:
    """Starts named asyncio tasks, logs the ones that crash, and cancels and awaits them all on close."""

    def __init__(self, owner: str):
        self.owner = owner
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run ``coro`` in the background, owned by this object."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.owner}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Background task %s crashed: %r. Its owner should have caught this; please report it "
                      "with this trace", task.get_name(), task.exception(), exc_info=task.exception())

    def cancel_all(self, except_current: bool = False) -> None:
        """Cancel every task now without waiting (but the calling task itself if ``except_current``)."""
        current = asyncio.current_task() if except_current else None
        for task in list(self._tasks):
            if task is not current:
                task.cancel()

    async def close(self, timeout: float = 10.0) -> None:
        """Cancel every task and wait (up to ``timeout``) for them to finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                log.warning("Background task %s did not stop within %.0fs", task.get_name(), timeout)
