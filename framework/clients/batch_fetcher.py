"""mirrorline's own fetch loop for consumers that forward whole batches.

A consumer made with ``fetch_batches`` and ``fetch_sessions`` (every MirrorSource task's consumer
on the batch-forwarding path, shared by its tasks or not) fetches with :class:`BatchFetcher`
instead of aiokafka's ``Fetcher``. It is the fetch half of what :mod:`.batch_sender` is for
produce: a trickle's CPU is spent per round trip, and aiokafka's fetch loop, with the hooks
mirrorline had put around it (:mod:`.fetch_planner`, :mod:`.batch_capture`, the session and
error wrappers around the client's ``send``), was a quarter of a 1-MB/s mirror's CPU
(docs/performance.md, *The produce half*).

What it keeps from aiokafka: the consumer itself, its client (connections, metadata, SASL/SSL),
its subscription state (each partition's position, pause, pending reset, high watermark and last
stable offset: what ``seek``, ``position``, ``pause`` and ``fetch_states`` read and write), and
the fetcher's position resets and offset lookups (``ListOffsets``), inherited unchanged.

What it does itself:

- **One loop per leader**, each with at most one Fetch in flight, in an incremental fetch
  session (:class:`~.fetch_sessions.FetchSessions`, which also decides the gather wait). The
  loops are started and stopped by a supervising routine that lays the assigned partitions out
  by leader, and again whenever the assignment or the cluster metadata changes.
- **Fetching ahead.** A partition whose records wait for the reader is still fetched, from the
  end of what waits, until ``max.partition.fetch.bytes`` of it wait (aiokafka left it out of
  every fetch until the reader took its records, so a partition that had just brought records
  sat out the next round trip, a whole gather wait). What waits for the reader is also bounded
  by ``fetch.max.bytes`` over all partitions: at the bound no fetch goes out until the reader
  takes some.
- **Batches, not records.** Each answer's partitions are cut into
  :class:`~mirrorline.api.kafka.FetchedBatch` items by :func:`~.fetched_batches.split_fetched` on
  arrival (CRCs checked, control and aborted batches dropped as a ``read_committed`` Java consumer
  does), and ``getmany`` hands them over as they are.
- **Plans kept between fetches.** Each loop keeps its request's partitions topic by topic and
  makes again only the topics whose fetch offset, pause or position changed (the partition
  states say when: :func:`~.fetch_planner.track_state_changes`), so an idle task at thousands
  of partitions does not walk them all per fetch.
- **Errors, as aiokafka's fetcher, with two differences.** A leader error or an unknown topic
  asks for new metadata, and the partition sits out until it arrives (aiokafka fetched it again
  at once, from the same broker, in a loop). Every other retriable error sits it out for
  ``retry.backoff.ms``. An out-of-range position is reset as ``auto.offset.reset`` says, or
  raised to the reader under ``none``; a topic the principal may not read, a record too large
  for ``max.partition.fetch.bytes`` and a corrupt batch are raised to the reader, which gets the
  other partitions' records first. The topics of errors that can mean a topic was re-created are
  noted for ``topic_change_signs`` (:mod:`.fetch_errors`), in order with the batches: held while
  batches of the topic fetched before them wait for the reader (:mod:`.sign_order`).
- **Nothing dies silently.** A loop that fails takes the routine with it, and the next
  ``getmany`` raises the failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka import errors as Errors
from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.fetcher import READ_COMMITTED, Fetcher, OffsetResetStrategy
from aiokafka.protocol.fetch import FetchRequest

from mirrorline.clients.fetch_errors import TOPIC_CHANGE_ERRORS, FetchErrorWatch
from mirrorline.clients.fetch_planner import track_state_changes
from mirrorline.clients.fetch_sessions import FetchSessions
from mirrorline.clients.fetched_batches import split_fetched
from mirrorline.clients.sign_order import SignOrder

log = logging.getLogger(__name__)

__all__ = ["BatchFetcher", "use_batch_fetcher"]

#: partition errors after which the partition waits for new metadata (its leader moved or is unknown)
_METADATA_ERRORS = frozenset({3, 5, 6, 74, 75, 100, 103})
_OUT_OF_RANGE = 1
_TOPIC_AUTHORIZATION_FAILED = 29


@dataclass(slots=True)
class _Ready:
    """One partition's batches fetched and not yet handed to the reader."""

    #: the reader's position these batches follow on from
    start: int
    #: the fetch offset after them (where the next fetch of the partition asks from)
    next_offset: int
    batches: list = field(default_factory=list)
    #: the fetched bytes they came from (for the fetch-ahead bound)
    size: int = 0


