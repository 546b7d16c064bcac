"""Drive a :class:`~mirrorline.runtime.distributed.herder.DistributedHerder` without a broker.

Part of the test kit offered to mirrorline's own tests and to plugin authors: it runs a real
distributed herder (real Worker, Supervisor, WorkerSourceTask, assignment rules) on in-memory
stand-ins for the three Kafka-backed stores and the Kafka group member, so a test decides
exactly when a rebalance starts, what the leader assigns and when it is applied, and can
check how a connector behaves when it is started, reconfigured, revoked, paused or stopped
by a cluster, in milliseconds and deterministically.

What stands in for what:

- :class:`InMemoryConfigStore` for ``KafkaConfigStore``: a :class:`~mirrorline.storage.configs.
  MemoryConfigStore` that also keeps the config-topic ``offset`` (one record per connector
  config, task config, commit and target state, as the real store writes them), offers
  ``inconsistent()`` and ``read_to_end()``, and calls its ``listener(kind, connector)`` after
  each write, *asynchronously* (``loop.call_soon``) as the real store does when it reads its
  own records back from the topic: kind ``"connector"`` (config written or deleted),
  ``"tasks"`` (task configs committed) or ``"target_state"``;
- :class:`RecordingStatusStore` for ``KafkaStatusStore``: a ``MemoryStatusStore`` that also
  keeps every status written, in order (``history``), so a test can check a state that did
  not last (FAILED before an automatic restart);
- ``MemoryOffsetStore`` (from :mod:`mirrorline.storage.offsets`) for ``KafkaOffsetStore``;
- :class:`FakeGroupMember` for ``WorkerGroupMember``: it never talks to a coordinator; the
  test drives each rebalance (:meth:`FakeGroupMember.begin_rebalance` calls the herder's
  ``before_rejoin``; :meth:`FakeGroupMember.complete_rebalance` asks the herder, as leader,
  to ``assign`` with its ``member_state()`` and any pretend peers, then hands it its
  ``on_assignment``). ``request_rejoin()`` only records the request;
- :class:`FakeRecordProducer` for the task producer (``KafkaProducer``): a pure unit test may
  use a fake here. Install it with :func:`patch_record_producer` (pytest's ``monkeypatch``);
  otherwise every started task would try to reach ``bootstrap.servers``. It acknowledges
  every record at once, with increasing offsets per topic partition, and keeps what it
  was sent.
- :func:`source_task_runner` for a lone ``WorkerSourceTask`` (offsets in memory, status and
  failures ignored), to run one task's runtime loops in a pure unit test.

Typical use::

    rig = await start_distributed_herder(registry_of(MySourceConnector))
    await rig.rebalance()                       # the first assignment (nothing yet)
    await rig.herder.put_connector_config("c", {...}, allow_replace=False)
    await rig.rebalance_until_stable()          # connector, then its tasks, start here
    ...
    await rig.stop()

:func:`settle` waits until the herder's one change coroutine has carried out everything
submitted so far (including what those changes caused through the config store's
listener); it relies on the herder's internal event queue, which this kit is written with.
Work that is timed rather than submitted (automatic restarts after a back-off, a task's
poll loop) is waited for with :func:`eventually`.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from mirrorline.api import hookspecs
from mirrorline.api.config import Config
from mirrorline.api.connector import Connector
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.distributed.assignment import Assignment, MemberState
from mirrorline.runtime.distributed.herder import DistributedHerder
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF
from mirrorline.storage.configs import MemoryConfigStore, TargetState
from mirrorline.storage.offsets import MemoryOffsetStore
from mirrorline.storage.status import MemoryStatusStore, Status

#: Worker settings of a distributed worker that never reaches a broker (127.0.0.1:1 refuses).
BASE_WORKER_SETTINGS: dict[str, str] = {
    "bootstrap.servers": "127.0.0.1:1",
    "group.id": "herder-fakes",
    "config.storage.topic": "herder-fakes-configs",
    "offset.storage.topic": "herder-fakes-offsets",
    "status.storage.topic": "herder-fakes-status",
    "listeners": "http://127.0.0.1:0",
    "rebalance.timeout.ms": "10000",
}

#: The REST address the rig's herder advertises (never listened on: nothing is forwarded to it).
WORKER_HOST = "127.0.0.1:18083"


# -- stores --------------------------------------------------------------------------------

class InMemoryConfigStore(MemoryConfigStore):
    """A config store that behaves like ``KafkaConfigStore`` for the herder, in memory.

    ``offset`` counts records as the config topic would (-1 before any record, then the next
    offset to read); ``listener(kind, connector)`` runs soon after each write (not during it),
    and only once :meth:`start` ran, as the real store notifies only what it reads after
    loading the topic. Writes made before ``start`` therefore seed the store silently.
    ``writes`` lists every write as ``(kind, connector, value)``: value is the config, the
    list of task configs, the target state, or None for a deletion.
    """

    def __init__(self) -> None:
        super().__init__()
        self.listener: Callable[[str, str], None] | None = None
        self.writes: list[tuple[str, str, Any]] = []
        self.read_to_end_calls = 0
        self._restart_requests: dict[str, tuple[bool, bool]] = {}
        self._records = 0
        self._pending_notifications = 0
        self._started = False

    @property
    def offset(self) -> int:
        """The next config-topic offset to read (-1 before any record was written)."""
        return self._records if self._records else -1

    @property
    def pending_notifications(self) -> int:
        """Listener calls scheduled but not made yet."""
        return self._pending_notifications

    def inconsistent(self) -> set[str]:
        """Connectors whose task configs are inconsistent: never any here (writes are atomic)."""
        return set()

    async def read_to_end(self) -> None:
        """Nothing to catch up with: every write is applied at once. Counts the calls."""
        self.read_to_end_calls += 1
        await asyncio.sleep(0)

    async def start(self) -> None:
        self._started = True

    async def stop(self, writes_wait_s: float | None = None) -> None:
        self._started = False

    async def put_connector(self, connector, config):
        await super().put_connector(connector, config)
        self._written(1, ("connector", connector, dict(config)))

    async def remove_connector(self, connector):
        await super().remove_connector(connector)
        # the real store writes a connector tombstone, then a target-state tombstone
        self._written(2, ("connector", connector, None), ("target_state", connector, None))

    async def put_task_configs(self, connector, configs):
        await super().put_task_configs(connector, configs)
        # one record per task config, then the commit record that makes them visible
        self._written(len(configs) + 1, ("tasks", connector, [dict(c) for c in configs]))

    async def put_target_state(self, connector, state):
        await super().put_target_state(connector, TargetState(state))
        self._written(1, ("target_state", connector, TargetState(state)))

    async def put_restart_request(self, connector, *, include_tasks, only_failed):
        self._restart_requests[connector] = (include_tasks, only_failed)
        self._written(1, ("restart", connector, (include_tasks, only_failed)))

    def restart_request(self, connector):
        return self._restart_requests.get(connector, (False, False))

    def _written(self, records: int, *changes: tuple[str, str, Any]) -> None:
        self._records += records
        for change in changes:
            self.writes.append(change)
            if self._started and self.listener is not None:
                self._pending_notifications += 1
                asyncio.get_running_loop().call_soon(self._notify, change[0], change[1])

    def _notify(self, kind: str, connector: str) -> None:
        self._pending_notifications -= 1
        if self._started and self.listener is not None:
            self.listener(kind, connector)


class RecordingStatusStore(MemoryStatusStore):
    """A ``MemoryStatusStore`` that keeps every status written: ``history`` holds
    ``(connector, task or None, Status)`` in the order written."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[str, int | None, Status]] = []

    async def put_connector(self, connector, status):
        self.history.append((connector, None, status))
        await super().put_connector(connector, status)

    async def put_task(self, connector, task, status):
        self.history.append((connector, task, status))
        await super().put_task(connector, task, status)

    def task_history(self, connector: str, task: int) -> list[Status]:
        """Every status written for one task, oldest first."""
        return [s for c, t, s in self.history if c == connector and t == task]


