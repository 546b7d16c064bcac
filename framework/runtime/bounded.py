"""Awaiting plugin code with a deadline that holds even when the code ignores cancellation.

``asyncio.wait_for`` cancels on timeout and then *waits* for the cancelled coroutine to
finish, so a connector whose ``stop()`` swallows ``CancelledError`` (or awaits a client that
does) would still block its caller for good. :func:`bounded` runs the coroutine as its own
task, waits at most ``timeout`` seconds, and on expiry cancels it and walks away: the herder
lock and the shutdown path are never held longer than the configured timeouts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from mirrorline.runtime.background import StrayCancellation

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Tasks given up on: kept referenced until they end so asyncio does not warn of lost tasks.
_ABANDONED: set[asyncio.Task] = set()


class LifecycleTimeout(TimeoutError):
    """A connector's or task's lifecycle call did not finish within its timeout."""


async def bounded(coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
    """Await ``coro`` for at most ``timeout`` seconds; raise :class:`LifecycleTimeout` naming ``what`` after.

    The caller being cancelled cancels ``coro`` too. ``coro`` ending with a ``CancelledError`` of
    its own (it awaited something cancelled) raises :class:`StrayCancellation`, an ordinary
    exception, so the caller does not take itself for cancelled. On timeout ``coro`` is cancelled and
    abandoned (not awaited); if it ignores the cancellation it keeps running unobserved and
    its end is logged.
    """
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(timeout, 0))
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        if task.cancelled():  # not by us: a CancelledError from inside, which must not pass for the caller's own
            raise StrayCancellation(f"{what} ended with a CancelledError that nobody requested")
        return task.result()
    task.cancel()
    _ABANDONED.add(task)
    task.add_done_callback(_abandoned_done(what))
    raise LifecycleTimeout(f"{what} did not finish within {timeout:g}s")


def _abandoned_done(what: str):
    def done(task: asyncio.Task) -> None:
        _ABANDONED.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, asyncio.CancelledError):
            # Our own cancel, reported as an exception: asyncio.gather's future ends that way when
            # cancelled, and a coroutine may re-raise the cancel from a client it was awaiting.
            log.debug("%s, abandoned after its timeout, ended cancelled", what)
        elif exc is not None:
            log.warning("%s, abandoned after its timeout, ended with %r", what, exc)
    return done
