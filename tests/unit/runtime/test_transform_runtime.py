"""The transform chain on a task's record path, on a real herder/worker/WorkerSourceTask (no broker).

The stores, the group member and the tasks' producer are the fakes of
:mod:`support.herder_fakes` (records are acknowledged at once). What is checked:
the chain runs between ``poll`` and the producer, a dropped record's offset is committed in
its turn (so a filter never stalls the commit, even when it drops everything) and the task
gets ``commit_record(record, None)`` for it in order, a transform that raises fails the task
with a trace naming the record, and a connector without transforms gets no chain at all.
"""

from __future__ import annotations

import asyncio
import json

import pluggy
import pytest

import mirrorline.transforms
from mirrorline.api import ConnectorTaskId, SourceConnector, SourceRecord, SourceTask, hookimpl, hookspecs
from mirrorline.plugins import PluginRegistry, full_name
from mirrorline.runtime.offset_tracker import OffsetTracker, TransformedOffsetTracker
from mirrorline.storage.status import State
from support.herder_fakes import eventually, patch_record_producer, start_distributed_herder

PARTITION = {"stream": 0}
#: connector name -> what its task's commit_record saw: (seq, metadata offset or None)
COMMITTED: dict[str, list[tuple[int, int | None]]] = {}


class BatchSourceConnector(SourceConnector):
    """One task that returns ``count`` JSON records in one poll, then nothing."""

    async def start(self, config) -> None:
        self.settings = {"name": config["name"], "count": config.originals.get("count", "10"),
                         "plain": config.originals.get("plain", "false")}

    def task_class(self):
        return BatchSourceTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.settings]

    async def stop(self) -> None:
        pass


class BatchSourceTask(SourceTask):
    """Record ``n`` has offset ``{"seq": n}``, value ``{"n": n, "email": ...}`` and, when ``n % 3 == 0``,
    a header ``skip``; with ``plain=true`` the values are not JSON."""

    async def start(self, config: dict[str, str]) -> None:
        self.name, self.count, self.plain = config["name"], int(config["count"]), config["plain"] == "true"
        self.done = False
        COMMITTED.setdefault(self.name, [])

    async def poll(self) -> list[SourceRecord]:
        await asyncio.sleep(0.01)
        if self.done:
            return []
        self.done = True
        return [SourceRecord(PARTITION, {"seq": n}, "A.orders", 0, f"k{n}".encode(),
                             b"plain" if self.plain else json.dumps({"n": n, "email": f"u{n}@x"}).encode(),
                             [("skip", b"")] if n % 3 == 0 else [])
                for n in range(self.count)]

    async def commit_record(self, record, metadata) -> None:
        COMMITTED[self.name].append((record.source_offset["seq"], None if metadata is None else metadata.offset))

    async def stop(self) -> None:
        pass


class _Connectors:
    @staticmethod
    @hookimpl
    def register_connectors():
        return [BatchSourceConnector]


def registry() -> PluginRegistry:
    manager = pluggy.PluginManager("mirrorline")
    manager.add_hookspecs(hookspecs)
    manager.register(_Connectors(), name="batch")
    manager.register(mirrorline.transforms, name="transforms")
    plugins = PluginRegistry(manager)
    plugins.refresh()
    return plugins


CHAIN = {
    "transforms": "drop,route,mask",
    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter", "transforms.drop.predicate": "skip",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": r"A\.(.*)", "transforms.route.replacement": "copy.$1",
    "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value", "transforms.mask.fields": "email",
    "predicates": "skip",
    "predicates.skip.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "predicates.skip.name": "skip",
}


@pytest.fixture
async def rig(monkeypatch):
    producer = patch_record_producer(monkeypatch)
    COMMITTED.clear()
    rig = await start_distributed_herder(registry(), {"offset.flush.interval.ms": "50",
                                                      "restart.on.failure.enable": "false"})
    rig.producer = producer
    await rig.rebalance()
    yield rig
    await rig.stop()


async def run(rig, name: str, **config: str) -> None:
    created, _ = await rig.herder.put_connector_config(
        name, {"connector.class": full_name(BatchSourceConnector), **config}, allow_replace=False)
    assert created
    await rig.rebalance_until_stable()


async def stored_is(rig, name: str, offset: dict) -> bool:
    return await rig.offset_store.get(name, [PARTITION]) == [offset]


def sent(rig) -> list:
    return [r for producer in rig.producer.instances for r in producer.sent]


async def test_the_chain_runs_between_poll_and_the_producer_and_dropped_offsets_commit(rig):
    await run(rig, "chain", count="10", **CHAIN)
    await eventually(lambda: len(COMMITTED["chain"]) == 10, what="commit_record for all 10 records")
    written = sent(rig)
    assert [json.loads(r.value)["n"] for r in written] == [1, 2, 4, 5, 7, 8]
    assert {r.topic for r in written} == {"copy.orders"}
    assert {json.loads(r.value)["email"] for r in written} == {""}
    # every record is committed in poll order: the dropped ones (0, 3, 6, 9) without metadata
    assert COMMITTED["chain"] == [(0, None), (1, 0), (2, 1), (3, None), (4, 2), (5, 3), (6, None), (7, 4),
                                  (8, 5), (9, None)]
    # the last record was dropped, and its offset is committed all the same
    await eventually(lambda: stored_is(rig, "chain", {"seq": 9}), what="offset of the last, dropped record stored")


async def test_a_filter_that_drops_everything_never_stalls_the_commit(rig):
    await run(rig, "all", count="5", transforms="drop", **{"transforms.drop.type": "Filter"})
    await eventually(lambda: len(COMMITTED["all"]) == 5, what="commit_record for the dropped records")
    assert sent(rig) == []
    assert COMMITTED["all"] == [(n, None) for n in range(5)]
    await eventually(lambda: stored_is(rig, "all", {"seq": 4}), what="offset of the dropped records stored")


async def test_a_transform_that_raises_fails_the_task_naming_the_record(rig):
    await run(rig, "bad", count="3", plain="true", transforms="mask",
              **{"transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "email"})
    await eventually(lambda: (rig.status_store.tasks("bad").get(0) or None) and
                     rig.status_store.tasks("bad")[0].state == State.FAILED, what="task FAILED")
    trace = rig.status_store.tasks("bad")[0].trace
    assert "TransformError: Transform mask (MaskFieldValue) failed on the record of source partition " \
           "{'stream': 0} at source offset {'seq': 0} (bound for topic A.orders partition 0)" in trace
    assert "needs the record value to be a JSON object" in trace
    assert sent(rig) == []


async def test_without_transforms_the_task_has_no_chain(rig):
    await run(rig, "plain", count="4")
    await eventually(lambda: len(COMMITTED["plain"]) == 4, what="commit_record")
    task = rig.herder.worker.tasks[ConnectorTaskId("plain", 0)]
    assert task._chain is None and type(task._tracker) is OffsetTracker
    assert len(sent(rig)) == 4


def test_transformed_tracker_releases_a_dropped_record_after_the_records_before_it():
    tracker = TransformedOffsetTracker("c")
    first = tracker.submit(PARTITION, {"seq": 0})
    dropped = SourceRecord(PARTITION, {"seq": 1}, "t")
    assert tracker.drop(dropped) == []  # record 0 is still in flight
    assert tracker.committable() == []
    assert tracker.ack(first) == [dropped]
    assert tracker.committable() == [(PARTITION, {"seq": 1})]
    assert tracker.outstanding == 0
    unpositioned = SourceRecord(None, None, "t")
    assert tracker.drop(unpositioned) == [unpositioned]
