"""DistributedHerder: one worker of a cluster that shares connectors through Kafka, as Connect's.

State lives in three compacted topics, read by every worker: connector and task configs and
target states (config topic), source offsets, and statuses. Membership and the share of work
come from Kafka's group protocol (:mod:`~mirrorline.runtime.distributed.membership`), with the
incremental, sticky assignment of :mod:`~mirrorline.runtime.distributed.assignment`.

Who writes what:

- connector configs, deletions, ``stop`` and restart requests are written by the **leader**;
  on another worker these raise :class:`~mirrorline.runtime.herder.NotLeaderError` naming the
  leader, and the REST layer forwards the request there (``409`` while the group is
  rebalancing, as Connect);
- restarts of one instance are carried out where it runs (elsewhere:
  :class:`~mirrorline.runtime.herder.NotAssignedError` naming that worker); restarts of a
  connector *and* its tasks (``includeTasks``/``onlyFailed``) are written by the leader to the
  config topic as Connect's ``restart-connector-<name>`` records, and every worker restarts what
  it runs of the plan;
- pause and resume write the target state from whichever worker gets the request;
- the worker running a connector generates its task configs and commits them to the config
  topic (Connect routes them through the leader; here the config topic orders them, and only
  the connector's current owner writes);
- every worker records the statuses of what it runs (``worker_id`` = its REST host:port, with
  the group generation), and ``UNASSIGNED`` when it lets a task or connector go.

Every worker reacts to what it reads in the config topic: new or deleted connectors and
changed task counts ask the group to rebalance; changed task configs restart the affected
tasks where they run; target states pause, resume or stop what runs here. All of that, and
applying assignments, the group's rebalance callbacks, reconfiguration requests and automatic
restarts of failed instances, happens one change at a time on one owned coroutine, so nothing
interleaves. A reconfiguration requested while a rebalance is under way is remembered and
carried out once the new assignment is applied, never dropped. A task is started only after its previous owner stopped it (see the assignment
module), and a worker that learns it was dropped from the group stops everything at once.
"""

from __future__ import annotations

import asyncio
import time
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any
from urllib.parse import urlparse

from mirrorline.api.config import Config
from mirrorline.api.errors import AlreadyExistsError, BadRequestError, NotFoundError, \
    RebalanceInProgressError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import AbstractHerder
from mirrorline.runtime.background import BackgroundTasks, without_stray_cancellation
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.distributed import metrics
from mirrorline.runtime.distributed.assignment import CONFIG_MISMATCH, Assignment, MemberState, assign
from mirrorline.runtime.distributed.fencing import ZombieFencing
from mirrorline.runtime.exactly_once import DISABLED, ENABLED, transactional_id
from mirrorline.runtime.exactly_once_task import ExactlyOnceSettings
from mirrorline.runtime.source_config import (
    OFFSETS_STORAGE_TOPIC,
    POLL,
    TRANSACTION_BOUNDARY,
    TRANSACTION_BOUNDARY_INTERVAL_MS,
)
from mirrorline.storage.connector_offsets import ConnectorOffsetStore
from mirrorline.runtime.worker_config import EXACTLY_ONCE_SOURCE_SUPPORT
from mirrorline.runtime.distributed.membership import MembershipListener, WorkerGroupMember
from mirrorline.runtime.herder import NotAssignedError, NotLeaderError
from mirrorline.storage.configs import TargetState
from mirrorline.storage.kafka_configs import KafkaConfigStore, SessionKey, TaskConfigsTooLargeError
from mirrorline.storage.kafka_offsets import KafkaOffsetStore
from mirrorline.storage.kafka_status import KafkaStatusStore
from mirrorline.storage.status import State

log = logging.getLogger(__name__)

#: How long a write waits for a rebalance under way to finish before answering 409.
REBALANCE_WAIT_S = 10.0

_REBALANCING = ("Cannot complete request momentarily due to a rebalance of the worker cluster; "
                "retry in a few seconds.")