class _Node:
    """One leader's share of the assignment, its fetch plan and its loop."""

    __slots__ = ("node_id", "members", "plan", "stale", "wake", "task", "asked", "retired")

    def __init__(self, node_id: int):
        self.node_id = node_id
        #: topic -> [(aiokafka partition, partition number, state), ...]
        self.members: dict[str, list] = {}
        #: topic -> [(partition number, fetch offset, max bytes), ...]; a topic's list is replaced
        #: when it changes, never changed in place (the fetch session compares them)
        self.plan: dict[str, list] = {}
        #: topics whose plan entries must be made again
        self.stale: set[str] = set()
        #: set while the loop waits for something to fetch
        self.wake: asyncio.Future | None = None
        self.task: asyncio.Task | None = None
        #: topic -> (the plan list a request asked with, {partition: offset} of it)
        self.asked: dict[str, tuple[list, dict[int, int]]] = {}
        #: True once the layout no longer has this node (its loop ends)
        self.retired = False

    def poke(self) -> None:
        """Wake the loop if it waits."""
        wake = self.wake
        if wake is not None and not wake.done():
            wake.set_result(None)


class _StateChanges:
    """Where the tracked partition states note a change of position or pause (see
    :func:`~.fetch_planner.track_state_changes`): the partition's topic is planned again and its
    loop woken; a partition left without a position wakes the routine (it must be reset)."""

    __slots__ = ("_fetcher",)

    def __init__(self, fetcher: BatchFetcher):
        self._fetcher = fetcher

    def add(self, state) -> None:
        self._fetcher._state_changed(state)


