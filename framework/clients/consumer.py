"""The contract's :class:`~mirrorline.api.clients.Consumer` over aiokafka's consumer, and the runtime's group consumer.

:class:`KafkaConsumer` is what ``context.clients.consumer(props)`` returns: an assign-only
consumer whose partitions, offsets and errors are mirrorline's. Records are aiokafka's own
``ConsumerRecord`` objects, handed out uncopied (they have every attribute of the contract's
``ConsumerRecord`` protocol); only the dict around them is rebuilt, once per partition and call,
with the contract's :class:`~mirrorline.api.kafka.TopicPartition` keys. With ``fetch_batches``
``getmany`` returns :class:`~mirrorline.api.kafka.FetchedBatch` items, merged by
:func:`.fetched_batches.coalesce` when asked; with ``fetch_sessions`` fetches go in KIP-227
incremental fetch sessions (:mod:`.fetch_sessions`). With both, the consumer fetches with
mirrorline's own loop (:mod:`.batch_fetcher`); otherwise aiokafka's fetcher is hooked: by
:mod:`.batch_capture` for batches, around its client's ``send`` for sessions. Every consumer notes which topics its fetches were answered
with a topic-change error (:mod:`.fetch_errors`) and reads topic IDs with Metadata v12
(:mod:`.topic_ids`), so a caller can tell a re-created topic from the one it was reading.

:class:`GroupConsumer` adds what only the runtime's sink tasks need: a consumer group
(subscribe with a rebalance listener, commit).

aiokafka checks that partitions are its own ``TopicPartition`` class, so partitions are
converted at this wall in both directions.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import errors as ak
from aiokafka.structs import TopicPartition as AioPartition

from mirrorline.api.clients import BatchFetch, Consumer
from mirrorline.api.errors import ConfigError
from mirrorline.api.kafka import FetchedBatch, OffsetAndTimestamp, TopicPartition
from mirrorline.clients import metadata_reuse
from mirrorline.clients.batch_capture import BatchCapture, capture_batches
from mirrorline.clients.batch_fetcher import BatchFetcher, use_batch_fetcher
from mirrorline.clients.errors import translate
from mirrorline.clients.fetch_errors import FetchErrorWatch, watch_fetch_errors
from mirrorline.clients.fetch_sessions import (
    FLOWING_MAX_WAIT_MS,
    TRICKLE_MAX_WAIT_MS,
    FetchSessions,
    use_fetch_sessions,
)
from mirrorline.clients.fetched_batches import coalesce
from mirrorline.clients.side_connections import list_offsets_aside
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.clients.fetch_planner import use_fast_plans
from mirrorline.clients.topic_ids import read_topic_ids

#: aiokafka's group coordinator's background tasks (what a close cut short may leave running)
_COORDINATOR_TASKS = ("_coordination_task", "_heartbeat_task", "_commit_refresh_task", "_reset_committed_task")

#: What aiokafka raises that the wall translates.
AIO_ERRORS = (ak.KafkaError, ak.ConsumerStoppedError)
#: How long stop() waits for aiokafka's fetch loop to end before cancelling it again.
STOP_RECANCEL_S = 0.5
#: How long aiokafka's fetch loop sleeps when nothing wakes it (its ``consumer_timeout_ms``, passed
#: to the fetcher as ``fetcher_timeout``; 200 ms by default). Each wake-up walks every assigned
#: partition. A fetch answered, a seek, a reset, a resume, records consumed and a new assignment
#: all wake it at once (only a KIP-392 preferred read replica's expiry does not), so the timeout is
#: a safety net. At 4,000 partitions per task, five walks a second were an idle mirror's largest cost.
FETCH_LOOP_WAKEUP_MS = 10_000


def aio(partitions: Iterable[TopicPartition]) -> list[AioPartition]:
    """aiokafka's own partition objects for ``partitions``."""
    return [AioPartition(tp[0], tp[1]) for tp in partitions]


def ours(tp: Any) -> TopicPartition:
    """The contract's partition for one of aiokafka's."""
    return TopicPartition(tp[0], tp[1])


