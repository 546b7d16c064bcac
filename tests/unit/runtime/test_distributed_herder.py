"""Unit tests of the DistributedHerder on in-memory stores, driven through its rebalances (no broker).

The herder, its Worker, Supervisor and WorkerSourceTasks are the real ones; the three stores,
the group member and the tasks' producer are the fakes of :mod:`support.herder_fakes`
(a pure unit test may use a fake producer: records are acknowledged at once). Each test
decides when a rebalance begins, what the leader assigns and when it is applied, so the
interleavings that matter are reproduced exactly, and waits on conditions, not on sleeps.

The connector used throughout, :class:`ProbeSourceConnector`, is steered and observed through
its :class:`Probe` (one per connector name): how many task configs it returns, which task
polls fail, how long task stops take, whether its own ``stop()`` hangs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY

from mirrorline.api import ConnectorTaskId, SourceConnector, SourceRecord, SourceTask
from mirrorline.plugins import full_name
from mirrorline.runtime.distributed.assignment import MemberState
from mirrorline.storage.configs import TargetState
from mirrorline.storage.status import State
from support.herder_fakes import (
    HerderRig,
    eventually,
    patch_record_producer,
    registry_of,
    start_distributed_herder,
)

# -- the probe connector -------------------------------------------------------------------


@dataclass
class Probe:
    """Steers one connector's instances and records what the runtime did to them."""

    task_count: int = 1
    hang_on_stop: bool = False
    task_stop_delay_s: dict[int, float] = field(default_factory=dict)
    task_start_delay_s: dict[int, float] = field(default_factory=dict)
    poll_failures: dict[int, int] = field(default_factory=dict)
    starts: int = 0
    stops: int = 0
    task_configs_calls: int = 0
    task_starts: Counter = field(default_factory=Counter)
    task_stops: Counter = field(default_factory=Counter)
    polls: Counter = field(default_factory=Counter)
    connector: ProbeSourceConnector | None = None
    release: asyncio.Event = field(default_factory=asyncio.Event)


PROBES: dict[str, Probe] = {}


def probe(name: str) -> Probe:
    """The probe of connector ``name`` (created on first use)."""
    return PROBES.setdefault(name, Probe())


class ProbeSourceConnector(SourceConnector):
    """Returns ``probe.task_count`` task configs; its ``stop()`` may ignore cancellation and hang."""

    def __init__(self) -> None:
        self.name = ""

    async def start(self, config) -> None:
        self.name = config["name"]
        state = probe(self.name)
        state.starts += 1
        state.connector = self

    def task_class(self):
        return ProbeSourceTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        state = probe(self.name)
        state.task_configs_calls += 1
        return [{"connector": self.name, "task": str(i), "of": str(state.task_count)}
                for i in range(state.task_count)]

    async def stop(self) -> None:
        state = probe(self.name)
        state.stops += 1
        while state.hang_on_stop and not state.release.is_set():
            try:
                await state.release.wait()
            except asyncio.CancelledError:
                pass  # a badly written plugin: cancellation is swallowed and stop() goes on waiting


class ProbeSourceTask(SourceTask):
    """Polls one record every 10 ms (source partition ``{"task": i}``); may fail or stop slowly."""

    async def start(self, config: dict[str, str]) -> None:
        self.name = config["connector"]
        self.index = int(config["task"])
        committed = await self.context.offsets.offset({"task": self.index})
        self.seq = 0 if committed is None else committed["seq"] + 1
        await asyncio.sleep(probe(self.name).task_start_delay_s.get(self.index, 0))
        probe(self.name).task_starts[self.index] += 1

    async def poll(self) -> list[SourceRecord]:
        await asyncio.sleep(0.01)
        state = probe(self.name)
        state.polls[self.index] += 1
        if state.poll_failures.get(self.index, 0) > 0:
            state.poll_failures[self.index] -= 1
            raise RuntimeError(f"boom: task {self.index} of {self.name} fails on purpose")
        record = SourceRecord({"task": self.index}, {"seq": self.seq}, f"{self.name}-out",
                              key=f"{self.index}-{self.seq}".encode(), value=b"x")
        self.seq += 1
        return [record]

    async def stop(self) -> None:
        state = probe(self.name)
        await asyncio.sleep(state.task_stop_delay_s.get(self.index, 0))
        state.task_stops[self.index] += 1


PLUGINS = registry_of(ProbeSourceConnector)
CONNECTOR_CLASS = full_name(ProbeSourceConnector)


