"""``context.run_in_background``: work a connector or task starts is owned by the runtime.

A real DistributedHerder, Worker and WorkerSourceTask run on in-memory stores (herder_fakes): a
background loop that crashes marks its connector (or task) FAILED with the trace, an ERROR log line
and the failure metric; a loop still running when the connector or task stops is cancelled and
awaited by the runtime, without the plugin's ``stop`` doing anything about it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from mirrorline.api import SourceConnector, SourceTask
from mirrorline.plugins import full_name
from mirrorline.storage.status import State
from support.herder_fakes import eventually, patch_record_producer, registry_of, start_distributed_herder

#: What the loops did, per connector name: "crash" (raise after a moment) or "forever" (until cancelled).
BEHAVIOUR: dict[str, str] = {}
CANCELLED: list[str] = []


async def _loop(owner: str) -> None:
    try:
        if BEHAVIOUR.get(owner.split("/")[0]) == "crash" and "/" not in owner \
                or BEHAVIOUR.get(owner.split("/")[0]) == "task-crash" and "/" in owner:
            await asyncio.sleep(0.05)
            raise RuntimeError(f"background loop of {owner} broke on purpose")
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        CANCELLED.append(owner)
        raise


class LoopTask(SourceTask):
    async def start(self, config):
        self.context.run_in_background(_loop(f"{config['name']}/task"), "task-loop")

    async def poll(self):
        await asyncio.sleep(0.01)
        return []

    async def stop(self):
        pass  # the runtime stops the loop


class LoopConnector(SourceConnector):
    async def start(self, config):
        self.name = config["name"]
        self.context.run_in_background(_loop(self.name), "connector-loop")

    def task_class(self):
        return LoopTask

    async def task_configs(self, max_tasks):
        return [{"name": self.name}]

    async def stop(self):
        pass  # the runtime stops the loop


PLUGINS = registry_of(LoopConnector)


@pytest.fixture
async def rig(monkeypatch):
    patch_record_producer(monkeypatch)
    BEHAVIOUR.clear()
    CANCELLED.clear()
    rig = await start_distributed_herder(PLUGINS, {"restart.on.failure.enable": "false"})
    await rig.rebalance()
    yield rig
    await rig.stop()


async def _create(rig, name: str) -> None:
    await rig.herder.put_connector_config(name, {"connector.class": full_name(LoopConnector), "tasks.max": "1"},
                                          allow_replace=False)
    await rig.rebalance_until_stable()


def _failures(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(f"kafka_connect_{metric}_total", labels) or 0.0


async def test_a_crashing_background_loop_fails_the_connector_with_its_trace(rig, caplog):
    BEHAVIOUR["crashy"] = "crash"
    before = _failures("connector_failures", connector="crashy")
    with caplog.at_level(logging.ERROR, logger="mirrorline.runtime.worker"):
        await _create(rig, "crashy")
        await eventually(lambda: (s := rig.status_store.connector("crashy")) and s.state == State.FAILED,
                         what="connector FAILED")
    trace = rig.status_store.connector("crashy").trace
    assert "background task 'connector-loop' crashed" in trace
    assert "RuntimeError: background loop of crashy broke on purpose" in trace
    assert _failures("connector_failures", connector="crashy") - before == 1
    assert any("Connector crashy" in r.getMessage() and "connector-loop" in r.getMessage() for r in caplog.records)
    # tasks keep running, as Connect leaves them when only the connector fails
    assert rig.status_store.tasks("crashy")[0].state == State.RUNNING


async def test_a_crashing_background_loop_fails_the_task(rig):
    BEHAVIOUR["taskcrash"] = "task-crash"
    before = _failures("task_failures", connector="taskcrash", task="0")
    await _create(rig, "taskcrash")
    await eventually(lambda: (s := rig.status_store.tasks("taskcrash").get(0)) and s.state == State.FAILED,
                     what="task FAILED")
    trace = rig.status_store.tasks("taskcrash")[0].trace
    assert "background task 'task-loop' crashed" in trace and "broke on purpose" in trace
    assert _failures("task_failures", connector="taskcrash", task="0") - before == 1
    assert rig.status_store.connector("taskcrash").state == State.RUNNING


async def test_background_loops_are_cancelled_when_the_connector_and_tasks_stop(rig):
    BEHAVIOUR["calm"] = "forever"
    await _create(rig, "calm")
    await eventually(lambda: (s := rig.status_store.tasks("calm").get(0)) and s.state == State.RUNNING,
                     what="task RUNNING")
    assert CANCELLED == []
    await rig.herder.delete_connector("calm")
    await rig.rebalance_until_stable()
    await eventually(lambda: sorted(CANCELLED) == ["calm", "calm/task"], what="both loops cancelled")
    assert rig.status_store.connector("calm") is None


async def test_a_task_whose_stop_runs_out_of_time_has_its_background_work_cancelled(monkeypatch):
    """A stop given up on after its timeout left the plugin's background loops running against
    clients the stop had closed (at 8,000 partitions: an offset-syncs writer logging thousands of
    'ProducerClosed' lines, and 'Task was destroyed but it is pending' once it was collected)."""
    from mirrorline.runtime.worker_task import WorkerSourceTask

    patch_record_producer(monkeypatch)
    BEHAVIOUR.clear()
    CANCELLED.clear()
    rig = await start_distributed_herder(PLUGINS, {"task.shutdown.graceful.timeout.ms": "200",
                                                   "offset.flush.timeout.ms": "100"})
    try:
        await rig.rebalance()
        BEHAVIOUR["stuck"] = "forever"
        await _create(rig, "stuck")
        await eventually(lambda: (s := rig.status_store.tasks("stuck").get(0)) and s.state == State.RUNNING,
                         what="task RUNNING")

        async def stop_that_hangs(self, timeout: float = 10.0) -> None:
            await asyncio.Event().wait()  # e.g. a flush against a broker that stopped answering

        monkeypatch.setattr(WorkerSourceTask, "stop", stop_that_hangs)
        await rig.herder.delete_connector("stuck")
        await rig.rebalance_until_stable()
        await eventually(lambda: "stuck/task" in CANCELLED, what="the task's background loop cancelled")
    finally:
        monkeypatch.undo()
        await rig.stop()
