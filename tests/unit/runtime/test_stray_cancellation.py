"""A ``CancelledError`` nobody asked for must not pass for a cancellation, and never end a loop silently.

Code that awaits a task or future which was itself cancelled (a client's internal task, a stop
abandoned after its timeout) gets a ``CancelledError`` although nobody cancelled *it*. Taken for
its own cancellation, that error used to end the herder's one change loop: the worker's rejoin,
waiting on that loop, never completed, and the worker stayed out of its group for good with
nothing in the log (seen at 8,000 partitions after the group dropped a slow worker). The runtime
now tells the two apart (``Task.cancelling()``) and reports the stray one as a failure.

The herder, Worker and WorkerSourceTasks are the real ones, on the in-memory stores of
``support.herder_fakes``.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from mirrorline.api import SourceConnector, SourceRecord, SourceTask
from mirrorline.plugins import full_name
from mirrorline.runtime.background import BackgroundTasks, StrayCancellation
from mirrorline.runtime.bounded import LifecycleTimeout, bounded
from mirrorline.storage.status import State
from support.herder_fakes import eventually, patch_record_producer, registry_of, start_distributed_herder

#: connector name -> where its tasks meet a CancelledError of their own: "stop", "poll" or "background"
STRAY: dict[str, str] = {}


async def _await_cancelled_future() -> None:
    """What a client's call does when its internal future was cancelled under it."""
    future = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


class StrayTask(SourceTask):
    """Meets a stray CancelledError in stop(), poll() or a background loop, as its connector's name says."""

    async def start(self, config):
        self.name = config["name"]
        if STRAY.get(self.name) == "background":
            self.context.run_in_background(self._background(), "sync-loop")

    async def _background(self):
        await asyncio.sleep(0.02)
        await _await_cancelled_future()

    async def poll(self):
        await asyncio.sleep(0.01)
        if STRAY.get(self.name) == "poll":
            await _await_cancelled_future()
        return [SourceRecord({"p": 0}, {"o": 0}, "out", value=b"x")]

    async def stop(self):
        if STRAY.get(self.name) == "stop":
            await _await_cancelled_future()


class StrayConnector(SourceConnector):
    async def start(self, config):
        self.name = config["name"]

    def task_class(self):
        return StrayTask

    async def task_configs(self, max_tasks):
        return [{"name": self.name} for _ in range(max_tasks)]

    async def stop(self):
        pass


PLUGINS = registry_of(StrayConnector)


@pytest.fixture
async def rig(monkeypatch):
    patch_record_producer(monkeypatch)
    STRAY.clear()
    rig = await start_distributed_herder(PLUGINS, {"restart.on.failure.enable": "false"})
    await rig.rebalance()
    yield rig
    await rig.stop()


async def _create(rig, name: str, tasks: int = 1) -> None:
    created, _ = await rig.herder.put_connector_config(
        name, {"connector.class": full_name(StrayConnector), "tasks.max": str(tasks)}, allow_replace=False)
    assert created
    await rig.rebalance_until_stable()


# -- the primitives -------------------------------------------------------------------------


async def test_bounded_reports_a_cancelled_error_from_inside_as_a_failure():
    with pytest.raises(StrayCancellation, match="Task x: stop"):
        await bounded(_await_cancelled_future(), 1.0, "Task x: stop")
    assert asyncio.current_task().cancelling() == 0  # the caller goes on as not cancelled


async def test_bounded_still_passes_on_the_callers_own_cancellation():
    started = asyncio.Event()

    async def long():
        started.set()
        await asyncio.sleep(30)

    caller = asyncio.ensure_future(bounded(long(), 60.0, "long"))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_an_abandoned_gather_ending_cancelled_is_not_warned_about(caplog):
    """asyncio.gather's future, cancelled after the timeout, ends with a CancelledError *exception*
    (not as cancelled): that is the cancel bounded() itself made, not news for the operator."""
    with caplog.at_level(logging.DEBUG, logger="mirrorline.runtime.bounded"):
        with pytest.raises(LifecycleTimeout):
            await bounded(asyncio.gather(asyncio.sleep(30), asyncio.sleep(30)), 0.01, "Worker w: recording")
        await asyncio.sleep(0.05)  # the abandoned gather ends once its children have
    ended = [r for r in caplog.records if "abandoned after its timeout" in r.getMessage()]
    assert [r.levelno for r in ended] == [logging.DEBUG], [r.getMessage() for r in caplog.records]


async def test_an_abandoned_call_ending_with_an_error_is_warned_about(caplog):
    async def fails_when_cancelled():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise RuntimeError("close failed") from None

    with caplog.at_level(logging.DEBUG, logger="mirrorline.runtime.bounded"):
        with pytest.raises(LifecycleTimeout):
            await bounded(fails_when_cancelled(), 0.01, "Task t: stop")
        await asyncio.sleep(0.01)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["Task t: stop, abandoned after its timeout, ended with RuntimeError('close failed')"]


async def test_a_background_task_ended_by_a_stray_cancelled_error_is_logged(caplog):
    owner = BackgroundTasks("owner")
    with caplog.at_level(logging.ERROR, logger="mirrorline.runtime.background"):
        stray = owner.spawn(_await_cancelled_future(), "stray")
        calm = owner.spawn(asyncio.sleep(30), "calm")
        await asyncio.wait({stray})
        await owner.close()
    assert calm.cancelled()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages  # the task its owner cancelled is not reported
    assert "owner:stray ended with a CancelledError that nobody requested" in messages[0]


# -- the herder ------------------------------------------------------------------------------


async def test_a_task_stop_meeting_a_stray_cancellation_does_not_end_the_herders_change_loop(rig, caplog):
    STRAY["stopper"] = "stop"
    await _create(rig, "stopper", tasks=2)
    assert len(rig.herder.worker.tasks) == 2

    # The group dropped this worker: everything here stops, and one task's stop() meets the error.
    with caplog.at_level(logging.ERROR):
        await rig.member.begin_rebalance(membership_lost=True)
    assert not rig.herder.worker.tasks and not rig.herder.worker.connectors
    assert any("nobody requested" in r.getMessage() for r in caplog.records)

    # The herder still applies assignments and serves changes.
    STRAY.clear()
    await rig.member.complete_rebalance()
    await rig.settle()
    assert len(rig.herder.worker.tasks) == 2
    await rig.herder.put_connector_config("after", {"connector.class": full_name(StrayConnector)},
                                          allow_replace=False)
    await rig.rebalance_until_stable()
    assert "after" in rig.herder.worker.connectors
    assert rig.status_store.tasks("after")[0].state == State.RUNNING


@pytest.mark.parametrize("where", ["poll", "background"])
async def test_a_task_loop_ended_by_a_stray_cancellation_is_failed_with_a_trace(rig, where):
    name = f"stray-{where}"
    STRAY[name] = where
    await _create(rig, name)
    await eventually(lambda: (s := rig.status_store.tasks(name).get(0)) and s.state == State.FAILED,
                     what=f"task FAILED after a stray CancelledError in {where}")
    trace = rig.status_store.tasks(name)[0].trace
    assert "StrayCancellation" in trace and "nobody requested" in trace