class KafkaConsumer(Consumer):
    """An assign-only consumer (see the module docstring); build it with :meth:`from_settings`."""

    #: whether start() was called and stop() not yet (the runtime closes a task's clients left open)
    is_open = False

    def __init__(self, kwargs: dict[str, Any], ignored: list[str] | None = None, *,
                 fetch_batches: BatchFetch | None = None, fetch_sessions: bool = False,
                 gather_max_wait_ms: int | None = None, gather_trickle_wait_ms: int | None = None):
        self.ignored_settings = list(ignored or [])
        self.principal = kwargs.get("sasl_plain_username")
        self.read_committed = kwargs.get("isolation_level") == "read_committed"
        self._check_crcs = kwargs.get("check_crcs", True)
        self._consumer = AIOKafkaConsumer(**{"consumer_timeout_ms": FETCH_LOOP_WAKEUP_MS, **kwargs})
        metadata_reuse.ask_for_no_topics_when_empty(self._consumer._client, self._not_subscribed_by_pattern)
        self._fetch_batches = fetch_batches
        self._coalesce_bytes = fetch_batches.coalesce_bytes if fetch_batches is not None else 0
        #: aiokafka partition -> ours, so a getmany builds no partition object it built before
        self._ours: dict[Any, TopicPartition] = {}
        #: the batch-capture hooks, once started with ``fetch_batches`` on aiokafka's fetch loop
        #: (their counters say how batches went)
        self.capture: BatchCapture | None = None
        #: mirrorline's own fetch loop, once started with ``fetch_batches`` and ``fetch_sessions`` (its
        #: counters say how fetches and batches went); None on aiokafka's
        self.fetcher: BatchFetcher | None = None
        self._own_fetch_loop = (fetch_batches is not None and fetch_sessions
                                and not kwargs.get("client_rack"))
        self._use_fetch_sessions = fetch_sessions
        self._gather_max_wait_ms = FLOWING_MAX_WAIT_MS if gather_max_wait_ms is None else gather_max_wait_ms
        if self._gather_max_wait_ms < 0:
            raise ConfigError(f"the consumer's gather wait must be 0 or more ms, not {gather_max_wait_ms}")
        self._gather_trickle_wait_ms = (TRICKLE_MAX_WAIT_MS if gather_trickle_wait_ms is None
                                        else gather_trickle_wait_ms)
        if self._gather_trickle_wait_ms < 0:
            raise ConfigError(f"the consumer's trickle gather wait must be 0 or more ms, not {gather_trickle_wait_ms}")
        #: the incremental fetch sessions, once started with ``fetch_sessions`` (their counters say how fetches went)
        self.fetch_sessions: FetchSessions | None = None
        #: the topics fetches were answered with a topic-change error, and by which broker (once started)
        self.fetch_errors: FetchErrorWatch | None = None
        #: topic -> the broker that last reported a change sign for it, until that broker is asked its ID
        self._sign_nodes: dict[str, int] = {}
        #: False once a broker could not answer Metadata v12 (no topic IDs in this cluster)
        self._topic_ids_supported = True
        #: aiokafka's assignment set last seen by assignment(), and ours for it
        self._assignment_seen: tuple[Any, frozenset[TopicPartition]] | None = None

    @classmethod
    def from_settings(cls, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                      fetch_sessions: bool = False, gather_max_wait_ms: int | None = None,
                      gather_trickle_wait_ms: int | None = None) -> KafkaConsumer:
        """A consumer from Java-style settings; ``group.id`` is dropped and nothing is ever committed.

        With ``fetch_batches`` and ``fetch_sessions`` it fetches with mirrorline's own loop
        (:mod:`.batch_fetcher`), shared by tasks or not, unless ``client.rack`` is set (aiokafka's
        loop fetches from a preferred read replica, KIP-392)."""
        kwargs, ignored = client_kwargs(props, "consumer")
        kwargs.pop("group_id", None)
        kwargs["enable_auto_commit"] = False
        return cls(kwargs, ignored, fetch_batches=fetch_batches, fetch_sessions=fetch_sessions,
                   gather_max_wait_ms=gather_max_wait_ms, gather_trickle_wait_ms=gather_trickle_wait_ms)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        self.is_open = True
        try:
            await self._consumer.start()
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        if self._own_fetch_loop and getattr(self._consumer, "_fetcher", None) is not None:
            self.fetch_errors = FetchErrorWatch()
            list_offsets_aside(self._consumer)
            self.fetch_sessions = FetchSessions(self.fetch_errors, self._gather_max_wait_ms,
                                                self._gather_trickle_wait_ms)
            self.fetcher = await use_batch_fetcher(self._consumer, self.fetch_sessions, self.fetch_errors)
            return
        self.fetch_errors = watch_fetch_errors(self._consumer)
        list_offsets_aside(self._consumer)
        if self._use_fetch_sessions:
            self.fetch_sessions = use_fetch_sessions(self._consumer, self.fetch_errors, self._gather_max_wait_ms,
                                                     self._gather_trickle_wait_ms)
            if self.fetch_sessions is not None:
                use_fast_plans(self._consumer, self.fetch_sessions.fetched_bytes)
        if self._fetch_batches is not None:
            self.capture = capture_batches(self._consumer, read_committed=self.read_committed,
                                           check_crcs=self._check_crcs)

    async def stop(self) -> None:
        self.is_open = False
        stopping = asyncio.ensure_future(self._consumer.stop())
        try:
            while not (await asyncio.wait([stopping], timeout=STOP_RECANCEL_S))[0]:
                # aiokafka's fetch loop swallows a cancel that lands while it awaits a fetch it is
                # cancelling itself (the assignment changed just before, as when one reader of a
                # shared consumer leaves right before the last): it then fetches on and stop() waits
                # for it forever. Cancel it again until it ends.
                task = getattr(getattr(self._consumer, "_fetcher", None), "_fetch_task", None)
                if task is not None and not task.done():
                    task.cancel()
            if stopping.cancelled():
                # Not this call's cancellation (that raises from the wait above): aiokafka's fetcher
                # cancels its fetches on close and awaits each bare, so a fetch sleeping out its retry
                # back-off (a broker down) ends the close with a CancelledError before the
                # connections are closed. Finish the close ourselves.
                await self._finish_close()
            else:
                stopping.result()
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        finally:
            if not stopping.done():  # this stop() was cancelled: so is the consumer's
                stopping.cancel()

    async def close_now(self, timeout: float) -> None:
        """Stop within ``timeout`` seconds, then make sure nothing of the consumer is left running.

        For a consumer whose owner's stop was given up on (its cluster unreachable): a stop that
        does not end in time, or that was cancelled half-way before (aiokafka then counts the
        consumer as closed and a second stop does nothing), would leave the group coordinator's
        heartbeat and the fetches retrying, and the connections open, until the process ends.
        Leaving the group is not waited for beyond ``timeout``."""
        try:
            async with asyncio.timeout(max(timeout, 0)):
                await self.stop()
        except Exception:  # noqa: BLE001 - a timeout or the stop's own error: what it did not get to is closed below
            pass
        coordinator = getattr(self._consumer, "_coordinator", None)
        tasks = [getattr(coordinator, name, None) for name in _COORDINATOR_TASKS]
        tasks.append(getattr(getattr(self._consumer, "_fetcher", None), "_fetch_task", None))
        left = [task for task in tasks if isinstance(task, asyncio.Future) and not task.done()]
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=max(timeout, 0.1))
        await self._finish_close()

    async def _finish_close(self) -> None:
        """The rest of aiokafka's close after its fetcher's close ended early: cancel the fetches it
        did not reach, then close the connections."""
        fetcher = getattr(self._consumer, "_fetcher", None)
        if fetcher is not None:
            left = [task for task in fetcher._pending_tasks if not task.done()]
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left)
        await self._consumer._client.close()

    def _not_subscribed_by_pattern(self) -> bool:
        # aiokafka's pattern subscription keeps an empty topic list meaning "every topic"
        return self._consumer._subscription.subscribed_pattern is None

    # -- positions -------------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign(aio(partitions))

    def assignment(self) -> set[TopicPartition]:
        assigned = self._consumer.assignment()
        cached = self._assignment_seen
        if cached is None or cached[0] is not assigned:
            # aiokafka hands out the same frozenset until the assignment changes: convert it once
            # (the stall watchdog asks every few seconds, over thousands of partitions)
            self._assignment_seen = cached = (assigned, frozenset(ours(tp) for tp in assigned))
        return set(cached[1])

    def seek(self, partition: TopicPartition, offset: int) -> None:
        try:
            self._consumer.seek(AioPartition(partition[0], partition[1]), offset)
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        try:
            await self._consumer.seek_to_beginning(*aio(partitions))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        try:
            await self._consumer.seek_to_end(*aio(partitions))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def position(self, partition: TopicPartition) -> int:
        try:
            return await self._consumer.position(AioPartition(partition[0], partition[1]))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    def _state(self, partition: TopicPartition):
        """aiokafka's assignment state of ``partition`` (None when it is not assigned)."""
        try:
            return self._consumer._subscription.subscription.assignment.state_value(partition)
        except (AttributeError, KeyError):  # no subscription (yet, or any more), or not assigned
            return None

    def fetch_position(self, partition: TopicPartition) -> int | None:
        state = self._state(partition)
        if state is None or not state.has_valid_position:
            return None
        return state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        state = self._state(partition)
        return None if state is None else state.highwater

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        state = self._state(partition)
        return None if state is None else state.lso

    def fetch_states(self, partitions: Iterable[TopicPartition]
                     ) -> list[tuple[TopicPartition, int | None, int | None, int | None]]:
        try:
            states = self._consumer._subscription.subscription.assignment._tp_state
        except AttributeError:  # no subscription (yet, or any more)
            return [(tp, None, None, None) for tp in partitions]
        out = []
        for tp in partitions:
            state = states.get(tp)
            if state is None:
                out.append((tp, None, None, None))
            else:
                out.append((tp, state._position, state.highwater, state.lso))  # _position: None until valid
        return out

    def fetch_state_changes(self) -> set[TopicPartition] | None:
        sessions = self.fetch_sessions
        answered = None if sessions is None else sessions.take_answered()
        return None if answered is None else {TopicPartition(topic, partition) for topic, partition in answered}

    # -- reading ---------------------------------------------------------------------------------
    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list]:
        try:
            fetched = await self._consumer.getmany(*aio(partitions), timeout_ms=timeout_ms, max_records=max_records)
        except AIO_ERRORS as exc:
            raise translate(exc, self._consumer.assignment()) from exc
        return self._ours_of(fetched)

    def _ours_of(self, fetched: dict) -> dict[TopicPartition, list]:
        """What aiokafka's getmany returned, by our partitions, small fetched batches merged."""
        known = self._ours
        out: dict[TopicPartition, list] = {}
        for tp in list(fetched):
            # popped, so each partition's fetched batches are let go of once merged: a poll holds
            # one copy of what it returns, not the fetched and the merged batches side by side
            items = fetched.pop(tp)
            key = known.get(tp)
            if key is None:
                key = known[tp] = ours(tp)
            if self._coalesce_bytes and len(items) > 1 and type(items[0]) is FetchedBatch:
                items = coalesce(items, self._coalesce_bytes)
            out[key] = items
        return out

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        try:
            found = await self._consumer.beginning_offsets(aio(partitions))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        return {ours(tp): offset for tp, offset in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        try:
            found = await self._consumer.end_offsets(aio(partitions))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        return {ours(tp): offset for tp, offset in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        try:
            found = await self._consumer.offsets_for_times(
                {AioPartition(tp[0], tp[1]): int(ts) for tp, ts in timestamps.items()})
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        return {ours(tp): None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp)
                for tp, hit in found.items()}

    async def topics(self) -> set[str]:
        try:
            return set(await self._consumer.topics())
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    def topic_change_signs(self) -> set[str]:
        if self.fetch_errors is None:
            return set()
        taken = self.fetch_errors.take()
        if not taken:
            return set()
        self._sign_nodes.update(taken)
        return set(taken)

    async def topic_ids(self, topics: Iterable[str]) -> dict[str, str] | None:
        if not self._topic_ids_supported:
            return None
        by_node: dict[int | None, list[str]] = {}
        for topic in set(topics):
            by_node.setdefault(self._sign_nodes.get(topic), []).append(topic)
        found: dict[str, str] = {}
        try:
            answers = await asyncio.gather(*(read_topic_ids(self._consumer._client, names, node)
                                             for node, names in by_node.items()))
        except NotImplementedError:  # no broker version with topic IDs in the response
            self._topic_ids_supported = False
            return None
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        for (node, names), answer in zip(by_node.items(), answers):
            found.update(answer)
            if node is not None:
                for name in names:
                    if self._sign_nodes.get(name) == node:
                        del self._sign_nodes[name]
        return found

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*aio(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*aio(partitions))


class RebalanceListener(ABC):
    """What a :class:`GroupConsumer` calls when the group takes partitions away or hands them out."""

    @abstractmethod
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before a rebalance: ``revoked`` are no longer this member's once it returns."""

    @abstractmethod
    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After a rebalance: this member's partitions now."""


class _Rebalances(ConsumerRebalanceListener):
    """aiokafka's listener interface, handing mirrorline partitions to a :class:`RebalanceListener`."""

    def __init__(self, listener: RebalanceListener):
        self._listener = listener

    async def on_partitions_revoked(self, revoked) -> None:
        await self._listener.on_partitions_revoked({ours(tp) for tp in revoked})

    async def on_partitions_assigned(self, assigned) -> None:
        await self._listener.on_partitions_assigned({ours(tp) for tp in assigned})


class GroupConsumer(KafkaConsumer):
    """A member of a consumer group (the runtime's sink tasks): subscribes, is assigned, commits."""

    @classmethod
    def from_settings(cls, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None) -> GroupConsumer:
        """A group member from Java-style settings (``group.id`` required; auto-commit as set)."""
        kwargs, ignored = client_kwargs(props, "consumer")
        if not kwargs.get("group_id"):
            raise ValueError("a group consumer needs group.id")
        return cls(kwargs, ignored, fetch_batches=fetch_batches)

    def subscribe(self, listener: RebalanceListener, topics: Iterable[str] | None = None,
                  pattern: re.Pattern | str | None = None) -> None:
        """Join the group for ``topics`` or the topics matching ``pattern``; ``listener`` hears each rebalance."""
        if pattern is not None:
            self._consumer.subscribe(pattern=pattern, listener=_Rebalances(listener))
        else:
            self._consumer.subscribe(topics=list(topics or ()), listener=_Rebalances(listener))

    async def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset of ``partition`` (None when it has none)."""
        try:
            return await self._consumer.committed(AioPartition(partition[0], partition[1]))
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (the next offset to consume per partition) for the group."""
        try:
            await self._consumer.commit({AioPartition(tp[0], tp[1]): offset for tp, offset in offsets.items()})
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
