"""Zombie fencing for exactly-once source connectors (Kafka Connect's KIP-618), in a distributed cluster.

A *zombie* is a task instance that still runs although the cluster gave its work to another: a
worker frozen by a long GC pause or SIGSTOP, or cut off from the group, that wakes up later. Its
records must never reach a read_committed reader. Each task writes through a transactional
producer whose id is ``<group.id>-<connector>-<task>``, so a new instance of the *same* task
fences the old one when it initialises its producer (the id's epoch is bumped and the old
instance's open transaction aborted). A *new generation* of task configs may change which task
copies what, or how many tasks there are, so before any task of it starts, every producer of the
previous generation is fenced:

- every commit of task configs in the config topic makes the connector *pending fencing*; a
  ``tasks-fencing-<connector>`` record (``{"task-count": N}``) written after it clears that
  (:class:`~mirrorline.storage.kafka_configs.KafkaConfigStore`);
- the **leader** of the group (one worker at a time), whenever it sees a source connector pending
  fencing, fences the transactional ids of the previous generation — tasks ``0..N-1`` of the
  latest task-count record, with InitProducerId as Kafka's ``Admin.fenceProducers`` does
  (:func:`~mirrorline.clients.kafka_admin.fence_producers`) — and then writes a task-count record
  with the new generation's task count, unless the task configs changed meanwhile (then it
  starts over). As Connect, there is nothing to fence when there was no task-count record yet
  (no transactional producer ever ran), nor when both generations have one task (the new task's
  own initialisation fences the old one);
- a task of a connector pending fencing waits (in its own background, see
  :mod:`~mirrorline.runtime.exactly_once_task`) until the record is there, initialises its
  producer, and then checks that it is still assigned here and that its task configs are still
  the generation it was started with.

Connect routes the fencing through the leader too, but asks for it over REST when a task starts
(``PUT /connectors/{name}/fence``, which MM2's dedicated mode can only serve with
``dedicated.mode.enable.internal.rest=true``). Here the leader acts as soon as the config topic
shows the need, so workers need no REST between them: ``mirrorline mm2`` runs exactly-once
without an internal REST server. ``PUT /connectors/{name}/fence`` is served as well (on the
leader; others forward it) and waits for the round. The leader fences when its own
``exactly.once.source.support`` is ``preparing`` or ``enabled``; that is why the setting is
rolled out in two steps, as in Connect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mirrorline.api.errors import ConnectError, RebalanceInProgressError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.runtime.background import BackgroundTasks
from mirrorline.runtime.exactly_once import transactional_id

log = logging.getLogger(__name__)

#: Transaction timeout the coordinator records for a fenced id; bounds one fencing request too.
FENCING_TIMEOUT_MS = 60_000
#: Longest pause between two attempts of a fencing round that failed.
RETRY_MAX_S = 30.0


class ZombieFencing:
    """The leader's rounds of zombie fencing, and the checks a starting exactly-once task makes.

    ``submit(fn, *args)`` runs ``fn`` on the herder's change coroutine (so the task-count record is
    written in order with every other change); ``is_leader()`` and ``is_source(name)`` answer for
    the herder; ``owns(task_id)`` whether the task is still assigned to this worker.
    """

    def __init__(self, config_store: Any, group_id: str, client_props: Mapping[str, Any], *,
                 submit: Callable[..., Awaitable[Any]], is_leader: Callable[[], bool],
                 is_source: Callable[[str], bool], owns: Callable[[ConnectorTaskId], bool], worker_id: str = ""):
        self.store = config_store
        self.group_id = group_id
        self.client_props = dict(client_props)
        self._submit = submit
        self._is_leader = is_leader
        self._is_source = is_source
        self._owns = owns
        self.worker_id = worker_id
        self._rounds: dict[str, asyncio.Task] = {}
        #: connector -> why its last round failed (shown to tasks that time out waiting, on the leader)
        self.errors: dict[str, str] = {}
        self._changed = asyncio.Event()
        self._background = BackgroundTasks("zombie-fencing")

    async def close(self) -> None:
        """Stop every round under way."""
        await self._background.close()
        self._rounds.clear()

    # -- what the herder tells us --------------------------------------------------------
    def config_changed(self) -> None:
        """Something was read from the config topic: waiting tasks look again."""
        self._changed.set()
        self._changed = asyncio.Event()

    def pending(self, connector: str) -> bool:
        """Whether the connector's latest task configs wait for a round of fencing."""
        pending = getattr(self.store, "pending_fencing", None)
        return bool(pending and pending(connector))

    def maybe_fence(self, connector: str) -> asyncio.Task | None:
        """As the leader, start a round for ``connector`` if it needs one and none runs; the round's task."""
        if connector in self._rounds:
            return self._rounds[connector]
        if not self._is_leader() or not self.pending(connector) or connector not in self.store.connectors() \
                or not self._is_source(connector):
            return None
        task = self._background.spawn(self._round(connector), f"fence-{connector}")
        self._rounds[connector] = task
        task.add_done_callback(lambda _: self._rounds.pop(connector, None))
        return task

    async def fence_now(self, connector: str, timeout: float = FENCING_TIMEOUT_MS / 1000) -> None:
        """``PUT /connectors/{name}/fence`` on the leader: a round if one is needed, and wait for it."""
        task = self.maybe_fence(connector)
        if task is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(task)
        except asyncio.TimeoutError:
            raise ConnectError(f"Zombie fencing of connector {connector} did not complete within {timeout:g}s"
                               + (f": {self.errors[connector]}" if connector in self.errors else "")) from None
        if self.pending(connector):
            raise RebalanceInProgressError(f"Zombie fencing of connector {connector} did not complete: "
                                           f"{self.errors.get(connector, 'a new set of task configs was generated')}")

    # -- the leader's round --------------------------------------------------------------
    async def _round(self, connector: str) -> None:
        backoff = 1.0
        while self._is_leader() and self.pending(connector) and connector in self.store.connectors():
            try:
                if await self._fence_once(connector):
                    self.errors.pop(connector, None)
                    return
                continue  # task configs changed during the round: fence for the newest generation
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried; waiting tasks report it if they time out
                self.errors[connector] = f"{type(exc).__name__}: {exc}"
                log.error("Leader %s: zombie fencing of connector %s failed (%s); retrying in %.0fs. Its tasks "
                          "with exactly-once support wait meanwhile", self.worker_id, connector, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_MAX_S)

    async def _fence_once(self, connector: str) -> bool:
        """One round; True once the task-count record is written, False if task configs changed meanwhile."""
        generation = self.store.task_generation(connector)
        count = len(self.store.task_configs(connector))
        previous = self.store.task_count_record(connector)
        if previous is None:
            log.info("Connector %s runs with exactly-once support for the first time: no task producer to fence; "
                     "writing its task count record (%d tasks)", connector, count)
        elif previous == 1 and count == 1:
            log.info("Connector %s: its single new task fences its single previous one when it starts; writing its "
                     "task count record", connector)
        elif previous > 0:
            ids = [transactional_id(self.group_id, connector, task) for task in range(previous)]
            log.info("Leader %s: fencing the %d transactional producer(s) of connector %s's previous task "
                     "generation: %s", self.worker_id, previous, connector, ", ".join(ids))
            await self._fence(ids)
        return bool(await self._submit(self._write_record, connector, generation, count))

    async def _fence(self, ids: list[str]) -> None:
        props = dict(self.client_props)
        props["client.id"] = f"{props.get('client.id') or 'mirrorline'}-zombie-fencing"
        admin = KafkaAdmin.from_settings(props)
        await admin.start()
        try:
            await admin.fence_producers(ids, timeout_ms=FENCING_TIMEOUT_MS)
        finally:
            await admin.close()

    async def _write_record(self, connector: str, generation: int, count: int) -> bool:
        """On the herder's change coroutine: the task-count record, if nothing changed since the fencing."""
        await self.store.read_to_end()
        if not self._is_leader() or connector not in self.store.connectors():
            return True  # another leader takes over, or the connector is gone: nothing left to do here
        if self.store.task_generation(connector) != generation:
            log.info("Connector %s generated new task configs during its zombie fencing; fencing again", connector)
            return False
        if not self.pending(connector):
            return True
        await self.store.put_task_count_record(connector, count)
        log.info("Leader %s wrote the task count record of connector %s (%d tasks): its tasks may start",
                 self.worker_id, connector, count)
        return True

    # -- a starting task's checks --------------------------------------------------------
    async def preflight(self, task_id: ConnectorTaskId, generation: int, timeout: float) -> None:
        """Wait until the connector's previous task generation is fenced (its task-count record is read)."""
        connector = task_id.connector
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        announced = False
        # new task configs meanwhile restart this task (the herder stops it); verify() checks it again
        while self.pending(connector):
            remaining = deadline - loop.time()
            if remaining <= 0:
                cause = self.errors.get(connector)
                raise ConnectError(
                    f"Task {task_id} waited {timeout:g}s for the zombie fencing of connector {connector}'s previous "
                    f"task generation (a tasks-fencing-{connector} record in the config topic after its latest task "
                    f"configs), which the group's leader writes. "
                    + (f"The fencing failed on this worker, the leader: {cause}" if cause else
                       "Check the leader's log, and that every worker of the group has exactly.once.source.support "
                       "set to preparing or enabled"))
            if not announced:
                log.info("Task %s waits for the zombie fencing of connector %s's previous task generation",
                         task_id, connector)
                announced = True
            changed = self._changed
            try:
                async with asyncio.timeout(min(remaining, 1.0)):
                    await changed.wait()
            except asyncio.TimeoutError:
                pass

    async def verify(self, task_id: ConnectorTaskId, generation: int) -> None:
        """After the task's producer initialised: still assigned here, and still the same task configs."""
        await self.store.read_to_end()
        if self.store.task_generation(task_id.connector) != generation:
            raise ConnectError(f"Cannot start source task {task_id} with exactly-once support as the connector has "
                               f"already generated a new set of task configs")
        if not self._owns(task_id):
            raise ConnectError(f"Cannot start source task {task_id} as it has already been revoked from this worker")
