"""Consumers shared by the tasks of one process: one fetch for all of them.

Kafka Connect gives every task a consumer of its own, so two tasks of one connector reading the
same source brokers open two connections and two fetch sessions per broker, and every record
that arrives while records flow costs two fetch round trips where one would carry both tasks'
partitions. A round trip costs a Python task about a millisecond of CPU whatever it carries, so at
a trickle (1 MB/s over two tasks) the round trips, not the records, are the mirror's CPU
(docs/performance.md, *Latency*).

:class:`ConsumerShares` keeps, per event loop, one :class:`~mirrorline.clients.consumer.KafkaConsumer`
for each share name and set of settings, and hands each caller a :class:`SharedConsumer`: a
:class:`~mirrorline.api.clients.Consumer` of the caller's own partitions over it.

- The consumer underneath is assigned the union of its members' partitions; each member reads,
  seeks, pauses and positions only its own. ``getmany`` returns only the member's partitions,
  and an error of one partition is raised to the member that holds it.
- A member that assigns (or leaves) changes the union. aiokafka assigns afresh, so the others'
  fetch positions, pending position resets and pauses are put back at once; what was fetched
  for them and not yet returned is fetched again (nothing is skipped: a position is where the
  member's next record starts).
- ``fetch_state_changes`` and ``topic_change_signs`` are taken from the consumer underneath by
  whichever member asks, and kept for every member, each getting those of its own partitions and
  topics.
- The first member to start starts the consumer; the last to stop stops it. Members share only
  when their settings are equal, ``client.id`` aside: the consumer keeps its first member's.
- Two members never read one partition: a partition assigned by a member is taken from any
  other member that held it (a task started again before its old instance had stopped; the
  old one gets no more records of it, so it copies nothing twice from here), with a warning.
- A consumer that forwards batches fetches with mirrorline's own loop (:mod:`.batch_fetcher`):
  each member's ``getmany`` is that loop's reader for the member's partitions, and the loop
  fetches ahead for all of them. The rest of this list is about aiokafka's loop (the records
  path, ``client.rack``).
- Records are handed to the members waiting in ``getmany`` while aiokafka plans its next fetch
  (:meth:`_Share.hand_over`), so the partitions that just brought records are in that fetch.
  Until a member takes them, its positions (``fetch_position``, ``fetch_states``, ``position``)
  are those of the first record handed over, as if the records still waited in the consumer; a
  seek or pause drops them (a pause seeks back to them first, so they are fetched again after
  the resume, as aiokafka does with records it had fetched for a paused partition).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from aiokafka.consumer.fetcher import FetchResult
from aiokafka.errors import ConsumerStoppedError, IllegalStateError
from aiokafka.structs import TopicPartition as AioPartition

from mirrorline.api.clients import Consumer
from mirrorline.api.kafka import FetchedBatch, OffsetAndTimestamp, TopicPartition
from mirrorline.clients.consumer import AIO_ERRORS, KafkaConsumer
from mirrorline.clients.errors import translate

log = logging.getLogger(__name__)

__all__ = ["ConsumerShares", "SharedConsumer"]


class _Share:
    """One consumer and its members."""

    def __init__(self, key: Hashable, consumer: KafkaConsumer, on_empty: Callable[[Hashable], None]):
        self.key = key
        self.consumer = consumer
        self.members: list[SharedConsumer] = []
        self._on_empty = on_empty
        self._started = False
        self._stopped = False
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with self._lock:
            if not self._started:
                await self.consumer.start()
                self._started = True
                fetcher = getattr(self.consumer._consumer, "_fetcher", None)
                if fetcher is not None and self.consumer.fetcher is None:  # aiokafka's loop: hand over as it plans
                    plan = fetcher._get_actions_per_node

                    def hand_over_then_plan(assignment, plan=plan):
                        self.hand_over()
                        return plan(assignment)

                    fetcher._get_actions_per_node = hand_over_then_plan

    def hand_over(self) -> None:
        """Give each member waiting in ``getmany`` the records fetched for it, before the fetch loop
        plans its next fetch: aiokafka leaves partitions whose records wait for the caller out of
        that fetch, so without this a partition that just brought records would sit out a fetch
        round (a gather wait) before it is fetched again. Members not waiting are left to drain
        their records themselves, as aiokafka's caller would."""
        for member in self.members:
            if member._waiter is not None:
                member._take_fetched(member._ready, member._aio, planning=True)
                if member._ready and not member._waiter.done():
                    member._waiter.set_result(None)

    async def leave(self, member: SharedConsumer) -> None:
        """``member`` reads no more: its partitions leave the union; the last member stops the consumer."""
        if member in self.members:
            self.members.remove(member)
            if not self.members:
                self._on_empty(self.key)
            elif member.partitions and self._started:
                self.reassign()
        if not self.members:
            async with self._lock:
                if not self._stopped:  # also after a failed start, which may have opened connections
                    self._stopped = True
                    self._started = False
                    await self.consumer.stop()

    def take_over(self, member: SharedConsumer, partitions: frozenset[TopicPartition]) -> None:
        """``member`` reads ``partitions`` from now on: taken from any other member that held them."""
        for other in self.members:
            if other is not member and other.partitions & partitions:
                taken = other.partitions & partitions
                log.warning("Consumer share %s: %d partition(s) (e.g. %s) were still held by another reader in "
                            "this process (a task started again before its old instance stopped); the new one "
                            "reads them from now on", self.consumer_name, len(taken), min(taken))
                other._set_partitions(other.partitions - taken)
                for tp in taken:
                    other._ready.pop(AioPartition(tp[0], tp[1]), None)
        member._set_partitions(partitions)
        self.reassign()

    @property
    def consumer_name(self) -> str:
        return str(self.key[1]) if isinstance(self.key, tuple) and len(self.key) > 1 else str(self.key)

    def reassign(self) -> None:
        """Assign the union of the members' partitions, keeping each partition's position, pending
        position reset and pause (aiokafka's assign starts every partition afresh)."""
        inner = self.consumer
        aio = inner._consumer
        try:
            assignment = aio._subscription.subscription.assignment
        except AttributeError:  # nothing assigned yet
            assignment = None
        positions: dict[TopicPartition, int] = {}
        resets: dict[int, list[AioPartition]] = {}
        union: set[TopicPartition] = set()
        for member in self.members:
            union |= member.partitions
        if assignment is not None:
            states = assignment._tp_state
            for tp in union:
                state = states.get(AioPartition(tp[0], tp[1]))
                if state is None:
                    continue
                if state.has_valid_position:
                    positions[tp] = state.position
                elif state.awaiting_reset:
                    resets.setdefault(state.reset_strategy, []).append(AioPartition(tp[0], tp[1]))
        paused = aio.paused() & {AioPartition(tp[0], tp[1]) for tp in union}
        inner.assign(union)
        for tp, position in positions.items():
            inner.seek(tp, position)
        for strategy, tps in resets.items():
            # a seek_to_beginning/end still under way: ask for it again on the new assignment (the
            # caller's wait ends with the old assignment; its partition gets its position all the same)
            aio._fetcher.request_offset_reset(tps, strategy)
        if paused:
            aio.pause(*paused)
        for member in self.members:
            member._changes = None  # every fetch state was reset: the members' next sweep reads them all

    def spread_changes(self) -> None:
        """Hand what the consumer underneath answered since last asked to every member."""
        changes = self.consumer.fetch_state_changes()
        for member in self.members:
            if changes is None or member._changes is None:
                member._changes = None
            elif changes:
                member._changes |= {tp for tp in changes if tp in member.partitions}

    def spread_signs(self) -> None:
        """Hand the topic-change signs the consumer underneath has gathered to every member."""
        signs = self.consumer.topic_change_signs()
        if signs:
            for member in self.members:
                member._signs |= {topic for topic in signs if topic in member.topics}