# -- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture
async def make_rig(monkeypatch):
    """Start herders (each after its first, empty rebalance); all are stopped after the test."""
    patch_record_producer(monkeypatch)
    PROBES.clear()
    rigs: list[HerderRig] = []

    async def make(settings: dict[str, str] | None = None) -> HerderRig:
        rig = await start_distributed_herder(PLUGINS, settings)
        rigs.append(rig)
        await rig.rebalance()
        return rig

    yield make
    try:
        for rig in rigs:
            await rig.stop()
    finally:
        for state in PROBES.values():
            state.release.set()  # let stop() calls abandoned after their timeout end
        await asyncio.sleep(0.01)
        PROBES.clear()


async def create_connector(rig: HerderRig, name: str, tasks_max: int) -> None:
    """Create a probe connector through the herder (as leader) and rebalance until its tasks run here."""
    created, _ = await rig.herder.put_connector_config(
        name, {"connector.class": CONNECTOR_CLASS, "tasks.max": str(tasks_max)}, allow_replace=False)
    assert created
    await rig.rebalance_until_stable()


def task_id(name: str, task: int) -> ConnectorTaskId:
    return ConnectorTaskId(name, task)


def task_state(rig: HerderRig, name: str, task: int) -> State | None:
    status = rig.status_store.tasks(name).get(task)
    return status.state if status else None


def connector_state(rig: HerderRig, name: str) -> State | None:
    status = rig.status_store.connector(name)
    return status.state if status else None


def task_failures(name: str, task: int) -> float:
    return REGISTRY.get_sample_value("kafka_connect_task_failures_total",
                                     {"connector": name, "task": str(task)}) or 0.0


# -- 1. the interleaving that lost reconfigurations ------------------------------------------


@pytest.mark.parametrize("when", ["after before_rejoin", "while before_rejoin runs", "before the assignment applies"])
async def test_reconfiguration_requested_during_a_rebalance_is_carried_out_after_it(make_rig, when):
    """A connector running here asks for new task configs while the group rebalances. The sticky
    assignment keeps it here, so nothing else would ever regenerate them: the request must be
    remembered and carried out once the assignment is applied, not dropped."""
    rig = await make_rig()
    state = probe("recon")
    await create_connector(rig, "recon", tasks_max=4)
    assert [c["task"] for c in rig.config_store.task_configs("recon")] == ["0"]
    assert task_state(rig, "recon", 0) == State.RUNNING
    calls = state.task_configs_calls

    state.task_count = 2  # the work to split changed: the connector will ask for a reconfiguration
    if when == "after before_rejoin":
        await rig.member.begin_rebalance()
        state.connector.context.request_task_reconfiguration()
        await rig.settle()
        # Mid-rebalance it is not carried out (this worker may be about to lose the connector)...
        assert state.task_configs_calls == calls
        assert len(rig.config_store.task_configs("recon")) == 1
        assignment = await rig.member.complete_rebalance()
    elif when == "while before_rejoin runs":
        rejoining = asyncio.ensure_future(rig.member.begin_rebalance())
        await asyncio.sleep(0)  # before_rejoin is submitted, not yet carried out
        state.connector.context.request_task_reconfiguration()
        await rejoining
        assignment = await rig.member.complete_rebalance()
    else:
        await rig.member.begin_rebalance()
        assignment = await rig.member.complete_rebalance()  # submitted, not applied yet
        state.connector.context.request_task_reconfiguration()
    assert "recon" in assignment.connectors  # sticky: the connector stays on this worker
    await rig.settle()

    # ...but once the assignment is applied, the connector was asked again and the result committed.
    assert state.task_configs_calls == calls + 1
    assert rig.config_store.task_configs("recon") == [
        {"connector": "recon", "task": "0", "of": "2"}, {"connector": "recon", "task": "1", "of": "2"}]
    assert rig.config_store.writes[-1][:2] == ("tasks", "recon")
    assert state.starts == 1  # the connector itself was not restarted
    assert rig.member.rejoin_requested  # two tasks now: the group must rebalance to place the new one

    await rig.rebalance_until_stable()
    await eventually(lambda: all(task_state(rig, "recon", i) == State.RUNNING for i in (0, 1)),
                     what="both tasks RUNNING")
    assert set(rig.herder.worker.tasks) == {task_id("recon", 0), task_id("recon", 1)}
    assert dict(rig.herder.worker.tasks[task_id("recon", 0)].config)["of"] == "2"  # restarted with its new config


# -- 2. applying assignments -------------------------------------------------------------------


