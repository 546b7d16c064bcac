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


def where_awaiting(task: asyncio.Task) -> str:
    """The chain of awaits ``task`` is suspended in, outermost first (``function (file:line) > ...``),
    ending with what it waits on: says where a task that ignores its cancellation is stuck."""
    steps: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(steps) < 40:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None) \
            or getattr(awaited, "ag_frame", None)
        if frame is None:
            steps.append("a future" if type(awaited).__name__.endswith("FutureIter") else repr(awaited)[:200])
            break
        code = frame.f_code
        steps.append(f"{code.co_name} ({code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno})")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None) \
            or getattr(awaited, "ag_await", None)
    return " > ".join(steps) or "nothing (it has not started)"


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

    async def close(self, timeout: float = 10.0, recancel_s: float | None = None) -> None:
        """Cancel every task and wait (up to ``timeout``) for them to finish.

        With ``recancel_s``, a task still running that long after its cancellation is cancelled
        again, and so on until ``timeout``: one that swallowed its cancellation (on Python 3.11,
        ``asyncio.wait_for`` does when what it waits for completes in the same loop iteration as
        the cancel; plugin code may catch it) still stops. Only for tasks whose clean-up on
        cancellation is short: a second cancel interrupts it."""
        pending = set(self._tasks)
        if not pending:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while pending:
            for task in pending:
                task.cancel()
            left = deadline - loop.time()
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=left if recancel_s is None else min(left, recancel_s))
            if recancel_s is None:
                break
        for task in pending:
            log.warning("Background task %s did not stop within %.0fs; it is waiting in %s. Please report "
                        "it with this line", task.get_name(), timeout, where_awaiting(task))