# -- the task producer -------------------------------------------------------------------

@dataclass(frozen=True)
class FakeRecordMetadata:
    """What an acknowledged send resolves to (the fields the runtime reads)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass
class SentRecord:
    """One record a :class:`FakeRecordProducer` acknowledged."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list | None
    timestamp: int


class FakeRecordProducer:
    """Stands in for the task producer (``mirrorline.clients.producer.KafkaProducer``) in task tests: every send is acknowledged at once.

    Records without a partition go to partition 0. ``instances`` lists every producer created
    (class-wide, cleared by :func:`patch_record_producer`), ``sent`` what one acknowledged.
    """

    instances: list[FakeRecordProducer] = []

    def __init__(self, kwargs: dict[str, Any], ignored: list[str] | None = None) -> None:
        self.kwargs = kwargs
        self.sent: list[SentRecord] = []
        self.started = False
        self.stopped = False
        self._next: dict[tuple[str, int], int] = defaultdict(int)
        FakeRecordProducer.instances.append(self)

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def flush(self) -> None:
        """Nothing is ever in flight."""

    async def learn_topics(self, topics) -> None:
        """Every topic is known."""

    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        partition = 0 if partition is None else partition
        offset = self._next[(topic, partition)]
        self._next[(topic, partition)] = offset + 1
        timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        self.sent.append(SentRecord(topic, partition, offset, key, value, headers, timestamp))
        future = asyncio.get_running_loop().create_future()
        future.set_result(FakeRecordMetadata(topic, partition, offset, timestamp))
        return future