async def test_assignment_starts_what_is_assigned_and_stops_what_is_revoked_in_parallel(make_rig):
    rig = await make_rig()
    state = probe("spread")
    state.task_count = 4
    state.task_stop_delay_s = {2: 1.0, 3: 1.0}
    await create_connector(rig, "spread", tasks_max=4)

    # Everything assigned (this worker is alone) was started here.
    assert set(rig.herder.worker.connectors) == {"spread"}
    assert set(rig.herder.worker.tasks) == {task_id("spread", i) for i in range(4)}
    await eventually(lambda: all(task_state(rig, "spread", i) == State.RUNNING for i in range(4)),
                     what="four tasks RUNNING")
    assert connector_state(rig, "spread") == State.RUNNING
    assert rig.status_store.connector("spread").worker_id == "127.0.0.1:18083"
    await eventually(lambda: all(state.polls[i] >= 2 for i in range(4)), what="tasks polling")

    # A second worker joins: the leader keeps tasks 0-1 here and revokes 2-3, whose stop() take 1 s each.
    peer = {"member-2": MemberState("http://127.0.0.1:18084", rig.config_store.offset)}
    await rig.member.begin_rebalance()
    started = asyncio.get_running_loop().time()
    assignment = await rig.member.complete_rebalance(peer)
    await rig.settle()
    elapsed = asyncio.get_running_loop().time() - started

    assert assignment.tasks == (("spread", 0), ("spread", 1))
    assert assignment.revoked_tasks == (("spread", 2), ("spread", 3))
    assert 0.9 <= elapsed < 1.8, f"revoking two tasks that take 1 s each to stop took {elapsed:.2f}s"
    assert state.task_stops == Counter({2: 1, 3: 1})
    assert set(rig.herder.worker.tasks) == {task_id("spread", 0), task_id("spread", 1)}
    assert [task_state(rig, "spread", i) for i in range(4)] == [State.RUNNING, State.RUNNING,
                                                                 State.UNASSIGNED, State.UNASSIGNED]
    assert state.task_starts == Counter({0: 1, 1: 1, 2: 1, 3: 1})  # what stays was left alone
    assert rig.member.rejoin_requested  # revoked work is let go: rejoin so it can be reassigned
    # the revoked tasks stored the offsets of what they wrote when they stopped
    stored = await rig.offset_store.get("spread", [{"task": 2}, {"task": 3}])
    assert all(offset is not None and offset["seq"] >= 1 for offset in stored)

    # Next round: the freed tasks go to the newcomer, nothing moves here.
    again = await rig.rebalance(peers=peer)
    assert again.tasks == (("spread", 0), ("spread", 1)) and not again.revoked
    assert rig.member.assignments[-1]["member-2"].tasks == (("spread", 2), ("spread", 3))
    assert state.task_starts == Counter({0: 1, 1: 1, 2: 1, 3: 1})


async def test_assigned_tasks_start_side_by_side(make_rig):
    # Connect starts each task on its own thread; one after another, four tasks whose start()
    # takes 1 s each would keep the last one waiting 3 s.
    rig = await make_rig()
    state = probe("slow-start")
    state.task_count = 4
    state.task_start_delay_s = {i: 1.0 for i in range(4)}
    started = asyncio.get_running_loop().time()
    await create_connector(rig, "slow-start", tasks_max=4)
    await eventually(lambda: all(task_state(rig, "slow-start", i) == State.RUNNING for i in range(4)),
                     what="four tasks RUNNING")
    elapsed = asyncio.get_running_loop().time() - started
    assert state.task_starts == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    assert 0.9 <= elapsed < 2.5, f"four tasks that take 1 s each to start took {elapsed:.2f}s to run"

    # Changed task configs (each says "of": 5 now; tasks.max keeps four) restart the tasks side by side too.
    state.task_count = 5
    started = asyncio.get_running_loop().time()
    await rig.herder.restart_connector("slow-start")
    await rig.settle()
    await eventually(lambda: state.task_starts == Counter({0: 2, 1: 2, 2: 2, 3: 2})
                     and all(task_state(rig, "slow-start", i) == State.RUNNING for i in range(4)),
                     what="four tasks restarted with their new configs")
    elapsed = asyncio.get_running_loop().time() - started
    assert elapsed < 2.5, f"restarting four tasks that take 1 s each to start took {elapsed:.2f}s"


# -- 3. failures and automatic restarts ------------------------------------------------------