class SharedConsumer(Consumer):
    """One member's view of a shared consumer: the :class:`~mirrorline.api.clients.Consumer` of its
    own partitions (see the module docstring). Made by :meth:`ConsumerShares.member`."""

    def __init__(self, share: _Share):
        self._share = share
        inner = share.consumer
        self.ignored_settings = list(inner.ignored_settings)
        self.principal = inner.principal
        self.read_committed = inner.read_committed
        #: the partitions this member reads, as ours and as aiokafka's
        self.partitions: frozenset[TopicPartition] = frozenset()
        self.topics: frozenset[str] = frozenset()
        self._aio: frozenset[AioPartition] = frozenset()
        #: fetch-state changes and topic-change signs gathered for this member since it last took them
        self._changes: set[TopicPartition] | None = None
        self._signs: set[str] = set()
        #: records handed over by the fetch loop (:meth:`_Share.hand_over`) and not returned yet, by
        #: aiokafka partition; their partitions' positions in the consumer are already past them
        self._ready: dict[AioPartition, list] = {}
        #: set while this member waits in getmany for records
        self._waiter: asyncio.Future | None = None
        self._started = False
        self._left = False

    @property
    def is_open(self) -> bool:
        """Whether this member started and has not left (the runtime closes a task's clients left open)."""
        return self._started and not self._left

    @property
    def consumer(self) -> KafkaConsumer:
        """The consumer underneath (its counters and hooks say how fetches went)."""
        return self._share.consumer

    @property
    def members(self) -> int:
        """How many readers share the consumer underneath now, this one included."""
        return len(self._share.members)

    def _set_partitions(self, partitions: frozenset[TopicPartition]) -> None:
        self.partitions = partitions
        self.topics = frozenset(tp[0] for tp in partitions)
        self._aio = frozenset(AioPartition(tp[0], tp[1]) for tp in partitions)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        try:
            await self._share.start()
        except BaseException:
            await self.stop()
            raise
        self._started = True

    async def stop(self) -> None:
        if self._left:
            return
        self._left = True
        self._ready.clear()
        try:
            await self._share.leave(self)
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    # -- positions -------------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self._left:
            raise translate(ConsumerStoppedError())
        self._share.take_over(self, frozenset(TopicPartition(tp[0], tp[1]) for tp in partitions))

    def assignment(self) -> set[TopicPartition]:
        return self.consumer.assignment() & self.partitions

    def _own(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """``partitions``, checked to be this member's (an unassigned one raises as aiokafka's would)."""
        out = list(partitions)
        foreign = [tp for tp in out if tp not in self.partitions]
        if foreign:
            raise translate(IllegalStateError(f"Partitions {sorted(foreign)[:3]} are not assigned"))
        return out

    def _first_ready(self, partition: TopicPartition) -> int | None:
        """The offset of the first record handed over for ``partition`` and not returned yet (None: none)."""
        items = self._ready.get(AioPartition(partition[0], partition[1]))
        if not items:
            return None
        first = items[0]
        return first.source_offsets[0] if type(first) is FetchedBatch else first.offset

    def _drop_ready(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._ready.pop(AioPartition(tp[0], tp[1]), None)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.consumer.seek(*self._own([partition]), offset)
        self._drop_ready([partition])

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._drop_ready(self._own(partitions))
        await self.consumer.seek_to_beginning(*partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._drop_ready(self._own(partitions))
        await self.consumer.seek_to_end(*partitions)

    async def position(self, partition: TopicPartition) -> int:
        self._own([partition])
        first = self._first_ready(partition)
        return first if first is not None else await self.consumer.position(partition)

    def fetch_position(self, partition: TopicPartition) -> int | None:
        if partition not in self.partitions:
            return None
        first = self._first_ready(partition)
        return first if first is not None else self.consumer.fetch_position(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.consumer.highwater(partition) if partition in self.partitions else None

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        return self.consumer.last_stable_offset(partition) if partition in self.partitions else None

    def fetch_states(self, partitions: Iterable[TopicPartition]
                     ) -> list[tuple[TopicPartition, int | None, int | None, int | None]]:
        own = self.partitions
        states = [state if state[0] in own else (state[0], None, None, None)
                  for state in self.consumer.fetch_states(partitions)]
        if self._ready:
            for i, (tp, _position, highwater, stable) in enumerate(states):
                first = self._first_ready(tp) if tp in own else None
                if first is not None:
                    states[i] = (tp, first, highwater, stable)
        return states

    def fetch_state_changes(self) -> set[TopicPartition] | None:
        self._share.spread_changes()
        changes, self._changes = self._changes, set()
        return changes

    # -- reading ---------------------------------------------------------------------------------
    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list]:
        wanted = frozenset(AioPartition(tp[0], tp[1]) for tp in self._own(partitions)) if partitions else self._aio
        if not wanted:  # nothing to read (yet): wait as a consumer with nothing assigned would
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        inner = self.consumer
        aio = inner._consumer
        try:
            if aio._closed or self._left:
                raise ConsumerStoppedError()
            with aio._subscription.fetch_context():
                fetched = await self._fetched(wanted, timeout_ms / 1000, max_records or aio._max_poll_records)
        except AIO_ERRORS as exc:
            raise translate(exc, self.partitions) from exc
        return inner._ours_of(fetched)

    async def _fetched(self, wanted: frozenset[AioPartition], timeout: float, max_records: int | None) -> dict:
        """aiokafka's ``Fetcher.fetched_records`` for this member: the records handed over to it
        first, then those waiting in the fetcher, else wait (up to ``timeout``) for a fetch to bring some.

        On mirrorline's own fetch loop (:mod:`.batch_fetcher`) that is its reader's, for this
        member's partitions: it fetches ahead by itself, so nothing is handed over."""
        own_loop = self.consumer.fetcher
        if own_loop is not None:
            return await own_loop.fetched_records(wanted, timeout, max_records)
        fetcher = self.consumer._consumer._fetcher
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            out: dict = {}
            if self._ready:
                for tp in [tp for tp in self._ready if tp in wanted]:
                    out[tp] = self._ready.pop(tp)
            self._take_fetched(out, wanted, max_records)
            remaining = deadline - loop.time()
            if out or remaining <= 0:
                return out
            waiter = self._waiter = fetcher._create_fetch_waiter()
            try:
                done, _ = await asyncio.wait([waiter], timeout=remaining)
            finally:
                self._waiter = None
                if not waiter.done():
                    waiter.cancel()
            if not done or fetcher._closed:
                return {tp: self._ready.pop(tp) for tp in [tp for tp in self._ready if tp in wanted]}
            waiter.result()  # an authorization error, as aiokafka raises it

    def _take_fetched(self, out: dict, wanted: frozenset[AioPartition], max_records: int | None = None, *,
                      planning: bool = False) -> None:
        """Move the records waiting in the fetcher for ``wanted`` partitions into ``out`` (as aiokafka's
        ``fetched_records`` does: positions move past them); a partition's fetch error is raised when
        nothing was taken before it, else left for the next call. ``planning``: called by the fetch
        loop as it plans (:meth:`_Share.hand_over`): errors stay for the member's own call, and the
        loop is not woken (the plan being made already sees the partitions drained)."""
        fetcher = self.consumer._consumer._fetcher
        records = fetcher._records
        for tp in [tp for tp in records if tp in wanted]:
            result = records[tp]
            if type(result) is FetchResult:
                items = result.getall(max_records)
                if not result.has_more():
                    del records[tp]
                    if not planning:
                        fetcher._notify(fetcher._wait_consume_future)
                if items:
                    taken = out.get(tp)
                    if taken is None:
                        out[tp] = items
                    else:
                        taken.extend(items)
                    if max_records is not None:
                        max_records -= len(items)
                        if max_records <= 0:
                            return
            elif planning:
                continue
            elif out:
                return
            else:
                del records[tp]
                fetcher._notify(fetcher._wait_consume_future)
                result.check_raise()

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self.consumer.beginning_offsets(partitions)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self.consumer.end_offsets(partitions)

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self.consumer.offsets_for_times(timestamps)

    async def topics(self) -> set[str]:
        return await self.consumer.topics()

    def topic_change_signs(self) -> set[str]:
        self._share.spread_signs()
        signs, self._signs = self._signs, set()
        return signs

    async def topic_ids(self, topics: Iterable[str]) -> dict[str, str] | None:
        return await self.consumer.topic_ids(topics)

    def pause(self, *partitions: TopicPartition) -> None:
        own = self._own(partitions)
        for tp in own:
            first = self._first_ready(tp)
            if first is not None:  # handed over, not returned: fetched again after resume, as aiokafka does
                self.consumer.seek(tp, first)
                self._drop_ready([tp])
        self.consumer.pause(*own)

    def resume(self, *partitions: TopicPartition) -> None:
        self.consumer.resume(*self._own(partitions))


class ConsumerShares:
    """The shared consumers of one process, by event loop, share name and settings."""

    def __init__(self) -> None:
        self._shares: dict[Hashable, _Share] = {}

    def member(self, share: str, settings_key: Hashable, make: Callable[[], KafkaConsumer]) -> SharedConsumer:
        """A new reader of the consumer shared under ``share`` by callers with the same ``settings_key``
        on the running event loop; ``make`` builds that consumer when it is the first reader."""
        try:
            loop_id = id(asyncio.get_running_loop())
        except RuntimeError:  # no loop: nothing to share with
            loop_id = None
        key = (loop_id, share, settings_key)
        found = self._shares.get(key) if loop_id is not None else None
        if found is None:
            found = _Share(key, make(), self._forget)
            if loop_id is not None:
                self._shares[key] = found
        member = SharedConsumer(found)
        found.members.append(member)
        if len(found.members) > 1:
            log.info("Consumer %s is shared: %d readers in this process fetch through it",
                     found.consumer_name, len(found.members))
        return member

    def _forget(self, key: Hashable) -> None:
        self._shares.pop(key, None)

    def __len__(self) -> int:
        return len(self._shares)


def settings_key(props: Mapping[str, Any], *extra: Hashable) -> tuple:
    """A hashable key of ``props`` (``client.id`` aside: the shared consumer keeps its first member's)
    and ``extra``: consumers share only with equal settings."""
    return (tuple(sorted((str(k), str(v)) for k, v in props.items() if k != "client.id")), *extra)