def patch_record_producer(monkeypatch) -> type[FakeRecordProducer]:
    """Make every task started from now on use :class:`FakeRecordProducer` (pytest ``monkeypatch``)."""
    FakeRecordProducer.instances = []
    monkeypatch.setattr("mirrorline.runtime.worker_task.KafkaProducer", FakeRecordProducer)
    return FakeRecordProducer


def source_task_runner(task_id: Any, task: Any, offset_store: MemoryOffsetStore | None = None, **kwargs: Any) -> Any:
    """A ``WorkerSourceTask`` running ``task`` alone: offsets in memory (``offset_store``, a new one
    unless given), status and failures ignored.

    Its producer is whatever ``KafkaProducer`` is at start (:func:`patch_record_producer`, or a
    subclass of :class:`FakeRecordProducer` patched in the same way). ``kwargs`` go to the runner
    (``flush_interval_s=60`` unless given).
    """
    from mirrorline.runtime.context import StoreOffsetReader
    from mirrorline.runtime.worker_task import WorkerSourceTask

    async def ignore(*args: Any) -> None:
        pass

    store = MemoryOffsetStore() if offset_store is None else offset_store
    return WorkerSourceTask(task_id, task, {}, producer_kwargs={}, offset_store=store,
                            offset_reader=StoreOffsetReader(store, task_id.connector), on_status=ignore,
                            on_failure=ignore, **{"flush_interval_s": 60, **kwargs})


# -- the group member ----------------------------------------------------------------------

class FakeGroupMember:
    """Stands in for ``WorkerGroupMember``: the test says when the group rebalances.

    The herder is its ``listener`` (set it after creating the herder, which takes the member).
    ``generation`` is -1 until the first completed rebalance, then 1, 2, ... and -1 again while
    a lost membership is being handled, as the real member reports. ``rejoin_requested`` is
    set by ``request_rejoin()`` and cleared when the next rebalance begins; ``rejoin_requests``
    counts them. ``assignments`` lists what every completed rebalance gave every member.
    """

    def __init__(self, group_id: str = "herder-fakes", member_id: str = "member-1") -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.generation = -1
        self.listener: Any = None
        self.started = False
        self.stopped = False
        self.rejoin_requested = False
        self.rejoin_requests = 0
        self.assignments: list[dict[str, Assignment]] = []
        self._last_generation = 0

    async def start(self) -> None:
        """Nothing to join: the test runs the first rebalance."""
        self.started = True

    async def stop(self) -> None:
        """Leave the (pretend) group."""
        self.stopped = True
        self.generation = -1

    def request_rejoin(self) -> None:
        """Record that the herder asked for a rebalance."""
        self.rejoin_requested = True
        self.rejoin_requests += 1

    async def begin_rebalance(self, membership_lost: bool = False) -> None:
        """The first half of a rebalance: the herder's ``before_rejoin``, awaited.

        ``membership_lost`` pretends the group dropped this worker (session expired or fenced).
        """
        self.rejoin_requested = False
        if membership_lost:
            self.generation = -1
        await self.listener.before_rejoin(membership_lost)

    async def complete_rebalance(self, peers: Mapping[str, MemberState] | None = None) -> Assignment:
        """The second half: the herder, as leader, assigns the group (itself plus ``peers``, which
        pretend to be other workers), and gets its own assignment for a new generation.

        Returns this worker's assignment. The herder applies it on its own coroutine: wait for
        that with :func:`settle`.
        """
        self._last_generation += 1
        self.generation = self._last_generation
        members = {self.member_id: self.listener.member_state(), **dict(peers or {})}
        assignments = self.listener.assign(self.member_id, members)
        self.assignments.append(assignments)
        assignment = assignments[self.member_id]
        await self.listener.on_assignment(assignment, self.generation)
        return assignment


# -- plugins, config, and the rig ----------------------------------------------------------