class BatchFetcher(Fetcher):
    """aiokafka's ``Fetcher`` with mirrorline's own fetch loop and reader (see the module docstring).

    Build it with :func:`use_batch_fetcher`; ``counters`` says how fetches and batches went.
    """

    def __init__(self, client: AIOKafkaClient, subscriptions, *, sessions: FetchSessions,
                 watch: FetchErrorWatch | None, **settings: Any):
        self._sessions = sessions
        self._signs = SignOrder(watch, self._replan)
        if watch is not None:
            sessions._watch = self._signs  # a partition back after a gap is a sign like an error
        self._ready: dict[Any, _Ready] = {}
        #: partition -> the error its fetch met, raised to the reader once
        self._errors: dict[Any, Exception] = {}
        #: partition -> until when (time.monotonic()) it sits out after a retriable error
        self._held: dict[Any, float] = {}
        self._buffered = 0
        self._nodes: dict[int, _Node] = {}
        #: (topic, partition number) -> (aiokafka partition, state), for the current layout
        self._place: dict[tuple[str, int], tuple[Any, Any]] = {}
        #: state -> its _Node and topic, for the current layout
        self._by_state: dict[Any, tuple[_Node, str]] = {}
        self._layout_key: tuple[Any, Any] | None = None
        self._leaderless = False
        self._resetting: dict[int, asyncio.Task] = {}
        self._changes = _StateChanges(self)
        #: forwarded (batches handed over as fetched), reencoded (rebuilt), skipped_records (control
        #: and aborted), fetches, answers_with_records (for tests and logs)
        self.counters: dict[str, int] = {"forwarded": 0, "reencoded": 0, "skipped_records": 0, "fetches": 0,
                                         "answers_with_records": 0}
        track_state_changes()
        super().__init__(client, subscriptions, **settings)

    async def close(self):
        """Stop the routine and every loop and reset; wake the readers (they return nothing).

        aiokafka's close awaits the routine bare, so a routine that had failed would raise its
        failure again from the consumer's stop; the reader has been given it already."""
        self._closed = True
        task = self._fetch_task
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - raised to the reader and logged when it happened
            pass
        for waiter in list(self._fetch_waiters):
            self._notify(waiter)
        pending = [task for task in self._pending_tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        self._pending_tasks.clear()

    # -- the supervising routine ------------------------------------------------------------------
    async def _fetch_requests_routine(self):
        """Lay the assignment out by leader, keep one fetch loop per leader running, start position
        resets, and start over when the assignment changes."""
        try:
            assignment = None
            while True:
                if assignment is None or not assignment.active:
                    await self._stop_loops()
                    subscription = self._subscriptions.subscription
                    if subscription is None or subscription.assignment is None:
                        try:
                            await self._subscriptions.wait_for_assignment()
                        except Errors.KafkaError:
                            continue  # a coordination error: the reader's waiters get it, the loop waits on
                    assignment = self._subscriptions.subscription.assignment
                    assignment._mirrorline_changed = self._changes
                self._wait_consume_future = self._loop.create_future()
                self._lay_out(assignment)
                self._start_resets(assignment)
                waits = [self._wait_consume_future, assignment.unassign_future, *self._resetting.values()]
                waits.extend(node.task for node in self._nodes.values() if node.task is not None)
                if self._leaderless:
                    waits.append(self._client.force_metadata_update())
                done, _ = await asyncio.wait(waits, timeout=self._fetcher_timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task in self._pending_tasks:
                        self._pending_tasks.discard(task)
                        if not task.cancelled() and task.exception() is not None:
                            raise task.exception()
                for node_id, task in list(self._resetting.items()):
                    if task.done():
                        del self._resetting[node_id]
                        if task.result():
                            self._wake_readers()  # a reset stored an error for the reader
                for node in self._nodes.values():
                    if node.task is not None and node.task.done():
                        node.task = None
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            log.exception("The fetch loop failed; the consumer's next getmany raises this error")
            raise Errors.KafkaError(f"the fetch loop failed: {exc!r}") from exc
        finally:
            for waiter in list(self._fetch_waiters):
                self._notify(waiter)

    async def _stop_loops(self) -> None:
        """Cancel every fetch loop and reset, and forget what was fetched (a new assignment)."""
        tasks = [node.task for node in self._nodes.values() if node.task is not None]
        tasks.extend(self._resetting.values())
        for node in self._nodes.values():
            node.retired = True
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._pending_tasks.difference_update(tasks)
        self._nodes.clear()
        self._resetting.clear()
        self._ready.clear()
        self._signs.forget_batches()
        self._errors.clear()
        self._held.clear()
        self._buffered = 0
        self._layout_key = None

    def _lay_out(self, assignment) -> None:
        """Group the assigned partitions by leader, when the assignment or the metadata changed."""
        by_topic = self._client.cluster._partitions
        if self._layout_key is not None and self._layout_key[0] is assignment and self._layout_key[1] is by_topic:
            return
        self._layout_key = (assignment, by_topic)
        grouped: dict[int, dict[str, list]] = {}
        place: dict[tuple[str, int], tuple[Any, Any]] = {}
        leaderless = False
        for tp, state in assignment._tp_state.items():
            partitions = by_topic.get(tp.topic)
            meta = None if partitions is None else partitions.get(tp.partition)
            leader = None if meta is None else meta.leader
            place[(tp.topic, tp.partition)] = (tp, state)
            if leader is None or leader == -1:
                leaderless = True
                continue
            grouped.setdefault(leader, {}).setdefault(tp.topic, []).append((tp, tp.partition, state))
        self._place = place
        self._leaderless = leaderless
        self._held.clear()  # held for new metadata: here it is
        by_state: dict[Any, tuple[_Node, str]] = {}
        for node_id, node in list(self._nodes.items()):
            if node_id not in grouped:
                node.retired = True
                if node.task is not None:
                    node.task.cancel()
                del self._nodes[node_id]
        for node_id, members in grouped.items():
            node = self._nodes.get(node_id)
            if node is None:
                node = self._nodes[node_id] = _Node(node_id)
            node.members = members
            node.plan = {}
            node.stale = set(members)
            for topic, entries in members.items():
                for _tp, _p, state in entries:
                    by_state[state] = (node, topic)
            if node.task is None:
                node.task = asyncio.ensure_future(self._fetch_loop(node, assignment))
                self._pending_tasks.add(node.task)
            node.poke()
        self._by_state = by_state

    def _start_resets(self, assignment) -> None:
        """Start a position reset at each leader for its partitions without a position."""
        wanted: dict[int, list] = {}
        for node_id, node in self._nodes.items():
            if node_id in self._resetting:
                continue
            for entries in node.members.values():
                for tp, _p, state in entries:
                    if state._position is None:
                        wanted.setdefault(node_id, []).append(tp)
        for node_id, tps in wanted.items():
            task = asyncio.ensure_future(self._update_fetch_positions(assignment, node_id, tps))
            self._resetting[node_id] = task
            self._pending_tasks.add(task)

    def _state_changed(self, state) -> None:
        """A partition's position or pause changed (seek, reset, pause, resume, handed over)."""
        place = self._by_state.get(state)
        if place is None:
            return
        node, topic = place
        node.stale.add(topic)
        node.poke()
        if state._position is None:
            self._notify(self._wait_consume_future)  # the routine starts its reset

    def _set_error(self, tp, error):
        # aiokafka's resets store their errors here (no committed offset under auto.offset.reset=none)
        self._errors[tp] = error
        self._restage(tp)

    def _restage(self, tp) -> None:
        """Plan ``tp``'s topic again at its leader."""
        place = self._place.get((tp.topic, tp.partition))
        if place is not None:
            found = self._by_state.get(place[1])
            if found is not None:
                found[0].stale.add(tp.topic)
                found[0].poke()

    # -- one leader's loop ------------------------------------------------------------------------
    async def _fetch_loop(self, node: _Node, assignment) -> None:
        """Fetch from one leader until its node leaves the layout or the assignment ends."""
        try:
            while not node.retired:
                plan = self._plan(node)
                if not plan or self._buffered >= self._fetch_max_bytes:
                    node.wake = self._loop.create_future()
                    if self._held:
                        wait = min(self._held.values()) - time.monotonic()
                        handle = self._loop.call_later(max(wait, 0.001), node.poke)
                        try:
                            await node.wake
                        finally:
                            handle.cancel()
                    else:
                        await node.wake
                    node.wake = None
                    continue
                await self._fetch(node, plan, assignment)
        except asyncio.CancelledError:
            return

    def _plan(self, node: _Node) -> dict[str, list]:
        """The node's request partitions by topic, the stale topics made again."""
        held = self._held
        now = 0.0
        if held:
            now = time.monotonic()
            for tp, until in list(held.items()):
                if until <= now:
                    del held[tp]
                    self._restage(tp)
        if node.stale:
            plan = dict(node.plan)
            ready, errors = self._ready, self._errors
            max_bytes = self._max_partition_fetch_bytes
            held_signs = self._signs.held
            for topic in node.stale:
                entries = []
                if topic in held_signs:
                    plan.pop(topic, None)
                    continue
                for tp, p, state in node.members.get(topic, ()):
                    position = state._position
                    if position is None or state._paused or tp in errors:
                        continue
                    if held and tp in held:
                        continue
                    waiting = ready.get(tp)
                    if waiting is None:
                        entries.append((p, position, max_bytes))
                    elif waiting.size < max_bytes:  # one answer's worth ahead per partition, at most
                        entries.append((p, waiting.next_offset, max_bytes))
                if entries:
                    plan[topic] = entries
                else:
                    plan.pop(topic, None)
            node.plan = plan
            node.stale.clear()
        return node.plan

    async def _fetch(self, node: _Node, plan: dict[str, list], assignment) -> None:
        """One round trip to ``node``: the request, then its answer taken in."""
        node_id = node.node_id
        full = FetchRequest(self._fetch_max_wait_ms, self._fetch_min_bytes,
                            max(self._fetch_max_bytes - self._buffered, 1), self._isolation_level,
                            list(plan.items()), rack_id="")
        sessions = self._sessions
        for _attempt in range(2):  # a refused session: once more, as a full request opening a new one
            request, wanted = sessions.request_for(node_id, full)
            sent_at = time.monotonic()
            self.counters["fetches"] += 1
            try:
                response = await AIOKafkaClient.send(self._client, node_id, request)
            except Errors.KafkaError as err:
                sessions.failed(node_id)
                log.error("Failed fetch messages from %s: %s", node_id, err)
                await asyncio.sleep(self._retry_backoff)
                return
            except BaseException:
                sessions.failed(node_id)
                raise
            if sessions.succeeded(node_id, request, response, wanted, time.monotonic() - sent_at):
                break
        else:
            return
        if node.retired or not assignment.active:
            return
        self._take_answer(node, response, wanted)

    def _asked(self, node: _Node, topic: str, wanted: dict) -> dict[int, int]:
        """``{partition: fetch offset}`` the request asked of ``topic`` (kept while its plan list is the same)."""
        partitions = wanted.get(topic)
        if partitions is None:
            return {}
        kept = node.asked.get(topic)
        if kept is not None and kept[0] is partitions:
            return kept[1]
        offsets = {p: offset for p, offset, _max_bytes in partitions}
        node.asked[topic] = (partitions, offsets)
        return offsets

    def _take_answer(self, node: _Node, response, wanted: dict) -> None:
        """Take one Fetch answer in: batches to the reader, watermarks to the states, errors handled."""
        version = response.API_VERSION
        v11 = version >= 11
        place = self._place
        ready = self._ready
        answered = self._sessions._answered
        stale = node.stale
        read_committed = self._isolation_level == READ_COMMITTED
        signs = self._signs
        now_ms = None
        added = False
        for topic, partitions in response.topics:
            asked = self._asked(node, topic, wanted)
            for part in partitions:
                p, error = part[0], part[1]
                if error in TOPIC_CHANGE_ERRORS:
                    signs.sign(topic, node.node_id, error=True)
                offset = asked.get(p)
                found = place.get((topic, p))
                if offset is None or found is None:
                    continue
                tp, state = found
                if answered is not None:
                    answered.add((topic, p))
                if topic in signs.held:
                    continue  # fetched again once the reader has what came before the sign
                waiting = ready.get(tp)
                position = state._position
                if position is None or (position if waiting is None else waiting.next_offset) != offset:
                    continue  # a seek or reset since the request went out: this answer is for the old position
                if error:
                    self._partition_error(tp, state, error, offset)
                    stale.add(topic)
                    added = True
                    continue
                if now_ms is None:
                    now_ms = int(time.time() * 1000)
                state.highwater = part[2]
                if version >= 4:
                    state.lso = part[3]
                    aborted = part[5] if v11 else part[-2]
                else:
                    state.lso, aborted = None, None
                state.timestamp = now_ms
                raw = part[-1]
                if not raw:
                    continue
                try:
                    result = split_fetched(raw, offset, aborted, read_committed=read_committed,
                                           check_crcs=self._check_crcs)
                except Exception as exc:  # noqa: BLE001 - a corrupt batch: the reader gets the error
                    self._errors[tp] = exc
                    stale.add(topic)
                    added = True
                    continue
                if result.too_large:
                    self._errors[tp] = Errors.RecordTooLargeError(
                        f"There are some messages at [Partition=Offset]: {tp}={offset} whose size is larger than the "
                        f"fetch size {self._max_partition_fetch_bytes} and hence cannot be ever returned. Increase "
                        "the fetch size, or decrease the maximum message size the broker will allow.")
                    stale.add(topic)
                    added = True
                    continue
                counters = self.counters
                counters["skipped_records"] += result.skipped_records
                batches = result.batches
                for batch in batches:
                    counters["reencoded" if batch.reencoded else "forwarded"] += 1
                if result.next_offset == offset:
                    continue
                stale.add(topic)
                if waiting is None:
                    if not batches:  # only control or aborted batches: the reader's position moves past them
                        state.consumed_to(result.next_offset)
                        continue
                    self._add_ready(tp, _Ready(offset, result.next_offset, batches, len(raw)))
                else:
                    waiting.batches.extend(batches)
                    waiting.next_offset = result.next_offset
                    waiting.size += len(raw)
                self._buffered += len(raw)
                added = True
        if added:
            self.counters["answers_with_records"] += 1
            self._wake_readers()

    def _partition_error(self, tp, state, error: int, offset: int) -> None:
        """A partition's fetch was answered with ``error`` (as aiokafka's fetcher, see the module docstring)."""
        if error in _METADATA_ERRORS:
            self._held[tp] = time.monotonic() + self._retry_backoff
            future = self._client.force_metadata_update()
            future.add_done_callback(lambda _f: self._notify(self._wait_consume_future))
        elif error == _OUT_OF_RANGE:
            if self._default_reset_strategy != OffsetResetStrategy.NONE:
                log.info("Fetch offset %s is out of range for partition %s, resetting offset", offset, tp)
                state.await_reset(self._default_reset_strategy)
            else:
                self._errors[tp] = Errors.OffsetOutOfRangeError({tp: offset})
        elif error == _TOPIC_AUTHORIZATION_FAILED:
            log.warning("Not authorized to read from topic %s.", tp.topic)
            self._errors[tp] = Errors.TopicAuthorizationFailedError(tp.topic)
        else:
            error_type = Errors.for_code(error)
            if error not in TOPIC_CHANGE_ERRORS:
                log.warning("Unexpected error while fetching data: %s", error_type.__name__)
            self._held[tp] = time.monotonic() + self._retry_backoff

    # -- topic-change signs, in order with the batches --------------------------------------------
    def _replan(self, topic: str) -> None:
        """Plan ``topic`` again at every leader of its partitions (a held sign of it went out)."""
        for node in self._nodes.values():
            if topic in node.members:
                node.stale.add(topic)
                node.poke()

    def _add_ready(self, tp, entry: _Ready) -> None:
        self._ready[tp] = entry
        self._signs.batches_waiting(tp.topic)

    def _pop_ready(self, tp) -> _Ready | None:
        entry = self._ready.pop(tp, None)
        if entry is not None:
            self._signs.batches_taken(tp.topic)
        return entry

    # -- the reader -------------------------------------------------------------------------------
    def _wake_readers(self) -> None:
        for waiter in list(self._fetch_waiters):
            self._notify(waiter)

    async def fetched_records(self, partitions, timeout=0, max_records=None):
        """The batches fetched for ``partitions`` (all when empty), by partition, waiting up to
        ``timeout`` seconds for some; a partition's error is raised once nothing else is returned."""
        deadline = None
        self._signs.release_due()
        while True:
            if self._subscriptions.reassignment_in_progress:
                await self._subscriptions.wait_for_assignment()
            drained = self._drain(partitions, max_records)
            if drained or timeout <= 0 or self._closed:
                return drained
            task = self._fetch_task
            if task.done():
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()
                return drained
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout
            elif now >= deadline:
                return drained
            waiter = self._create_fetch_waiter()
            handle = self._loop.call_at(self._loop.time() + (deadline - now), self._notify, waiter)
            try:
                await waiter
            finally:
                handle.cancel()

    def _drain(self, partitions, max_records) -> dict:
        """Take what is ready for ``partitions``, moving their positions past it (module docstring)."""
        out: dict = {}
        ready = self._ready
        freed = 0
        if ready:
            subscription = self._subscriptions.subscription
            assignment = None if subscription is None else subscription.assignment
            states = {} if assignment is None else assignment._tp_state
            for tp in list(ready):
                if partitions and tp not in partitions:
                    continue
                entry = ready[tp]
                state = states.get(tp)
                if state is None or state._paused or state._position != entry.start:
                    # paused, unassigned or moved since: fetched again from the position when wanted
                    self._pop_ready(tp)
                    freed += entry.size
                    self._restage(tp)
                    continue
                batches = entry.batches
                if max_records is not None and len(batches) > max_records:
                    taken, entry.batches = batches[:max_records], batches[max_records:]
                    entry.start = taken[-1].source_offsets[-1] + 1
                    state.consumed_to(entry.start)
                    out[tp] = taken
                    break
                self._pop_ready(tp)
                freed += entry.size
                state.consumed_to(entry.next_offset)
                if batches:
                    out[tp] = batches
                    if max_records is not None:
                        max_records -= len(batches)
                        if max_records <= 0:
                            break
        if freed:
            bounded = self._buffered >= self._fetch_max_bytes
            self._buffered -= freed
            if bounded:
                for node in self._nodes.values():
                    node.poke()
        if out:
            return out
        errors = self._errors
        if errors:
            for tp in list(errors):
                if partitions and tp not in partitions:
                    continue
                error = errors.pop(tp)
                self._restage(tp)
                raise error
        return out

    async def next_record(self, partitions):
        raise NotImplementedError("a consumer that fetches batches hands them out with getmany only")

    # -- position changes from the consumer ---------------------------------------------------------
    def request_offset_reset(self, tps, strategy):
        for tp in tps:
            self._forget(tp)
        return super().request_offset_reset(tps, strategy)

    def seek_to(self, tp, offset):
        self._forget(tp)
        super().seek_to(tp, offset)

    def _forget(self, tp) -> None:
        """Drop what was fetched for ``tp`` and its pending error: its position is about to move."""
        entry = self._pop_ready(tp)
        if entry is not None:
            bounded = self._buffered >= self._fetch_max_bytes
            self._buffered -= entry.size
            if bounded:
                for node in self._nodes.values():
                    node.poke()
        self._errors.pop(tp, None)
        self._held.pop(tp, None)
        self._restage(tp)


def _isolation_name(level: int) -> str:
    return "read_committed" if level == READ_COMMITTED else "read_uncommitted"


async def use_batch_fetcher(consumer, sessions: FetchSessions, watch: FetchErrorWatch | None) -> BatchFetcher:
    """Replace a started, not yet assigned consumer's fetcher with a :class:`BatchFetcher` of the
    same settings; returns it."""
    old = consumer._fetcher
    if old is None:
        raise RuntimeError("use_batch_fetcher needs a started consumer")
    await old.close()
    fetcher = BatchFetcher(
        consumer._client, consumer._subscription, sessions=sessions, watch=watch, fetch_min_bytes=old._fetch_min_bytes, fetch_max_bytes=old._fetch_max_bytes,
        fetch_max_wait_ms=old._fetch_max_wait_ms, max_partition_fetch_bytes=old._max_partition_fetch_bytes,
        check_crcs=old._check_crcs, fetcher_timeout=old._fetcher_timeout, prefetch_backoff=old._prefetch_backoff,
        retry_backoff_ms=int(old._retry_backoff * 1000),
        auto_offset_reset=OffsetResetStrategy.to_str(old._default_reset_strategy),
        isolation_level=_isolation_name(old._isolation_level))
    consumer._fetcher = fetcher
    return fetcher

