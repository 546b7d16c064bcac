"""ExactlyOnceWorkerSourceTask on a fake transactional producer (no broker): what goes into which transaction.

The real runner, a small source task and a :class:`FakeTxnProducer` standing in for the client layer's
transactional producer (a pure unit test may fake the producer; the integration tests in
``tests/integration/exactly_once`` run the same code against real brokers). The fake keeps each
transaction's writes and whether it was committed or aborted, so a test checks that records and
their source offsets always commit together, that ``commit_record`` comes only after a commit, and
that failures abort instead of committing.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mirrorline.api import ConnectorTaskId, SourceRecord, SourceTask
from mirrorline.api.errors import ConnectError, ProducerFencedError, TransactionalIdAuthorizationFailedError
from mirrorline.runtime.exactly_once_task import ExactlyOnceSettings, ExactlyOnceWorkerSourceTask
from mirrorline.storage.kafka_offsets import offset_key
from mirrorline.storage.offsets import MemoryOffsetStore
from support.herder_fakes import FakeRecordMetadata, eventually

OFFSETS_TOPIC = "connect-offsets"
TASK = ConnectorTaskId("c", 0)


class FakeTxnProducer:
    """A transactional producer that keeps transactions: ``transactions`` is a list of
    ``(outcome, [(topic, partition, key, value)])`` with outcome ``committed`` or ``aborted``."""

    instances: list[FakeTxnProducer] = []
    start_error: BaseException | None = None

    def __init__(self, kwargs, ignored=None):
        self.kwargs = kwargs
        self.transactions: list[tuple[str, list]] = []
        self.current: list | None = None
        self.fail_topic: str | None = None
        self.commit_error: BaseException | None = None
        self.stopped = False
        self._offsets: dict = {}
        FakeTxnProducer.instances.append(self)

    async def start(self):
        if FakeTxnProducer.start_error is not None:
            raise FakeTxnProducer.start_error

    async def learn_topics(self, topics):
        """Every topic is known."""

    async def stop(self):
        self.stopped = True

    async def flush(self):
        await asyncio.sleep(0)

    async def begin_transaction(self):
        assert self.current is None, "a transaction is already open"
        self.current = []

    async def commit_transaction(self):
        await self._end("committed")
        if self.commit_error is not None:
            raise self.commit_error

    async def abort_transaction(self):
        await self._end("aborted")

    async def _end(self, outcome: str):
        assert self.current is not None, "no transaction is open"
        self.transactions.append((outcome, self.current))
        self.current = None

    async def flush_for_commit(self):
        await self.flush()

    def can_abort(self) -> bool:
        return self.current is not None

    def fatal_error(self):
        return None

    def forget_transaction(self) -> None:
        pass

    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        assert self.current is not None, "sent outside a transaction"
        self.current.append((topic, partition, key, value))
        future = asyncio.get_running_loop().create_future()
        if topic == self.fail_topic:
            future.set_exception(RuntimeError(f"refused by {topic}"))
        else:
            offset = self._offsets[topic] = self._offsets.get(topic, -1) + 1
            future.set_result(FakeRecordMetadata(topic, partition or 0, offset, 0))
        return future

    def committed_records(self, topic: str) -> list[bytes]:
        return [value for outcome, writes in self.transactions if outcome == "committed"
                for t, _, _, value in writes if t == topic]


@pytest.fixture(autouse=True)
def fake_producer(monkeypatch):
    FakeTxnProducer.instances = []
    FakeTxnProducer.start_error = None
    monkeypatch.setattr("mirrorline.runtime.exactly_once_task.KafkaProducer", FakeTxnProducer)
    return FakeTxnProducer


class ListTask(SourceTask):
    """Returns the batches queued in ``batches`` (one per poll), then nothing; records ``commit_record``s."""

    def __init__(self, batches, on_poll=None):
        self.batches = list(batches)
        self.committed: list[tuple[bytes, object]] = []
        self.commits = 0
        self.on_poll = on_poll

    async def start(self, config):
        pass

    async def poll(self):
        if self.on_poll is not None:
            self.on_poll(self)
        if self.batches:
            return self.batches.pop(0)
        await asyncio.sleep(0.01)
        return []

    async def commit_record(self, record, metadata):
        self.committed.append((record.value, metadata))

    async def commit(self):
        self.commits += 1

    async def stop(self):
        pass


def record(i: int, topic: str = "out", partition: str = "p0") -> SourceRecord:
    return SourceRecord({"part": partition}, {"pos": i}, topic, 0, None, f"v{i}".encode())


async def runner(task: SourceTask, boundary: str = "poll", interval_s: float = 60.0, verify=None, preflight=None):
    failures: list[BaseException] = []
    statuses: list = []

    async def on_failure(task_id, exc):
        failures.append(exc)

    async def on_status(task_id, state, trace):
        statuses.append(state)

    async def nothing():
        return None

    settings = ExactlyOnceSettings("g-c-0", boundary, interval_s, OFFSETS_TOPIC, preflight or nothing,
                                   verify or nothing, fencing_timeout_s=1.0)
    store = MemoryOffsetStore()
    from mirrorline.runtime.context import StoreOffsetReader

    worker_task = ExactlyOnceWorkerSourceTask(
        TASK, task, {}, producer_kwargs={}, offset_store=store, offset_reader=StoreOffsetReader(store, "c"),
        on_status=on_status, on_failure=on_failure, flush_interval_s=60.0, start_timeout_s=1.0,
        stall_timeout_s=0, exactly_once=settings)
    worker_task.failures = failures
    worker_task.statuses = statuses
    await worker_task.start()
    return worker_task


def offsets_in(writes) -> dict[str, dict]:
    return {json.loads(key)[1]["part"]: json.loads(value) for topic, _, key, value in writes if topic == OFFSETS_TOPIC}


async def test_each_poll_batch_commits_its_records_with_their_offsets_and_then_commit_record_runs():
    task = ListTask([[record(0), record(1, partition="p1"), record(2)], [record(3)]])
    worker_task = await runner(task)
    producer = await eventually(lambda: FakeTxnProducer.instances and FakeTxnProducer.instances[0])
    await eventually(lambda: len(producer.transactions) >= 2, what="two transactions")
    await worker_task.stop()
    first, second = producer.transactions[:2]
    assert first[0] == second[0] == "committed"
    assert [v for t, _, _, v in first[1] if t == "out"] == [b"v0", b"v1", b"v2"]
    assert offsets_in(first[1]) == {"p0": {"pos": 2}, "p1": {"pos": 1}}  # latest of each partition
    assert [k for t, _, k, _ in first[1] if t == OFFSETS_TOPIC][0] in {offset_key("c", {"part": "p0"}),
                                                                        offset_key("c", {"part": "p1"})}
    assert offsets_in(second[1]) == {"p0": {"pos": 3}}
    assert [v for v, _ in task.committed] == [b"v0", b"v1", b"v2", b"v3"]
    assert all(m is not None for _, m in task.committed) and task.commits >= 2
    assert producer.kwargs["transactional_id"] == "g-c-0" and producer.kwargs["enable_idempotence"] is True
    assert not worker_task.failures


async def test_a_refused_record_aborts_the_transaction_and_fails_the_task():
    def refuse(task):
        FakeTxnProducer.instances[0].fail_topic = "out"
    task = ListTask([[record(0), record(1)]], on_poll=refuse)
    worker_task = await runner(task)
    await eventually(lambda: worker_task.failures, what="the task failing")
    await worker_task.stop()
    producer = FakeTxnProducer.instances[0]
    assert [outcome for outcome, _ in producer.transactions] == ["aborted"]
    assert not task.committed, "commit_record must not run for records of an aborted transaction"
    assert "could not write a record of its transaction" in str(worker_task.failures[0])


async def test_interval_boundary_commits_several_polls_at_once_and_the_rest_on_stop():
    task = ListTask([[record(0)], [record(1)], [record(2)]])
    worker_task = await runner(task, boundary="interval", interval_s=30.0)
    await eventually(lambda: not task.batches, what="all polls")
    await asyncio.sleep(0.05)
    producer = FakeTxnProducer.instances[0]
    assert producer.transactions == [] and not task.committed  # still one open transaction
    await worker_task.stop()
    assert len(producer.transactions) == 1 and producer.transactions[0][0] == "committed"
    assert producer.committed_records("out") == [b"v0", b"v1", b"v2"]
    assert offsets_in(producer.transactions[0][1]) == {"p0": {"pos": 2}}


async def test_under_the_interval_boundary_a_requested_commit_ends_the_transaction_without_the_interval():
    """``context.request_commit()`` commits the open transaction at the end of a poll, a second after the
    last commit at the soonest, instead of when the 30-s interval is over."""
    def ask_at_v1(task):
        if task.batches and task.batches[0][0].value == b"v1":
            task.context.request_commit()
    task = ListTask([[record(0)], [record(1)], [record(2)]], on_poll=ask_at_v1)
    worker_task = await runner(task, boundary="interval", interval_s=30.0)
    producer = await eventually(lambda: FakeTxnProducer.instances and FakeTxnProducer.instances[0])
    await eventually(lambda: producer.transactions, timeout=3.0, what="the requested commit")
    assert producer.transactions[0][0] == "committed"
    assert producer.committed_records("out") == [b"v0", b"v1", b"v2"]
    assert offsets_in(producer.transactions[0][1]) == {"p0": {"pos": 2}}
    await worker_task.stop()
    assert not worker_task.failures


async def test_connector_defined_boundaries_commit_and_abort_where_the_task_asks():
    r0, r1, r2, r3 = record(0), record(1), record(2), record(3)

    def steer(task):
        context = task.context.transaction_context
        assert context is not None and task.context.exactly_once
        context.commit_transaction(r1)   # commit right after r1
        context.abort_transaction(r3)    # and abort right after r3
    task = ListTask([[r0, r1, r2, r3]], on_poll=steer)
    worker_task = await runner(task, boundary="connector")
    producer = await eventually(lambda: FakeTxnProducer.instances and FakeTxnProducer.instances[0])
    await eventually(lambda: len(producer.transactions) >= 3, what="three transactions")
    await worker_task.stop()
    outcomes = [(o, [v for t, _, _, v in w if t == "out"], offsets_in(w)) for o, w in producer.transactions[:3]]
    assert outcomes == [("committed", [b"v0", b"v1"], {"p0": {"pos": 1}}),
                        ("aborted", [b"v2", b"v3"], {}),
                        ("committed", [], {"p0": {"pos": 3}})]  # the aborted records' offsets still commit
    assert task.committed[:2] == [(b"v0", task.committed[0][1]), (b"v1", task.committed[1][1])]
    assert task.committed[2:] == [(b"v2", None), (b"v3", None)]  # done, not written


async def test_stop_aborts_what_a_connector_did_not_ask_to_commit():
    task = ListTask([[record(0)]])
    worker_task = await runner(task, boundary="connector")
    await eventually(lambda: not task.batches, what="the poll")
    await asyncio.sleep(0.05)
    await worker_task.stop()
    assert [o for o, _ in FakeTxnProducer.instances[0].transactions] == ["aborted"]
    assert not task.committed


async def test_a_task_writing_to_its_offsets_topic_fails():
    worker_task = await runner(ListTask([[record(0, topic=OFFSETS_TOPIC)]]))
    await eventually(lambda: worker_task.failures, what="the task failing")
    await worker_task.stop()
    assert "may not produce to their own offsets topics" in str(worker_task.failures[0])


@pytest.mark.parametrize("error, words", [
    (TransactionalIdAuthorizationFailedError("g-c-0"), "WRITE and DESCRIBE on TransactionalId 'g-c-0'"),
    (ProducerFencedError(), "was fenced"),
])
async def test_producer_errors_at_start_name_the_cause(error, words):
    FakeTxnProducer.start_error = error
    task = ListTask([])
    worker_task = await runner(task)
    await eventually(lambda: worker_task.failures, what="the task failing")
    await worker_task.stop()
    assert words in str(worker_task.failures[0])


async def test_a_commit_fenced_by_a_newer_instance_fails_this_one_and_releases_nothing():
    def fence(task):
        FakeTxnProducer.instances[0].commit_error = ProducerFencedError()
    task = ListTask([[record(0)]], on_poll=fence)
    worker_task = await runner(task)
    await eventually(lambda: worker_task.failures, what="the task failing")
    await worker_task.stop()
    assert "was fenced" in str(worker_task.failures[0]) and not task.committed


async def test_nothing_starts_before_the_preflight_and_verification_pass():
    gate = asyncio.Event()
    calls: list[str] = []

    async def preflight():
        calls.append("preflight")
        await gate.wait()

    async def verify():
        calls.append("verify")
        raise ConnectError("Cannot start source task c-0 as it has already been revoked from this worker")
    task = ListTask([[record(0)]])
    worker_task = await runner(task, preflight=preflight, verify=verify)
    await asyncio.sleep(0.05)
    assert calls == ["preflight"] and not FakeTxnProducer.instances  # no producer before the fencing
    gate.set()
    await eventually(lambda: worker_task.failures, what="the verification failing")
    await worker_task.stop()
    assert calls == ["preflight", "verify"] and "revoked" in str(worker_task.failures[0])
    assert FakeTxnProducer.instances[0].transactions == [] and task.batches  # never polled


async def test_a_coordinator_that_never_answers_fails_the_task_naming_the_broker_settings(monkeypatch):
    async def hang(self):
        await asyncio.Event().wait()
    monkeypatch.setattr(FakeTxnProducer, "start", hang)
    worker_task = await runner(ListTask([]))
    await eventually(lambda: worker_task.failures, timeout=5, what="the task failing")
    await worker_task.stop()
    message = str(worker_task.failures[0])
    assert "transaction coordinator of 'g-c-0' did not answer" in message
    assert "transaction.state.log.replication.factor" in message