async def test_failed_task_is_failed_with_its_trace_then_restarted_after_the_backoff(make_rig):
    rig = await make_rig({"restart.backoff.initial.ms": "50"})
    state = probe("flaky")
    state.poll_failures = {0: 1}
    failures_before = task_failures("flaky", 0)
    await create_connector(rig, "flaky", tasks_max=1)

    async def restarted():
        status = await rig.herder.connector_status("flaky")
        task = status["tasks"][0]
        return task if task["state"] == "RUNNING" and task.get("restarts", 0) >= 1 else None

    task = await eventually(restarted, what="task RUNNING again after an automatic restart")
    assert task["restarts"] == 1
    assert "trace" not in task
    failed = [s for s in rig.status_store.task_history("flaky", 0) if s.state == State.FAILED]
    assert len(failed) == 1
    assert "RuntimeError: boom: task 0 of flaky fails on purpose" in failed[0].trace
    assert task_failures("flaky", 0) - failures_before == 1
    assert state.task_starts[0] == 2
    assert task_id("flaky", 0) in rig.herder.worker.tasks
    await eventually(lambda: state.polls[0] >= 3, what="the restarted task polling")
    assert connector_state(rig, "flaky") == State.RUNNING  # the connector was never affected


async def test_failed_task_stays_failed_when_restart_on_failure_is_off(make_rig):
    rig = await make_rig({"restart.on.failure.enable": "false", "restart.backoff.initial.ms": "50"})
    state = probe("broken")
    state.poll_failures = {0: 1}
    failures_before = task_failures("broken", 0)
    await create_connector(rig, "broken", tasks_max=1)

    await eventually(lambda: task_state(rig, "broken", 0) == State.FAILED, what="task FAILED")
    await eventually(lambda: task_id("broken", 0) not in rig.herder.worker.tasks, what="failed task released")
    await asyncio.sleep(0.3)  # six back-offs: no restart may come
    status = await rig.herder.connector_status("broken")
    assert status["tasks"][0]["state"] == "FAILED"
    assert "boom: task 0 of broken fails on purpose" in status["tasks"][0]["trace"]
    assert "restarts" not in status["tasks"][0]
    assert state.task_starts[0] == 1
    assert task_failures("broken", 0) - failures_before == 1


# -- 4. a connector whose stop() hangs -------------------------------------------------------


@pytest.mark.parametrize("change", ["config update", "deletion"])
async def test_connector_whose_stop_hangs_does_not_block_the_herder(make_rig, change):
    rig = await make_rig({"task.shutdown.graceful.timeout.ms": "300"})
    state = probe("stuck")
    state.hang_on_stop = True
    await create_connector(rig, "stuck", tasks_max=1)
    assert state.starts == 1

    loop = asyncio.get_running_loop()
    started = loop.time()
    if change == "config update":
        await rig.herder.put_connector_config(
            "stuck", {"connector.class": CONNECTOR_CLASS, "tasks.max": "2"}, allow_replace=True)
    else:
        await rig.herder.delete_connector("stuck")
    await rig.settle()
    elapsed = loop.time() - started

    assert state.stops == 1
    assert not state.release.is_set()  # stop() is still hanging: the herder walked away from it
    assert elapsed < 0.3 + 0.5, f"the {change} took {elapsed:.2f}s with a stop() that hangs"
    if change == "config update":
        assert state.starts == 2
        assert rig.herder.worker.connectors["stuck"].config["tasks.max"] == 2
        assert connector_state(rig, "stuck") == State.RUNNING
    else:
        assert "stuck" not in rig.herder.worker.connectors
        assert not rig.herder.worker.tasks
        assert rig.status_store.connector("stuck") is None and not rig.status_store.tasks("stuck")
        assert rig.member.rejoin_requested
    # the herder goes on serving changes
    state.hang_on_stop = False
    await rig.herder.put_connector_config("other", {"connector.class": CONNECTOR_CLASS}, allow_replace=False)
    await rig.rebalance_until_stable()
    assert "other" in rig.herder.worker.connectors


# -- 5. membership lost ----------------------------------------------------------------------


