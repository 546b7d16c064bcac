"""A loop that swallows its cancellation still stops, and where it hangs is said.

On Python 3.11, ``asyncio.wait_for`` returns the result, and drops the cancel, when what it waits
for completes in the same loop iteration as ``task.cancel()`` (CPython gh-86296, fixed in 3.12).
A task's poll loop waiting on a metadata refresh that way outlived its stop by seconds and wrote
records past the offsets the stop stored (CI, test_rest_lifecycle_of_a_connector). Three guards:
the project awaits with ``asyncio.timeout`` instead (checked below, statically); a task's stop
cancels a loop again every second while it ignores the cancel; and a write a loop attempts after
the stop began is refused (tests/integration/test_source_task_stop.py, against Kafka).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path

import pytest

from mirrorline.runtime.background import BackgroundTasks, where_awaiting

ROOT = Path(__file__).resolve().parents[3]


async def _swallows_one_cancel(cancels: list[int]) -> None:
    """Ignores the first cancel, as ``wait_for`` does in the race; a second one ends it."""
    while True:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancels.append(1)
            if len(cancels) > 1:
                raise


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the race is fixed in Python 3.12")
async def test_wait_for_drops_a_cancel_that_comes_with_the_result_on_this_python():
    """Why the static rule below exists: the race, shown on this interpreter."""
    for use_timeout in (False, True):
        future = asyncio.get_running_loop().create_future()
        carried_on = []

        async def waits() -> None:
            if use_timeout:
                async with asyncio.timeout(10):
                    await future
            else:
                await asyncio.wait_for(future, 10)
            carried_on.append(True)

        task = asyncio.create_task(waits())
        await asyncio.sleep(0)
        future.set_result(1)
        task.cancel()
        await asyncio.wait({task})
        assert carried_on == ([] if use_timeout else [True])


def test_the_project_never_awaits_with_wait_for():
    offenders = []
    for folder in ("framework", "connectors"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\basyncio\.wait_for\(|\bfrom asyncio import .*\bwait_for\b", line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert not offenders, ("asyncio.wait_for can swallow a cancellation on Python 3.11; use "
                           f"`async with asyncio.timeout(...)`: {offenders}")


async def test_close_cancels_again_a_task_that_ignored_its_cancel():
    owner = BackgroundTasks("owner")
    cancels: list[int] = []
    task = owner.spawn(_swallows_one_cancel(cancels), "deaf-once")
    await asyncio.sleep(0)
    started = asyncio.get_running_loop().time()
    await owner.close(timeout=5.0, recancel_s=0.05)
    assert task.cancelled() and len(cancels) == 2
    assert asyncio.get_running_loop().time() - started < 1.0


async def test_close_without_recancel_leaves_it_and_says_where_it_waits(caplog):
    owner = BackgroundTasks("owner")
    cancels: list[int] = []
    task = owner.spawn(_swallows_one_cancel(cancels), "deaf-once")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="mirrorline.runtime.background"):
        await owner.close(timeout=0.1)
    assert not task.done() and cancels == [1]
    [message] = [r.getMessage() for r in caplog.records]
    assert "owner:deaf-once did not stop within 0s" in message
    assert "_swallows_one_cancel (test_swallowed_cancellation.py:" in message and "sleep (tasks.py:" in message
    task.cancel()
    await asyncio.wait({task})


async def test_where_awaiting_follows_the_chain_of_awaits():
    event = asyncio.Event()

    async def inner() -> None:
        await event.wait()

    async def outer() -> None:
        await inner()

    task = asyncio.create_task(outer())
    await asyncio.sleep(0)
    chain = where_awaiting(task)
    assert re.fullmatch(r"outer \(\S+:\d+\) > inner \(\S+:\d+\) > wait \(locks\.py:\d+\) > a future", chain), chain
    event.set()
    await task