class DistributedHerder(AbstractHerder, MembershipListener):
    """Runs its share of the cluster's connectors and tasks, and serves the cluster's REST API."""

    def __init__(self, worker_raw: Mapping[str, str], worker_config: Config, plugins: PluginRegistry, *,
                 kafka_cluster_id: str | None = None, managed_connectors: list[dict[str, str]] | None = None,
                 stores: tuple[Any, Any, Any] | None = None, member: Any = None):
        """``worker_raw`` are the worker settings as given (client settings included);
        ``managed_connectors`` are configs the leader keeps written (MM2 mode writes its flows' connectors).

        ``stores`` (config, offset, status) and ``member`` replace the Kafka-backed ones, for tests
        that drive the herder without a broker: the config store must offer ``offset``,
        ``inconsistent()``, ``read_to_end()`` and a settable ``listener``; the member
        ``start``/``stop``/``request_rejoin``, ``member_id``, ``generation`` and ``group_id``.
        """
        self.plugins = plugins
        self.worker_config = worker_config
        self.kafka_cluster_id = kafka_cluster_id
        self.url = ""
        raw = {k: str(v) for k, v in worker_raw.items()}
        for key in ("config.storage.replication.factor", "offset.storage.replication.factor",
                    "offset.storage.partitions", "status.storage.replication.factor", "status.storage.partitions"):
            raw[key] = str(worker_config[key])
        self.exactly_once_support = worker_config[EXACTLY_ONCE_SOURCE_SUPPORT]
        if stores is None:  # offsets written in transactions are read only once committed
            stores = (KafkaConfigStore.from_config(raw),
                      KafkaOffsetStore.from_config(raw, read_committed=self.exactly_once_support != DISABLED),
                      KafkaStatusStore.from_config(raw))
        self.config_store, self.offset_store, self.status_store = stores
        self.config_store.listener = self._on_config_change
        self._init_worker("pending")
        self.member = member if member is not None else WorkerGroupMember(
            worker_config["group.id"], worker_config["config.storage.topic"], raw, self,
            session_timeout_ms=worker_config["session.timeout.ms"],
            heartbeat_interval_ms=worker_config["heartbeat.interval.ms"],
            rebalance_timeout_ms=worker_config["rebalance.timeout.ms"])
        self.managed_connectors = list(managed_connectors or [])
        self._events: asyncio.Queue = asyncio.Queue()
        self._background = BackgroundTasks("distributed-herder")
        self._assignment: Assignment | None = None
        self._owned_connectors: set[str] = set()
        self._owned_tasks: set[ConnectorTaskId] = set()
        self._known_connectors: set[str] = set()
        self._task_counts: dict[str, int] = {}
        #: connectors whose reconfiguration arrived during a rebalance: carried out after it
        self._deferred_reconfigurations: set[str] = set()
        self._rebalancing = True
        self._stopping = False
        #: whether start() got as far as the loop that carries out every change here
        self._events_running = False
        #: the change that loop is carrying out, and its name (None between changes)
        self._change_under_way: tuple[asyncio.Future, str] | None = None
        #: the leader's zombie fencing and the tasks' checks (exactly.once.source.support preparing or enabled)
        self._fencing = None if self.exactly_once_support == DISABLED else ZombieFencing(
            self.config_store, worker_config["group.id"], raw, submit=self._submit,
            is_leader=lambda: self.is_leader and not self._stopping, is_source=self._is_source,
            owns=lambda task_id: task_id in self._owned_tasks)
        if self.exactly_once_support == ENABLED:
            self.worker.exactly_once = self._exactly_once_settings
        #: offsets.storage.topic -> the store of the connectors that name it
        self._connector_stores: dict[str, ConnectorOffsetStore] = {}
        #: a stop's status writes timed out (the status topic's cluster unreachable)
        self._statuses_unrecorded = False
        self.worker.offset_store_for = self._connector_offset_store

    @property
    def worker_id(self) -> str:
        """This worker's id: its advertised REST ``host:port``."""
        return self.worker.worker_id

    def set_url(self, url: str, worker_id: str) -> None:
        """Where other workers reach this one (called once the REST server listens, before start)."""
        self.url = url
        self.worker.worker_id = worker_id
        if self._fencing is not None:
            self._fencing.worker_id = worker_id

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Read the three topics (creating them if needed), then join the group."""
        # side by side: each is a topic to create, leaders to wait for and a log to read (about a second each)
        results = await asyncio.gather(*(store.start() for store in (self.offset_store, self.status_store,
                                                                      self.config_store)), return_exceptions=True)
        failure = next((result for result in results if isinstance(result, BaseException)), None)
        if failure is not None:
            raise failure
        self.job_manager.on_jobs_changed = self._jobs_changed
        self.job_manager.attach()
        self._known_connectors = set(self.config_store.connectors())
        self._task_counts = {c: len(self.config_store.task_configs(c)) for c in self._known_connectors}
        self._background.spawn(self._run_events(), "events")
        self._events_running = True
        self._background.spawn(self._rotate_session_keys(), "session-keys")
        await self.member.start()
        log.info("Worker %s joined group %s", self.worker_id, self.member.group_id)

    async def stop(self) -> None:
        """Stop what runs here (tasks store their offsets), leave the group, close the stores."""
        self._stopping = True
        self._rebalancing = True
        if self._events_running:  # else its start was interrupted before anything could run here
            await self._end_change_under_way()
            try:
                async with asyncio.timeout(self.worker_config["rebalance.timeout.ms"] / 1000):
                    await self._submit(self._stop_everything)
            except Exception as exc:  # noqa: BLE001 - keep shutting down
                log.error("Stopping the work of worker %s failed: %r", self.worker_id, exc)
        await self.member.stop()
        await self.job_manager.close()
        await self.supervisor.close()
        if self._fencing is not None:
            await self._fencing.close()
        await self._background.close()
        metrics.forget_worker(self.worker_id)
        await self._stop_stores()

    async def _stop_stores(self) -> None:
        """Close the stores side by side: with their cluster unreachable each waits out its
        unacknowledged writes (``kafka_log.STOP_WRITES_WAIT_S``), and one after another those waits
        added up. One that fails is logged and does not keep the others open."""
        stores = [connector_store.primary for connector_store in self._connector_stores.values()]
        stores += [self.config_store, self.status_store, self.offset_store]
        # The stop already waited for its status writes in vain: the internal topics' cluster is
        # unreachable, and the writes still unacknowledged (offsets, statuses) have had that long.
        writes_wait_s = 0 if self._statuses_unrecorded else None
        results = await asyncio.gather(*(store.stop(writes_wait_s) for store in stores), return_exceptions=True)
        for store, result in zip(stores, results):
            if isinstance(result, BaseException):
                log.warning("Worker %s: closing its %s failed: %r", self.worker_id, type(store).__name__, result)

    # -- the one coroutine that changes what runs here -------------------------------------
    def _submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._events.put_nowait((fn, args, future))
        return future

    async def _run_events(self) -> None:
        while True:
            fn, args, future = await self._events.get()
            name = getattr(fn, "__name__", str(fn))
            # a CancelledError from inside the change (it awaited something cancelled) is its
            # failure: ending here would leave every later change, and the group's rejoin
            # waiting on one, unanswered for good
            change = asyncio.ensure_future(without_stray_cancellation(fn(*args), name))
            self._change_under_way = (change, name)
            try:
                await asyncio.wait({change})
            except asyncio.CancelledError:  # the herder is closing
                change.cancel()
                if not future.done():
                    future.cancel()
                raise
            finally:
                self._change_under_way = None
            if change.cancelled():  # stop() gave up on it (see _end_change_under_way)
                if not future.done():
                    future.cancel()
                continue
            failure = change.exception()
            if failure is not None:  # one failed change must not stop the herder
                log.error("Worker %s: %s%r failed", self.worker_id, name, args, exc_info=failure)
                if not future.done():
                    future.set_exception(failure)
            elif not future.done():
                future.set_result(change.result())

    async def _end_change_under_way(self) -> None:
        """On stop: let the change under way end, for at most ``task.shutdown.graceful.timeout.ms``,
        then cancel it. Changes run one at a time, and one waiting on a cluster that has become
        unreachable (a status write, a task's start) would hold the stop behind it until
        ``rebalance.timeout.ms``."""
        under_way = self._change_under_way
        if under_way is None or under_way[0].done():
            return
        change, name = under_way
        if not (await asyncio.wait({change}, timeout=self.worker.stop_timeout_s))[0]:
            log.warning("Worker %s: the change under way (%s) did not end within %gs of the stop; it is cancelled "
                        "so the worker can stop", self.worker_id, name, self.worker.stop_timeout_s)
            change.cancel()

    # -- serialising changes (AbstractHerder) ----------------------------------------------
    def _schedule_change(self, change: Callable[[], Awaitable[None]]) -> None:
        if not self._stopping:
            self._submit(change)

    async def _restart_failed_connector(self, name: str) -> None:
        if name in self._owned_connectors and name not in self.worker.connectors and not self._stopping:
            self._owned_connectors.discard(name)
            await self._start_connector_here(name)

    async def _restart_failed_task(self, task_id: ConnectorTaskId) -> None:
        if task_id in self._owned_tasks and self._should_restart_task(task_id) and not self._stopping:
            await self._start_task_here(task_id)

    # -- group membership (MembershipListener) ---------------------------------------------
    async def before_rejoin(self, membership_lost: bool) -> None:
        if self._stopping:
            return
        await self._submit(self._prepare_rejoin, membership_lost)

    def member_state(self) -> MemberState:
        owned_connectors = set(self.worker.connectors) | (set() if self._stopping else self._owned_connectors)
        owned_tasks = set(self.worker.tasks) | (set() if self._stopping else self._owned_tasks)
        return MemberState(self.url, self.config_store.offset, tuple(sorted(owned_connectors)),
                           tuple(sorted((t.connector, t.task) for t in owned_tasks)),
                           tuple(self.job_manager.running()))

    def assign(self, leader: str, members: Mapping[str, MemberState]) -> dict[str, Assignment]:
        connectors = self.config_store.connectors()
        counts = {c: len(self.config_store.task_configs(c)) for c in connectors}
        assignments = assign(members, leader, connectors, counts, self.config_store.offset,
                             self.job_manager.runnable())
        log.info("Leader %s assigned %d connector(s) and %d task(s) to %d worker(s): %s", self.worker_id,
                 len(connectors), sum(counts.values()), len(members),
                 {members[m].url: (list(a.connectors), [f"{c}-{t}" for c, t in a.tasks]) for m, a in assignments.items()})
        return assignments

    async def on_assignment(self, assignment: Assignment, generation: int) -> None:
        if not self._stopping:
            self._submit(self._apply_assignment, assignment, generation)

    async def _prepare_rejoin(self, membership_lost: bool) -> None:
        self._rebalancing = True
        if membership_lost:
            log.warning("Worker %s was dropped from group %s (session expired or fenced): stopping all its "
                        "connectors and tasks now, as others may already run them", self.worker_id,
                        self.member.group_id)
            await self._stop_everything()
        try:
            await self.config_store.read_to_end()
        except Exception as exc:  # noqa: BLE001 - join with what we have; the leader sorts out mismatches
            log.warning("Worker %s could not read the config topic to its end before rejoining: %r",
                        self.worker_id, exc)

    async def _apply_assignment(self, assignment: Assignment, generation: int) -> None:
        if self._stopping:
            return
        if assignment.error == CONFIG_MISMATCH:
            log.info("Worker %s: the leader had read less of the config topic than a member; catching up "
                     "and rejoining", self.worker_id)
            await self.config_store.read_to_end()
            self.member.request_rejoin()
            return
        if self.config_store.offset < assignment.config_offset:
            await self.config_store.read_to_end()
        self.worker.generation = generation
        mine_connectors = set(assignment.connectors)
        mine_tasks = {ConnectorTaskId(c, t) for c, t in assignment.tasks}
        await self._stop_tasks_here([t for t in sorted(set(self.worker.tasks) | self._owned_tasks)
                                     if t not in mine_tasks])
        for name in sorted(set(self.worker.connectors) | self._owned_connectors):
            if name not in mine_connectors:
                await self._stop_connector_here(name)
        await self.job_manager.run_here(assignment.jobs)  # stops the jobs revoked, starts the new ones
        self._assignment = assignment
        self._rebalancing = False
        log.info("Worker %s (generation %d%s) runs connectors %s and tasks %s", self.worker_id, generation,
                 ", leader" if self.is_leader else "", sorted(mine_connectors), sorted(map(str, mine_tasks)))
        metrics.record_assignment(self.worker_id, assignment, generation, self.is_leader)
        if assignment.revoked:
            self.member.request_rejoin()
        for name in sorted(mine_connectors - self._owned_connectors):
            await self._start_connector_here(name)
        await self._start_side_by_side(self._start_task_here(t) for t in sorted(mine_tasks - self._owned_tasks))
        deferred, self._deferred_reconfigurations = self._deferred_reconfigurations, set()
        for name in sorted(deferred & set(self.worker.connectors)):
            log.info("Connector %s: carrying out the reconfiguration requested during the rebalance", name)
            await self._publish_task_configs(name)
        if self.is_leader and self.managed_connectors:
            await self._write_managed_connectors()
        if self.is_leader:
            await self._ensure_session_key()
            if self._fencing is not None:  # a new leader takes over rounds the previous one left undone
                for name in self.config_store.connectors():
                    self._fencing.maybe_fence(name)

    @property
    def is_leader(self) -> bool:
        """Whether this worker led the group's latest rebalance."""
        return self._assignment is not None and self._assignment.leader == self.member.member_id

    # -- running and stopping things here ---------------------------------------------------
    async def _start_connector_here(self, name: str) -> None:
        config = self.config_store.connectors().get(name)
        if config is None:
            return
        self._owned_connectors.add(name)
        if await self._start_connector_in_target_state(name):
            await self._publish_task_configs(name)

    async def _stop_connector_here(self, name: str, *, record: bool = True) -> None:
        running = name in self.worker.connectors
        await self.worker.stop_connector(name)
        self._owned_connectors.discard(name)
        self.supervisor.forget(name)
        if record and running:
            await self._record_states([self.worker.set_connector_state(name, State.UNASSIGNED)],
                                      f"connector {name} stopped")

    async def _start_task_here(self, task_id: ConnectorTaskId) -> None:
        configs = self.config_store.task_configs(task_id.connector)
        connector_config = self.config_store.connectors().get(task_id.connector)
        if task_id.task >= len(configs) or connector_config is None:
            return
        self._owned_tasks.add(task_id)
        await self._start_task(task_id, configs[task_id.task], connector_config)
        metrics.task_assigned(self.worker_id, task_id, True)

    async def _stop_task_here(self, task_id: ConnectorTaskId, *, record: bool = True) -> None:
        await self._stop_tasks_here([task_id], record=record)

    async def _stop_tasks_here(self, task_ids: list[ConnectorTaskId], *, record: bool = True) -> None:
        """Stop tasks in parallel (Connect does too: one by one, stuck tasks would outlast the rebalance)."""
        if not task_ids:
            return
        running = [t for t in task_ids if t in self.worker.tasks]
        await self.worker.stop_tasks(task_ids)
        for task_id in task_ids:
            self._owned_tasks.discard(task_id)
            self.supervisor.forget(task_id)
            metrics.task_assigned(self.worker_id, task_id, False)
        if record and running:
            await self._record_states([self.worker.set_task_state(task_id, State.UNASSIGNED) for task_id in running],
                                      f"{len(running)} task(s) stopped")

    async def _record_states(self, writes: list[Coroutine[Any, Any, None]], what: str) -> None:
        """Write statuses. While the worker shuts down they are written side by side and waited for
        at most ``task.shutdown.graceful.timeout.ms``: with the status topic's cluster unreachable each
        write would wait out the producer's ``delivery.timeout.ms``, and the shutdown with it."""
        if not self._stopping:
            for write in writes:
                await write
            return
        try:
            await bounded(asyncio.gather(*writes), self.worker.stop_timeout_s, f"Worker {self.worker_id}: recording "
                          f"that {what}")
        except Exception as exc:  # noqa: BLE001 - keep shutting down
            self._statuses_unrecorded = True
            log.warning("Worker %s could not record in the status topic that %s (%r); the statuses stay as they "
                        "were until another worker takes the work over", self.worker_id, what, exc)

    async def _stop_everything(self) -> None:
        await self.job_manager.run_here(())  # jobs first: another worker resumes them
        tasks = sorted(set(self.worker.tasks) | self._owned_tasks)
        connectors = sorted(set(self.worker.connectors) | self._owned_connectors)
        stopped_tasks = [task_id for task_id in tasks if task_id in self.worker.tasks]
        stopped_connectors = [name for name in connectors if name in self.worker.connectors]
        await self._stop_tasks_here(tasks, record=False)
        await asyncio.gather(*(self._stop_connector_here(name, record=False) for name in connectors))
        # one round of status writes for all, so an unreachable status topic costs one wait, not one per connector
        await self._record_states([self.worker.set_task_state(task_id, State.UNASSIGNED) for task_id in stopped_tasks]
                                  + [self.worker.set_connector_state(name, State.UNASSIGNED)
                                     for name in stopped_connectors],
                                  f"{len(stopped_tasks)} task(s) and {len(stopped_connectors)} connector(s) stopped")
        self._assignment = None

    async def _publish_task_configs(self, name: str) -> None:
        """Ask the connector running here for task configs; commit them if they changed."""
        if name not in self.worker.connectors or self.config_store.target_state(name) == TargetState.STOPPED:
            return
        if self._rebalancing or self.member.generation < 0:
            # Carried out by _apply_assignment if the connector is still ours; a new owner regenerates anyway.
            log.info("Connector %s: task configs will be regenerated once the rebalance under way completes", name)
            self._deferred_reconfigurations.add(name)
            return
        configs = await self._generate_task_configs(name)
        if configs is None:
            return
        if configs == self.config_store.task_configs(name) and name not in self.config_store.inconsistent():
            return
        if name not in self._owned_connectors:
            return
        try:
            await self.config_store.put_task_configs(name, configs)
        except TaskConfigsTooLargeError as exc:  # FAILED with the settings to raise, not a log line only
            await self.worker.fail_connector(name, exc, "could not store its task configs")
            return
        log.info("Connector %s: committed %d task config(s)", name, len(configs))

    # -- reacting to the config topic ------------------------------------------------------
    def _on_config_change(self, kind: str, name: str) -> None:
        if self._fencing is not None:
            self._fencing.config_changed()  # tasks waiting for a task-count record look again
        if not self._stopping:
            self._submit(self._config_changed, kind, name)

    async def _config_changed(self, kind: str, name: str) -> None:
        exists = name in self.config_store.connectors()
        if kind == "connector" and not exists:
            await self._connector_deleted(name)
        elif kind == "connector":
            if name not in self._known_connectors:
                self._known_connectors.add(name)
                self.member.request_rejoin()
            elif name in self._owned_connectors and name in self.worker.connectors:
                log.info("Connector %s: config updated; restarting it", name)
                await self.worker.stop_connector(name)
                self._owned_connectors.discard(name)
                await self._start_connector_here(name)
        elif kind == "tasks":
            await self._task_configs_changed(name)
            if self._fencing is not None:
                self._fencing.maybe_fence(name)
        elif kind == "target_state" and exists:
            await self._apply_target_state(name)
        elif kind == "restart" and exists:
            await self._carry_out_restart_request(name)

    async def _connector_deleted(self, name: str) -> None:
        ran_here = name in self._owned_connectors or any(t.connector == name for t in self._owned_tasks)
        for task_id in [t for t in sorted(set(self.worker.tasks) | self._owned_tasks) if t.connector == name]:
            await self._stop_task_here(task_id, record=False)
        await self._stop_connector_here(name, record=False)
        self.worker.warnings.pop(name, None)
        self._active_topics.pop(name, None)
        self._task_counts.pop(name, None)
        if ran_here or self.is_leader:
            await self.status_store.remove(name)
        if name in self._known_connectors:
            self._known_connectors.discard(name)
            self.member.request_rejoin()

    async def _task_configs_changed(self, name: str) -> None:
        """Restart the connector's tasks here whose config changed: all of them stop before any
        starts again, so old and new task configs never run side by side (they may overlap)."""
        configs = self.config_store.task_configs(name)
        removed, changed = [], []
        # exactly-once: a new generation restarts every task of the connector (as Connect does), since the
        # previous generation's producers are fenced before the new one starts
        new_generation = self.worker.exactly_once is not None and self._is_source(name)
        for task_id in [t for t in sorted(self._owned_tasks) if t.connector == name]:
            running = self.worker.tasks.get(task_id)
            if task_id.task >= len(configs):
                removed.append(task_id)
            elif running is None or new_generation or dict(running.config) != configs[task_id.task]:
                log.info("Task %s: its config changed; restarting it", task_id)
                changed.append(task_id)
        await self._stop_tasks_here(removed + changed)
        await self._start_side_by_side(self._start_task_here(t) for t in changed)
        if self._task_counts.get(name) != len(configs):
            self._task_counts[name] = len(configs)
            self.member.request_rejoin()

    async def _apply_target_state(self, name: str) -> None:
        state = self.config_store.target_state(name)
        tasks = [t for t in self.worker.connector_tasks(name)]
        if state == TargetState.STOPPED:
            await self._stop_tasks_here(tasks)
            if name in self._owned_connectors:
                await self.worker.stop_connector(name)
                await self.worker.set_connector_state(name, State.STOPPED)
            return
        if state == TargetState.PAUSED:
            if name in self.worker.connectors:
                await self.worker.set_connector_state(name, State.PAUSED)
            for task_id in tasks:
                await self.worker.tasks[task_id].pause()
            return
        if name in self._owned_connectors and name not in self.worker.connectors:
            self._owned_connectors.discard(name)  # it was stopped: start it again
            await self._start_connector_here(name)
        elif name in self.worker.connectors:
            await self.worker.set_connector_state(name, State.RUNNING)
        for task_id in tasks:
            await self.worker.tasks[task_id].resume()
        # Tasks still assigned here but not running (stopped by a STOPPED state whose empty task
        # configs were never written, e.g. the leader died between its two writes) start again.
        if self._assignment is not None:
            assigned = [ConnectorTaskId(c, task) for c, task in self._assignment.tasks if c == name]
            await self._start_side_by_side(self._start_task_here(t) for t in assigned
                                           if t not in self.worker.tasks and self._should_restart_task(t))

    # -- callbacks from connectors and tasks running here ----------------------------------
    async def _regenerate_task_configs(self, name: str) -> None:
        await self._publish_task_configs(name)

    # -- the leader's writes ---------------------------------------------------------------
    async def _settled(self) -> None:
        """Wait (briefly) for a rebalance under way to finish; 409 if it does not.

        Connect answers 409 at once; waiting up to REBALANCE_WAIT_S first spares clients a retry
        after the short rebalances that config changes cause.
        """
        deadline = asyncio.get_running_loop().time() + REBALANCE_WAIT_S
        while self._rebalancing or self._assignment is None:
            if self._stopping or asyncio.get_running_loop().time() >= deadline:
                raise RebalanceInProgressError(_REBALANCING)
            await asyncio.sleep(0.1)

    async def _require_leader(self, what: str) -> None:
        """Return when this worker is the leader; NotLeaderError naming the leader otherwise (409 while rebalancing)."""
        await self._settled()
        if not self.is_leader:
            raise NotLeaderError(f"Only the leader can {what}; this worker is not the leader (a rebalance may be "
                                 f"under way); retry shortly.", self._assignment.leader_url)

    # -- session keys (signing forwarded REST requests) --------------------------------------
    def session_keys(self) -> list[bytes]:
        """The keys a request forwarded to this worker may be signed with (none before the leader wrote one)."""
        keys = getattr(self.config_store, "session_keys", None)
        return keys() if keys is not None else []

    def request_signing_key(self) -> bytes | None:
        """The key requests forwarded from this worker are signed with (None before the leader wrote one)."""
        current = getattr(self.config_store, "session_key", None)
        return current.key if current is not None else None

    async def _ensure_session_key(self) -> None:
        """As leader, write a session key when there is none or the current one is older than its ttl."""
        put = getattr(self.config_store, "put_session_key", None)
        if put is None or self._stopping or not self.is_leader:
            return
        current = self.config_store.session_key
        ttl_ms = self.worker_config["inter.worker.key.ttl.ms"]
        if current is not None and time.time() * 1000 - current.created_ms < ttl_ms:
            return
        try:
            await put(SessionKey.generate())
            log.info("Leader %s wrote a new session key to the config topic (%s)", self.worker_id,
                     "first one" if current is None else "the previous one expired")
        except Exception as exc:  # noqa: BLE001 - forwarded requests go unsigned meanwhile; retried later
            log.error("Leader %s could not write a session key: %r", self.worker_id, exc)

    async def _rotate_session_keys(self) -> None:
        interval = min(60.0, self.worker_config["inter.worker.key.ttl.ms"] / 10000)
        while not self._stopping:
            await asyncio.sleep(interval)
            if self.is_leader and not self._rebalancing and not self._stopping:
                await self._submit(self._ensure_session_key)

    async def _write_managed_connectors(self) -> None:
        for config in self.managed_connectors:
            name = config["name"]
            if self.config_store.connectors().get(name) != config:
                log.info("Leader %s writes the config of connector %s", self.worker_id, name)
                if name not in self.config_store.connectors():
                    await self.config_store.put_target_state(name, TargetState.STARTED)
                await self.config_store.put_connector(name, config)

    # -- exactly-once source support -------------------------------------------------------
    def _is_source(self, name: str) -> bool:
        config = self.config_store.connectors().get(name)
        if config is None:
            return False
        try:
            return getattr(self.plugins.connector_class(str(config.get("connector.class", ""))), "type", None) == "source"
        except Exception:  # noqa: BLE001 - an unknown class runs no task to fence
            return False

    def _exactly_once_settings(self, task_id: ConnectorTaskId, connector: Config,
                               store: Any = None) -> ExactlyOnceSettings:
        """How this worker runs a source task exactly-once: Connect's transactional id, the connector's
        transaction boundary, and the fencing checks of the generation of task configs it starts with."""
        fencing = self._fencing
        assert fencing is not None
        generation = self.config_store.task_generation(task_id.connector)
        interval_ms = connector.get(TRANSACTION_BOUNDARY_INTERVAL_MS)
        timeout = self.worker_config["start.timeout.ms"] / 1000
        return ExactlyOnceSettings(
            transactional_id=transactional_id(self.worker_config["group.id"], task_id.connector, task_id.task),
            boundary=str(connector.get(TRANSACTION_BOUNDARY, POLL)).strip().lower(),
            interval_s=(self.worker_config["offset.flush.interval.ms"] if interval_ms is None else interval_ms) / 1000,
            offsets_topic=getattr(store, "topic", None) or self.offset_store.topic,
            preflight=lambda: fencing.preflight(task_id, generation, timeout),
            verify=lambda: fencing.verify(task_id, generation), fencing_timeout_s=timeout + 5)

    async def _connector_offset_store(self, name: str, connector: Config | None = None) -> Any:
        """The offset store of source connector ``name``: its own ``offsets.storage.topic`` (created if
        missing, on the cluster its producer writes to), read before the worker's; else the worker's."""
        raw = self.config_store.connectors().get(name) or {}
        topic = str(raw.get(OFFSETS_STORAGE_TOPIC) or "").strip()
        if not topic or topic == self.offset_store.topic or not self._is_source(name):
            return self.offset_store
        store = self._connector_stores.get(topic)
        if store is None:
            props = {k: str(v) for k, v in self.worker_config.originals.items()}
            bootstrap = raw.get("producer.override.bootstrap.servers")
            if bootstrap:
                props["bootstrap.servers"] = str(bootstrap)
            primary = KafkaOffsetStore(topic, props, partitions=self.worker_config["offset.storage.partitions"],
                                       replication_factor=self.worker_config["offset.storage.replication.factor"],
                                       read_committed=self.exactly_once_support != DISABLED)
            await primary.start()
            log.info("Connector %s keeps its source offsets in its own topic %s (offsets.storage.topic)", name, topic)
            store = self._connector_stores[topic] = ConnectorOffsetStore(primary, self.offset_store)
        return store

    async def _offset_store_of(self, name: str) -> Any:
        return await self._connector_offset_store(name)

    async def fence_zombies(self, name: str) -> None:
        """``PUT /connectors/{name}/fence``: fence the previous generation of the connector's tasks if its
        latest task configs wait for it, on the leader (others forward); returns once it is done."""
        self._require(name)
        if not self._is_source(name):
            raise BadRequestError(f"Connector {name} is not a source connector")
        await self._require_leader("fence zombie tasks")
        fencing = self._fencing or ZombieFencing(
            self.config_store, self.worker_config["group.id"], self._fencing_props(), submit=self._submit,
            is_leader=lambda: self.is_leader and not self._stopping, is_source=self._is_source,
            owns=lambda task_id: task_id in self._owned_tasks, worker_id=self.worker_id)
        try:
            await fencing.fence_now(name)
        finally:
            if fencing is not self._fencing:
                await fencing.close()

    def _fencing_props(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.worker_config.originals.items()}

    # -- worker ---------------------------------------------------------------------------
    async def health(self) -> tuple[str, str]:
        if self._assignment is None:
            return "starting", "Worker has not yet joined its group and received an assignment."
        return "healthy", "Worker has completed startup and is ready to handle requests."

    # -- connectors -----------------------------------------------------------------------
    async def put_connector_config(self, name, config, *, allow_replace, initial_state=None):
        config, target = self._checked_config(name, config, initial_state)
        await self._require_leader("set connector configs")
        exists = name in self.config_store.connectors()
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        if not exists:  # the target state first, so no worker starts the connector in the wrong state
            await self.config_store.put_target_state(name, target)
        await self.config_store.put_connector(name, config)
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        self._require(name)
        await self._require_leader("delete connectors")
        await self.config_store.remove_connector(name)

    async def stop_connector(self, name: str) -> None:
        self._require(name)
        await self._require_leader("stop connectors")
        await self.config_store.put_target_state(name, TargetState.STOPPED)
        await self.config_store.put_task_configs(name, [])

    async def pause_connector(self, name: str) -> None:
        self._require(name)
        await self.config_store.put_target_state(name, TargetState.PAUSED)

    async def resume_connector(self, name: str) -> None:
        self._require(name)
        await self.config_store.put_target_state(name, TargetState.STARTED)

    # -- bulk jobs ----------------------------------------------------------------------------
    def _jobs_changed(self) -> None:
        """A job was added, removed or finished: the leader shares the jobs to run anew."""
        if not self._stopping:
            self.member.request_rejoin()

    async def create_job(self, name, config, *, origin="rest"):
        # the leader is the one writer of jobs submitted over REST, so its check of held partitions holds;
        # a connector's own jobs are written by its worker (ordered by the config topic; the older one wins)
        if origin == "rest":
            await self._require_leader("create jobs")
        return await super().create_job(name, config, origin=origin)

    # -- restarts: carried out where the instance runs --------------------------------------
    def _require_here(self, worker_id: str | None, what: str) -> None:
        """Return if ``worker_id`` (the instance's owner) is this worker; NotAssignedError naming it otherwise."""
        if worker_id and worker_id != self.worker_id:
            scheme = urlparse(self.url).scheme or "http"
            raise NotAssignedError(f"{what} runs on worker {worker_id}, not on this one", f"{scheme}://{worker_id}")

    async def restart_connector(self, name, *, include_tasks=False, only_failed=False):
        self._require(name)
        await self._settled()
        if not include_tasks and not only_failed:
            connector_status = self.status_store.connector(name)
            await self._restart_connector_instance(name, connector_status.worker_id if connector_status else None)
            return None
        # Connect's way: the leader writes the request to the config topic; every worker restarts its share
        await self._require_leader("process restart requests")
        plan, _, _ = await self._restart_plan(name, include_tasks, only_failed)
        await self.config_store.put_restart_request(name, include_tasks=include_tasks, only_failed=only_failed)
        return plan

    async def _carry_out_restart_request(self, name: str) -> None:
        """Restart the instances of ``name`` running here that the latest restart request covers."""
        include_tasks, only_failed = self.config_store.restart_request(name)
        _, restart_connector, tasks = await self._restart_plan(name, include_tasks, only_failed)
        if restart_connector and name in self._owned_connectors:
            log.info("Connector %s: restarting it here, as requested", name)
            await self._restart_connector_here(name)
        for task in sorted(tasks):
            task_id = ConnectorTaskId(name, task)
            if task_id in self._owned_tasks:
                log.info("Task %s: restarting it here, as requested", task_id)
                await self._restart_task_here(task_id)

    async def _restart_connector_instance(self, name: str, owner: str | None) -> None:
        self._require_here(owner, f"Connector {name}")
        if name not in self._owned_connectors:
            raise RebalanceInProgressError(f"Connector {name} is not assigned to any worker yet; retry shortly.")
        await self._submit(self._restart_connector_here, name)

    async def _restart_connector_here(self, name: str) -> None:
        self.supervisor.forget(name)
        await self.worker.stop_connector(name)
        self._owned_connectors.discard(name)
        await self._start_connector_here(name)

    async def restart_task(self, name: str, task: int) -> None:
        self._require(name)
        if task not in range(len(self.config_store.task_configs(name))):
            raise NotFoundError(f"Task {name}-{task} not found")
        status = self._task_statuses(name).get(task)
        if status is None:
            raise RebalanceInProgressError(f"Task {name}-{task} is not assigned to any worker yet; retry shortly.")
        await self._restart_task_on(name, task, status.worker_id)

    async def _restart_task_on(self, name: str, task: int, owner: str) -> None:
        self._require_here(owner, f"Task {name}-{task}")
        task_id = ConnectorTaskId(name, task)
        if task_id not in self._owned_tasks:
            raise RebalanceInProgressError(f"Task {task_id} is moving between workers; retry shortly.")
        await self._submit(self._restart_task_here, task_id)

    async def _restart_task_here(self, task_id: ConnectorTaskId) -> None:
        await self._stop_task_here(task_id, record=False)
        await self._start_task_here(task_id)