def registry_of(*connector_classes: type[Connector]) -> PluginRegistry:
    """A plugin registry holding exactly ``connector_classes`` (no installed plugin is loaded)."""

    class _Plugin:
        @staticmethod
        @hookspecs.hookimpl
        def register_connectors():
            return list(connector_classes)

    manager = pluggy.PluginManager("mirrorline")
    manager.add_hookspecs(hookspecs)
    manager.register(_Plugin(), name="herder-fakes")
    registry = PluginRegistry(manager)
    registry.refresh()
    return registry


def distributed_worker_config(settings: Mapping[str, Any] | None = None) -> tuple[dict[str, str], Config]:
    """The raw and parsed settings of a distributed worker: :data:`BASE_WORKER_SETTINGS` plus ``settings``."""
    raw = {**BASE_WORKER_SETTINGS, **{k: str(v) for k, v in (settings or {}).items()}}
    return raw, DISTRIBUTED_CONFIG_DEF.parse(raw)


async def settle(herder: Any, timeout: float = 5.0) -> None:
    """Wait until the herder has carried out every change submitted so far, and every change
    those caused through the config store's listener (TimeoutError after ``timeout``)."""
    store = herder.config_store

    async def idle() -> bool:
        # Runs on the herder's change coroutine, so no other change is under way right now.
        return herder._events.empty() and not getattr(store, "pending_notifications", 0)

    async with asyncio.timeout(timeout):
        while not await herder._submit(idle):
            await asyncio.sleep(0)


async def eventually(condition: Callable[[], Any | Awaitable[Any]], timeout: float = 2.0,
                     interval: float = 0.005, what: str = "condition") -> Any:
    """Poll ``condition`` (sync or async) until it returns something truthy; return that.

    Raises AssertionError naming ``what`` if it does not within ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout:g}s")
        await asyncio.sleep(interval)


@dataclass
class HerderRig:
    """A started distributed herder on in-memory stores, and the fakes that drive it."""

    herder: Any
    config_store: InMemoryConfigStore
    offset_store: MemoryOffsetStore
    status_store: RecordingStatusStore
    member: FakeGroupMember
    stopped: bool = field(default=False)

    async def settle(self, timeout: float = 5.0) -> None:
        """See :func:`settle`."""
        await settle(self.herder, timeout)

    async def rebalance(self, *, membership_lost: bool = False,
                        peers: Mapping[str, MemberState] | None = None) -> Assignment:
        """One whole rebalance (begin, complete), then wait for the assignment to be applied."""
        await self.member.begin_rebalance(membership_lost)
        assignment = await self.member.complete_rebalance(peers)
        await self.settle()
        return assignment

    async def rebalance_until_stable(self, max_rounds: int = 5,
                                     peers: Mapping[str, MemberState] | None = None) -> list[Assignment]:
        """Rebalance (at least once) as long as the herder asks to rejoin, as the real group would."""
        rounds = [await self.rebalance(peers=peers)]
        while self.member.rejoin_requested:
            if len(rounds) >= max_rounds:
                raise AssertionError(f"the herder still asks to rejoin after {max_rounds} rebalances")
            rounds.append(await self.rebalance(peers=peers))
        return rounds

    async def stop(self) -> None:
        """Stop the herder (idempotent)."""
        if not self.stopped:
            self.stopped = True
            await self.herder.stop()


async def start_distributed_herder(plugins: PluginRegistry, settings: Mapping[str, Any] | None = None, *,
                                   config_store: InMemoryConfigStore | None = None,
                                   member_id: str = "member-1") -> HerderRig:
    """Create and start a DistributedHerder on in-memory stores with a :class:`FakeGroupMember`.

    ``settings`` override :data:`BASE_WORKER_SETTINGS`. Pass a pre-filled ``config_store`` to
    start with connectors already configured. No rebalance has run yet on return. Tasks need
    :func:`patch_record_producer` to run without a broker.
    """
    raw, config = distributed_worker_config(settings)
    stores = (config_store or InMemoryConfigStore(), MemoryOffsetStore(), RecordingStatusStore())
    member = FakeGroupMember(config["group.id"], member_id)
    herder = DistributedHerder(raw, config, plugins, stores=stores, member=member)
    member.listener = herder
    herder.set_url(f"http://{WORKER_HOST}", WORKER_HOST)
    await herder.start()
    return HerderRig(herder, *stores, member)


__all__ = [
    "BASE_WORKER_SETTINGS", "FakeGroupMember", "FakeRecordMetadata", "FakeRecordProducer", "HerderRig",
    "InMemoryConfigStore", "RecordingStatusStore", "SentRecord", "distributed_worker_config", "eventually",
    "patch_record_producer", "registry_of", "settle", "start_distributed_herder",
]
