"""WorkerSinkTask's logic without a broker: a scripted consumer stands in for the client layer's group consumer.

Checked: records reach ``put`` in order with their positions; offsets are committed only after
``pre_commit`` returned them (and never when it raised: the consumer is rewound instead); a
RetriableError from ``put`` retries the same batch with the partitions paused; any other
exception fails the task naming the batch; revoked partitions are committed and closed before
they go, and their stale records are never put; the context's pause, resume, offset reset and
request_commit act on the consumer; transforms and error tolerance apply to sink records.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from types import SimpleNamespace

import pytest

import mirrorline.runtime.sink_task as sink_task_module
from mirrorline.api import ConnectorTaskId, RetriableError, SinkRecord, SinkTask, TopicPartition
from mirrorline.runtime.error_handling import ErrorHandler, ErrorSettings
from mirrorline.runtime.sink_task import SinkPutError, WorkerSinkTask
from mirrorline.runtime.transform_chain import TransformChain, TransformStage
from mirrorline.storage.status import State
from mirrorline.transforms.routing import Filter, RegexRouter

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
TASK_ID = ConnectorTaskId("sink", 0)


def message(tp: TopicPartition, offset: int, value: bytes | None = None):
    """A consumed record as the client hands it over."""
    return SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, key=b"k",
                           value=value if value is not None else f"{tp.partition}:{offset}".encode(),
                           headers=[("h", b"v")], timestamp=1000 + offset, timestamp_type=0)


class ScriptedConsumer:
    """Hands out queued batches from ``getmany`` and records commits, pauses and seeks.

    The first ``getmany`` assigns ``initial`` partitions through the listener, as a join does.
    """

    def __init__(self, initial=(TP0,)):
        self.batches: deque[dict] = deque()
        self.commits: list[dict[TopicPartition, int]] = []
        self.paused: set[TopicPartition] = set()
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.committed_offsets: dict[TopicPartition, int] = {}
        self.listener = None
        self.subscription = None
        self.initial = list(initial)
        self.kwargs = None
        self.stopped = False

    def __call__(self, kwargs):
        self.kwargs = kwargs
        return self

    async def start(self):
        pass

    async def stop(self):
        self.stopped = True

    def subscribe(self, listener, topics=(), pattern=None):
        self.subscription = pattern or list(topics)
        self.listener = listener

    async def getmany(self, timeout_ms=0):
        if self.initial:
            assigned, self.initial = self.initial, []
            await self.listener.on_partitions_assigned(list(assigned))
        if self.batches:
            batch = self.batches.popleft()
            return {tp: ms for tp, ms in batch.items() if tp not in self.paused}
        await asyncio.sleep(0.01)
        return {}

    async def commit(self, offsets):
        assert all(isinstance(tp, TopicPartition) for tp in offsets)
        self.commits.append({TopicPartition(*tp): o for tp, o in offsets.items()})

    def pause(self, *tps):
        self.paused |= {TopicPartition(*tp) for tp in tps}

    def resume(self, *tps):
        self.paused -= {TopicPartition(*tp) for tp in tps}

    def seek(self, tp, offset):
        self.seeks.append((TopicPartition(*tp), offset))

    async def committed(self, tp):
        return self.committed_offsets.get(TopicPartition(*tp))

    async def seek_to_beginning(self, *tps):
        self.seeks.extend((TopicPartition(*tp), 0) for tp in tps)


class RecordingSinkTask(SinkTask):
    """Keeps what it was given; ``fail_put`` / ``fail_flush`` make the next calls raise."""

    def __init__(self):
        self.puts: list[list[SinkRecord]] = []
        self.flushed: list[dict] = []
        self.opened: list[list[TopicPartition]] = []
        self.closed: list[list[TopicPartition]] = []
        self.fail_put: list[BaseException] = []
        self.fail_flush = False
        self.stopped = False

    async def start(self, config):
        self.config = config

    async def open(self, partitions):
        self.opened.append(list(partitions))

    async def put(self, records):
        if self.fail_put:
            raise self.fail_put.pop(0)
        self.puts.append(list(records))

    async def flush(self, offsets):
        if self.fail_flush:
            raise OSError("disk full")
        self.flushed.append(dict(offsets))

    async def close(self, partitions):
        self.closed.append(list(partitions))

    async def stop(self):
        self.stopped = True


class Harness:
    """A WorkerSinkTask with a scripted consumer, recording statuses and failures."""

    def __init__(self, *, flush_interval_s=3600.0, transforms=None, errors=None, initial=(TP0,), topics=("t",),
                 regex=None):
        self.consumer = ScriptedConsumer(initial)
        self.task = RecordingSinkTask()
        self.statuses: list[State] = []
        self.failures: list[BaseException] = []

        async def on_status(task_id, state, trace):
            self.statuses.append(state)

        async def on_failure(task_id, exc):
            self.failures.append(exc)

        self.runner = WorkerSinkTask(TASK_ID, self.task, {"file": "x"}, consumer_kwargs={"bootstrap_servers": "b"},
                                     topics=list(topics), topics_regex=regex, on_status=on_status,
                                     on_failure=on_failure, flush_interval_s=flush_interval_s,
                                     transforms=transforms, error_handler=errors, consumer_factory=self.consumer)

    def feed(self, *messages):
        batch: dict[TopicPartition, list] = {}
        for m in messages:
            batch.setdefault(TopicPartition(m.topic, m.partition), []).append(m)
        self.consumer.batches.append(batch)

    async def until(self, condition, timeout=5.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, "condition never met"
            await asyncio.sleep(0.005)

    def put_offsets(self):
        return [(r.partition, r.offset) for batch in self.task.puts for r in batch]


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(sink_task_module, "RETRY_BACKOFF_S", 0.02)
    monkeypatch.setattr(sink_task_module, "POLL_TIMEOUT_MS", 10)


async def test_records_reach_put_and_offsets_commit_only_after_flush():
    h = Harness()
    await h.runner.start()
    assert h.consumer.kwargs["group_id"] == "connect-sink" and h.consumer.kwargs["enable_auto_commit"] is False
    assert h.consumer.kwargs["auto_offset_reset"] == "earliest"
    assert h.task.config["topics"] == "t"  # the task sees its connector's topics, as in Connect
    h.feed(message(TP0, 0), message(TP0, 1), message(TP0, 2))
    await h.until(lambda: h.put_offsets() == [(0, 0), (0, 1), (0, 2)])
    record = h.task.puts[0][0]
    assert (record.topic, record.key, record.value, record.headers, record.timestamp, record.timestamp_type) == \
        ("t", b"k", b"0:0", [("h", b"v")], 1000, "CreateTime")
    assert h.task.opened == [[TP0]] and h.statuses == [State.RUNNING]
    assert h.consumer.commits == []  # not before a flush
    h.runner.request_commit()
    await h.until(lambda: h.consumer.commits)
    assert h.task.flushed == [{TP0: 3}] and h.consumer.commits == [{TP0: 3}]
    await h.runner.stop()
    assert h.consumer.commits == [{TP0: 3}]  # nothing new: not committed twice
    assert h.task.closed == [[TP0]] and h.task.stopped and h.consumer.stopped


async def test_flush_interval_commits_and_stop_commits_the_rest():
    h = Harness(flush_interval_s=0.05)
    await h.runner.start()
    h.feed(message(TP0, 0))
    await h.until(lambda: h.consumer.commits == [{TP0: 1}])
    h.feed(message(TP0, 1), message(TP0, 2))
    await h.until(lambda: len(h.put_offsets()) == 3)
    await h.runner.stop()
    assert h.consumer.commits[-1] == {TP0: 3}


async def test_a_failing_flush_commits_nothing_and_rewinds():
    h = Harness()
    await h.runner.start()
    h.feed(message(TP0, 0), message(TP0, 1))
    await h.until(lambda: len(h.put_offsets()) == 2)
    h.runner.request_commit()
    await h.until(lambda: h.consumer.commits == [{TP0: 2}])
    h.feed(message(TP0, 2), message(TP0, 3))
    await h.until(lambda: len(h.put_offsets()) == 4)
    h.task.fail_flush = True
    h.runner.request_commit()
    await h.until(lambda: h.consumer.seeks)
    assert h.consumer.seeks == [(TP0, 2)]  # back to the last commit: records 2 and 3 come again
    assert h.consumer.commits == [{TP0: 2}]
    assert not h.failures


async def test_pre_commit_decides_what_is_committed():
    class Cautious(RecordingSinkTask):
        async def pre_commit(self, offsets):
            return {tp: o - 1 for tp, o in offsets.items()}  # the last record is not durable yet

    h = Harness()
    h.task = Cautious()
    h.runner.task = h.task
    await h.runner.start()
    h.feed(message(TP0, 0), message(TP0, 1))
    await h.until(lambda: len(h.put_offsets()) == 2)
    h.runner.request_commit()
    await h.until(lambda: h.consumer.commits)
    assert h.consumer.commits == [{TP0: 1}]
    await h.runner.stop()


async def test_retriable_put_retries_the_same_batch_with_partitions_paused():
    h = Harness()
    await h.runner.start()
    h.task.fail_put = [RetriableError("target busy"), RetriableError("still busy")]
    h.feed(message(TP0, 0), message(TP0, 1))
    await h.until(lambda: h.task.puts)
    assert h.put_offsets() == [(0, 0), (0, 1)]  # the same batch, once it was accepted
    assert h.consumer.paused == set()  # resumed after the retries
    assert "retrying" not in h.runner.warnings and not h.failures
    await h.runner.stop()


async def test_other_put_errors_fail_the_task_naming_the_batch():
    h = Harness()
    await h.runner.start()
    h.task.fail_put = [ValueError("cannot write")]
    h.feed(message(TP0, 5), message(TP0, 6))
    await h.until(lambda: h.failures)
    error = h.failures[0]
    assert isinstance(error, SinkPutError) and h.runner.failed
    assert "from topic t partition 0 offset 5 to topic t partition 0 offset 6" in str(error)
    await h.runner.stop()
    assert h.consumer.commits == []  # a failed task commits nothing on stop


async def test_revoke_commits_and_closes_and_drops_stale_records():
    h = Harness(initial=(TP0, TP1))
    await h.runner.start()
    h.feed(message(TP0, 0), message(TP1, 0))
    await h.until(lambda: len(h.put_offsets()) == 2)
    await h.consumer.listener.on_partitions_revoked([TopicPartition("t", 1)])
    assert h.consumer.commits == [{TP1: 1}] and h.task.flushed == [{TP1: 1}]
    assert h.task.closed == [[TP1]] and h.runner.assignment() == frozenset({TP0})
    h.feed(message(TP0, 1), message(TP1, 1))  # TP1's record was fetched before the revocation
    await h.until(lambda: len(h.put_offsets()) == 3)
    await asyncio.sleep(0.05)
    assert h.put_offsets() == [(0, 0), (1, 0), (0, 1)]
    await h.consumer.listener.on_partitions_assigned([TopicPartition("t", 1)])
    assert h.task.opened == [[TP0, TP1], [TP1]]
    await h.runner.stop()
    assert h.consumer.commits[-1] == {TP0: 2}


async def test_context_pause_resume_offset_reset_and_task_pause():
    h = Harness(initial=(TP0, TP1))
    await h.runner.start()
    context = h.task.context
    await h.until(lambda: context.assignment() == frozenset({TP0, TP1}))
    context.pause(TP1)
    assert h.consumer.paused == {TP1}
    await h.runner.pause()  # the worker pauses the task: everything stops, the context's pause survives
    assert h.consumer.paused == {TP0, TP1} and h.statuses[-1] == State.PAUSED
    await h.runner.resume()
    assert h.consumer.paused == {TP1} and h.statuses[-1] == State.RUNNING
    context.resume(TP1)
    assert h.consumer.paused == set()
    context.offset({TP0: 42})
    await h.until(lambda: (TP0, 42) in h.consumer.seeks)
    assert context.errant_record_reporter() is None  # errors.tolerance=none, no log, no DLQ
    await h.runner.stop()


async def test_transforms_route_and_filter_sink_records():
    router, drop = RegexRouter(), Filter()
    router.configure(RegexRouter.config_def.parse({"regex": "t", "replacement": "routed"}))
    drop.configure(Filter.config_def.parse({}))

    class OddOffsets:
        def test(self, record):
            return record.offset % 2 == 1

        def close(self):
            pass

    chain = TransformChain([TransformStage("route", router), TransformStage("drop", drop, OddOffsets())])
    h = Harness(transforms=chain)
    await h.runner.start()
    h.feed(*(message(TP0, i) for i in range(4)))
    await h.until(lambda: h.task.puts)
    assert [(r.topic, r.offset) for r in h.task.puts[0]] == [("routed", 0), ("routed", 2)]
    h.runner.request_commit()
    await h.until(lambda: h.consumer.commits)
    assert h.consumer.commits == [{TP0: 4}]  # dropped records count as done
    await h.runner.stop()


async def test_a_failing_transform_is_skipped_with_tolerance_all_and_fails_the_task_without():
    class Picky:
        def apply(self, record):
            if record.value == b"0:1":
                raise ValueError("cannot handle 0:1")
            return record

        def close(self):
            pass

    tolerant = Harness(transforms=TransformChain([TransformStage("picky", Picky())]),
                       errors=ErrorHandler(TASK_ID, ErrorSettings(tolerance="all")))
    await tolerant.runner.start()
    assert tolerant.task.context.errant_record_reporter() is not None
    tolerant.feed(*(message(TP0, i) for i in range(3)))
    await tolerant.until(lambda: tolerant.task.puts)
    assert tolerant.put_offsets() == [(0, 0), (0, 2)]
    await tolerant.runner.stop()
    assert tolerant.consumer.commits == [{TP0: 3}]

    strict = Harness(transforms=TransformChain([TransformStage("picky", Picky())]))
    await strict.runner.start()
    strict.feed(*(message(TP0, i) for i in range(3)))
    await strict.until(lambda: strict.failures)
    assert "topic t partition 0 offset 1" in str(strict.failures[0])
    assert strict.task.puts == []
    await strict.runner.stop()


async def test_topics_regex_subscribes_with_a_whole_name_pattern():
    h = Harness(topics=(), regex="orders|payments")
    await h.runner.start()
    pattern = re.compile(h.consumer.subscription)  # the consumer matches with re.match
    assert pattern.match("orders") and pattern.match("payments")
    assert pattern.match("orders-eu") is None and pattern.match("payments\n") is None  # Java's matches()
    assert h.task.config["topics.regex"] == "orders|payments"
    await h.runner.stop()


async def test_errant_record_reporter_reports_the_consumed_record():
    from mirrorline.runtime.error_handling import ErrorReporter

    class Collect(ErrorReporter):
        def __init__(self):
            self.contexts = []

        async def report(self, context):
            self.contexts.append(context)

    class Reporting(RecordingSinkTask):
        async def put(self, records):
            kept = []
            for record in records:
                if record.value == "0:1":
                    await self.context.errant_record_reporter().report(record, ValueError("no"))
                else:
                    kept.append(record)
            self.puts.append(kept)

    class Upper:  # stands in for a converter: the task sees text, the DLQ gets the bytes consumed
        is_passthrough = False

        def to_data(self, record):
            from dataclasses import replace
            return replace(record, value=record.value.decode())

        def close(self):
            pass

    collect = Collect()
    h = Harness(errors=ErrorHandler(TASK_ID, ErrorSettings(tolerance="all"), [collect]))
    h.task = Reporting()
    h.runner.task = h.task
    h.runner._converters = Upper()
    await h.runner.start()
    h.feed(*(message(TP0, i) for i in range(3)))
    await h.until(lambda: h.task.puts)
    assert [r.value for r in h.task.puts[0]] == ["0:0", "0:2"]
    (context,) = collect.contexts
    assert context.original.value == b"0:1" and context.original.offset == 1  # as consumed
    assert context.stage.value == "TASK_PUT"
    await h.runner.stop()


async def test_after_an_abandoned_stop_the_group_consumer_is_closed_at_once():
    """The worker gave up on the task's stop (its cluster unreachable): release_clients closes the
    consumer the runtime made for it, not only the clients the task opened through its context."""
    h = Harness()
    closed_within: list[float] = []

    async def close_now(timeout):
        closed_within.append(timeout)

    h.consumer.close_now = close_now
    await h.runner.start()
    await h.until(lambda: h.task.opened)
    h.runner.abandon()
    await h.runner.release_clients()
    assert closed_within == [sink_task_module.CLOSE_NOW_TIMEOUT_S]
    assert h.runner._consumer is None
    await h.runner.release_clients()  # twice does nothing more
    assert closed_within == [sink_task_module.CLOSE_NOW_TIMEOUT_S]
