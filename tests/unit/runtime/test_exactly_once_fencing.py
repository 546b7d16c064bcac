"""Zombie fencing (KIP-618): the config topic's task-count records and the leader's rounds, without a broker.

The config store is the real ``KafkaConfigStore`` fed the records Connect writes (its Kafka log is
never started); :class:`ZombieFencing` runs with a recording stand-in for the admin fencing call.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from mirrorline.api import ConnectorTaskId
from mirrorline.api.errors import ConnectError
from mirrorline.runtime.distributed.fencing import ZombieFencing
from mirrorline.storage.kafka_configs import KafkaConfigStore
from support.herder_fakes import eventually


class FedConfigStore(KafkaConfigStore):
    """A KafkaConfigStore whose topic is a list: writes are read back at once, in order."""

    def __init__(self):
        super().__init__("configs", {"bootstrap.servers": "127.0.0.1:1"})
        self._started = True
        self.kinds: list[tuple[str, str]] = []
        self.listener = lambda kind, name: self.kinds.append((kind, name))
        self.offset_next = 0

    def feed(self, key: str, value) -> None:
        self._on_record(SimpleNamespace(topic="configs", offset=self.offset_next, key=key.encode(),
                                        value=None if value is None else json.dumps(value).encode()))
        self.offset_next += 1

    def put_tasks(self, name: str, count: int) -> None:
        for i in range(count):
            self.feed(f"task-{name}-{i}", {"properties": {"i": str(i)}})
        self.feed(f"commit-{name}", {"tasks": count})

    async def read_to_end(self) -> None:
        await asyncio.sleep(0)

    async def put_task_count_record(self, connector, count):
        self.feed(f"tasks-fencing-{connector}", {"task-count": count})


def test_task_count_records_clear_pending_fencing_and_commits_make_generations():
    store = FedConfigStore()
    store.feed("connector-c", {"properties": {"connector.class": "X"}})
    assert store.task_generation("c") == -1 and not store.pending_fencing("c")
    store.put_tasks("c", 2)
    assert store.pending_fencing("c") and store.task_generation("c") == 0 and store.task_count_record("c") is None
    store.feed("tasks-fencing-c", {"task-count": 2})
    assert not store.pending_fencing("c") and store.task_count_record("c") == 2
    store.put_tasks("c", 3)
    assert store.pending_fencing("c") and store.task_generation("c") == 1
    store.feed("tasks-fencing-c", {"task-count": "three"})  # malformed: skipped, still pending
    assert store.pending_fencing("c") and store.task_count_record("c") == 2
    assert ("fencing", "c") in store.kinds and ("tasks", "c") in store.kinds


def fencing(store: FedConfigStore, leader: bool = True, owned=()):
    fenced: list[list[str]] = []

    async def submit(fn, *args):
        return await fn(*args)

    zombies = ZombieFencing(store, "g", {"bootstrap.servers": "127.0.0.1:1"}, submit=submit,
                            is_leader=lambda: leader, is_source=lambda name: True,
                            owns=lambda task_id: task_id in owned)

    async def fence(ids):
        fenced.append(list(ids))
    zombies._fence = fence
    return zombies, fenced


@pytest.mark.parametrize("previous, new, fenced_ids", [
    (None, 2, []),                        # never ran with exactly-once: nothing to fence
    (1, 1, []),                           # the new single task fences the old single one itself
    (3, 2, ["g-c-0", "g-c-1", "g-c-2"]),  # every producer of the previous generation
    (1, 4, ["g-c-0"]),
])
async def test_the_leader_fences_the_previous_generation_then_writes_the_new_task_count(previous, new, fenced_ids):
    store = FedConfigStore()
    store.feed("connector-c", {"properties": {}})
    if previous is not None:
        store.put_tasks("c", previous)
        store.feed("tasks-fencing-c", {"task-count": previous})
    store.put_tasks("c", new)
    zombies, fenced = fencing(store)
    await zombies.maybe_fence("c")
    assert fenced == ([fenced_ids] if fenced_ids else [])
    assert not store.pending_fencing("c") and store.task_count_record("c") == new
    await zombies.close()


async def test_only_the_leader_fences_and_a_follower_waits_for_its_record():
    store = FedConfigStore()
    store.feed("connector-c", {"properties": {}})
    store.put_tasks("c", 2)
    follower, fenced = fencing(store, leader=False, owned={ConnectorTaskId("c", 0)})
    assert follower.maybe_fence("c") is None
    waiting = asyncio.ensure_future(follower.preflight(ConnectorTaskId("c", 0), store.task_generation("c"), 5))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    leader, _ = fencing(store)
    await leader.maybe_fence("c")
    follower.config_changed()
    await asyncio.wait_for(waiting, 2)
    await follower.verify(ConnectorTaskId("c", 0), store.task_generation("c"))
    with pytest.raises(ConnectError, match="already been revoked"):
        await follower.verify(ConnectorTaskId("c", 1), store.task_generation("c"))
    with pytest.raises(ConnectError, match="already generated a new set of task configs"):
        await follower.verify(ConnectorTaskId("c", 0), store.task_generation("c") - 1)
    assert fenced == []
    await follower.close()
    await leader.close()


async def test_new_task_configs_during_a_round_make_it_fence_again_for_the_newest_generation():
    store = FedConfigStore()
    store.feed("connector-c", {"properties": {}})
    store.put_tasks("c", 2)
    store.feed("tasks-fencing-c", {"task-count": 2})
    store.put_tasks("c", 3)
    zombies, fenced = fencing(store)
    original = zombies._fence

    async def fence_while_reconfigured(ids):
        await original(ids)
        if len(fenced) == 1:
            store.put_tasks("c", 4)  # written while the first round was fencing
    zombies._fence = fence_while_reconfigured
    await zombies.maybe_fence("c")
    assert store.task_count_record("c") == 4 and not store.pending_fencing("c")
    assert fenced == [["g-c-0", "g-c-1"], ["g-c-0", "g-c-1"]]  # the record still said 2 tasks ran
    await zombies.close()


async def test_a_failing_round_is_retried_and_waiting_tasks_time_out_naming_its_error():
    store = FedConfigStore()
    store.feed("connector-c", {"properties": {}})
    store.put_tasks("c", 2)
    store.feed("tasks-fencing-c", {"task-count": 2})
    store.put_tasks("c", 2)
    zombies, _ = fencing(store)

    async def denied(ids):
        raise RuntimeError("InitProducerId request for transactionalId `g-c-0` failed due to transactional ID "
                           "authorization failure")
    zombies._fence = denied
    zombies.maybe_fence("c")
    await eventually(lambda: "c" in zombies.errors, what="the round's error")
    with pytest.raises(ConnectError, match="The fencing failed on this worker, the leader: .*authorization"):
        await zombies.preflight(ConnectorTaskId("c", 0), store.task_generation("c"), 0.2)
    assert store.pending_fencing("c")
    await zombies.close()