async def test_membership_lost_stops_everything_here_at_once(make_rig):
    rig = await make_rig()
    first, second = probe("lost-a"), probe("lost-b")
    first.task_count = 2
    await create_connector(rig, "lost-a", tasks_max=2)
    await create_connector(rig, "lost-b", tasks_max=1)
    assert len(rig.herder.worker.tasks) == 3

    # The group dropped this worker (session expired): before it rejoins, everything stops.
    await rig.member.begin_rebalance(membership_lost=True)

    assert not rig.herder.worker.connectors and not rig.herder.worker.tasks
    assert (first.stops, second.stops) == (1, 1)
    assert first.task_stops == Counter({0: 1, 1: 1}) and second.task_stops == Counter({0: 1})
    assert [task_state(rig, "lost-a", i) for i in (0, 1)] == [State.UNASSIGNED, State.UNASSIGNED]
    assert connector_state(rig, "lost-a") == connector_state(rig, "lost-b") == State.UNASSIGNED
    joining = rig.herder.member_state()
    assert joining.connectors == () and joining.tasks == ()  # it claims nothing when it rejoins

    # Back in the group, it runs whatever it is assigned anew.
    await rig.member.complete_rebalance()
    await rig.settle()
    assert set(rig.herder.worker.connectors) == {"lost-a", "lost-b"}
    assert len(rig.herder.worker.tasks) == 3
    assert (first.starts, second.starts) == (2, 2)


# -- 6. target states --------------------------------------------------------------------------


async def test_target_states_pause_resume_and_stop_what_runs_here(make_rig):
    rig = await make_rig()
    state = probe("targeted")
    state.task_count = 2
    await create_connector(rig, "targeted", tasks_max=2)
    await eventually(lambda: state.polls[0] >= 2 and state.polls[1] >= 2, what="tasks polling")

    # PAUSED: the connector and its tasks here are PAUSED and the tasks stop polling.
    await rig.config_store.put_target_state("targeted", TargetState.PAUSED)
    await rig.settle()
    assert connector_state(rig, "targeted") == State.PAUSED
    assert [task_state(rig, "targeted", i) for i in (0, 1)] == [State.PAUSED, State.PAUSED]
    await asyncio.sleep(0.03)  # a poll already under way may still finish
    polls = dict(state.polls)
    await asyncio.sleep(0.1)
    assert dict(state.polls) == polls
    assert len(rig.herder.worker.tasks) == 2 and state.task_stops == Counter()  # paused, not stopped

    # STARTED again: they resume.
    await rig.config_store.put_target_state("targeted", TargetState.STARTED)
    await rig.settle()
    assert connector_state(rig, "targeted") == State.RUNNING
    assert [task_state(rig, "targeted", i) for i in (0, 1)] == [State.RUNNING, State.RUNNING]
    await eventually(lambda: all(state.polls[i] > polls[i] + 2 for i in (0, 1)), what="tasks polling again")

    # STOPPED: the tasks and the connector here are stopped (as the leader writes it: the target
    # state, then no task configs).
    await rig.config_store.put_target_state("targeted", TargetState.STOPPED)
    await rig.settle()
    assert not rig.herder.worker.tasks and "targeted" not in rig.herder.worker.connectors
    assert state.stops == 1 and state.task_stops == Counter({0: 1, 1: 1})
    assert connector_state(rig, "targeted") == State.STOPPED
    await rig.config_store.put_task_configs("targeted", [])
    await rig.settle()
    assert (await rig.herder.connector_status("targeted"))["tasks"] == []

    # Resumed through the REST API: the connector starts, regenerates its task configs, and the
    # rebalance they cause brings the tasks back.
    await rig.herder.resume_connector("targeted")
    await rig.settle()
    assert connector_state(rig, "targeted") == State.RUNNING and state.starts == 2
    assert len(rig.config_store.task_configs("targeted")) == 2
    await rig.rebalance_until_stable()
    await eventually(lambda: all(task_state(rig, "targeted", i) == State.RUNNING for i in (0, 1)),
                     what="tasks RUNNING after the resume")
    assert state.task_starts == Counter({0: 2, 1: 2})


async def test_started_again_after_a_stopped_state_without_empty_task_configs_restarts_tasks(make_rig):
    """The leader may die between writing STOPPED and the empty task configs: resuming must still
    bring back the tasks the assignment gives this worker (no rebalance follows in that case)."""
    rig = await make_rig()
    state = probe("halfstopped")
    state.task_count = 2
    await create_connector(rig, "halfstopped", tasks_max=2)
    await eventually(lambda: state.polls[0] >= 1 and state.polls[1] >= 1, what="tasks polling")
    await rig.config_store.put_target_state("halfstopped", TargetState.STOPPED)
    await rig.settle()
    assert not rig.herder.worker.tasks
    await rig.config_store.put_target_state("halfstopped", TargetState.STARTED)
    await rig.settle()
    await eventually(lambda: all(task_state(rig, "halfstopped", i) == State.RUNNING for i in (0, 1)),
                     what="tasks RUNNING again without a rebalance")
    assert state.task_starts == Counter({0: 2, 1: 2})
