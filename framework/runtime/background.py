"""Ownership of background coroutines: every one is started here and stopped here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class StrayCancellation(RuntimeError):
    """A ``CancelledError`` that nobody requested ended a coroutine.

    It comes from inside: code that awaited a task or future which was itself cancelled (a
    client's internal task, an abandoned stop) lets the ``CancelledError`` through. Taken for the
    coroutine's own cancellation it would end a loop silently; the runtime reports it as this
    failure instead.
    """


def cancelled_from_outside() -> bool:
    """Whether the current task was asked to stop (``task.cancel()``), as opposed to meeting a
    ``CancelledError`` raised from inside what it awaited (Python 3.11's ``Task.cancelling()``)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def without_stray_cancellation(awaitable: Awaitable[T], what: str) -> T:
    """Await ``awaitable``; a ``CancelledError`` nobody requested comes out as :class:`StrayCancellation`
    naming ``what``, while the caller's own cancellation passes through as it is."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        if cancelled_from_outside():
            raise
        raise StrayCancellation(f"{what} ended with a CancelledError that nobody requested") from None


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
        if task.cancelled():
            if task.cancelling() == 0:  # nobody called task.cancel(): a CancelledError from inside ended it
                log.error("Background task %s ended with a CancelledError that nobody requested (it awaited "
                          "something that was cancelled); what it did has stopped. Please report it", task.get_name())
            return
        if task.exception() is not None:
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
