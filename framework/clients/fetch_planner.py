"""A cheaper plan for aiokafka's fetch loop, for consumers holding thousands of partitions.

aiokafka's fetch loop decides what to do next (``Fetcher._get_actions_per_node``) every time it
wakes: after each fetch answer, each time the caller drains records, on a seek. It walks every
assigned partition, and for each it calls a handful of methods and a ``log.debug``. A mirror task
holds thousands of partitions while a trickle (MM2's heartbeats: one record a second) wakes the
loop twice per record, and on half of those wake-ups the decision is "nothing to do" (the
node's fetch is still in flight). Measured with one consumer over 4,000 partitions and a record
a second against a real broker: 1.33 CPU-s per 30 s, most of it these plans.

:func:`use_fast_plans` replaces the method on one consumer's fetcher with :func:`plan_actions`,
which reaches the same decisions: it reads the partition states' fields directly, and while no
KIP-392 preferred replica is cached (the common case: every partition is fetched from its
leader) it keeps the partitions grouped by leader until the assignment or the metadata changes,
so a node whose fetch is in flight is skipped whole. The shuffle of each node's partitions is
left out: under an incremental fetch session (:mod:`.fetch_sessions`, which this is only used
with) the request names only the partitions that changed, and the broker itself rotates the
session's partitions for fairness. The plan itself is kept between calls, topic by topic: the
partition states note every change of position or pause (aiokafka changes them only in six
methods of ``TopicPartitionState``, which are wrapped to say so), and a plan makes again only
the entries of the topics that changed. A mirrored heartbeat moves one partition: its plan
costs one topic, not the task's 4,000 partitions (measured: 2.0 ms -> 0.08 ms per plan), and
:mod:`.fetch_sessions` sees every other topic's list unchanged by identity. Partitions with
records waiting for the caller are left out of each plan that finds them waiting, without
touching the kept one. ``tests/unit/test_fetch_planner.py`` checks that both methods
decide alike over every branch, and that no other method of an aiokafka release writes a
position or a pause, so an aiokafka release that changes either is noticed.

One decision is added: **a fetch-ahead bound**. aiokafka fetches for every partition without
records waiting in its buffer, up to ``max.partition.fetch.bytes`` each, so what a task holds
ahead of its caller grows with its partition count. With the sizes of the latest answers (kept
by :mod:`.fetch_sessions`), the plan sends no fetch while the records waiting for the caller
(in partitions that are not paused) add up to ``fetch.max.bytes`` (default 50 MiB, the most one
answer may carry), and otherwise asks for no more than what is left of it. Each drain by the
caller wakes the loop, so fetching resumes as soon as there is room. Beyond Java's consumer,
which bounds only each answer.
"""

from __future__ import annotations

import collections
import functools
import types

from aiokafka.consumer.subscription_state import TopicPartitionState
from aiokafka.protocol.fetch import FetchRequest


def plan_actions(self, assignment):
    """``Fetcher._get_actions_per_node`` (aiokafka 0.14) without its per-partition overheads.

    Returns what the original returns: ``(fetch_requests, awaiting_reset, timeout,
    invalid_metadata, resume_futures)``.
    """
    fetchable = collections.defaultdict(list)
    awaiting_reset = collections.defaultdict(list)
    backoff_by_nodes = collections.defaultdict(list)
    resume_futures = []
    invalid_metadata = False
    records = self._records
    cluster = self._client.cluster
    max_partition_bytes = self._max_partition_fetch_bytes
    #: node -> its fetch request's partitions by topic
    grouped: dict = {}

    if self._preferred_read_replica:
        invalid_metadata = _walk(self, assignment, fetchable, awaiting_reset, backoff_by_nodes, resume_futures)
    else:
        # Without preferred replicas every partition is fetched from its leader: walk the
        # partitions grouped by leader, and skip a node's whole group while its fetch is in flight.
        layout = _groups(self, assignment, cluster._partitions)
        layout.take_changes()
        # partitions with records waiting for the caller: their node's backoff, and left out of this plan only
        waiting: dict = {}
        for tp in records:
            place = layout.place.get(tp)  # (leader, topic) of an assigned partition
            if place is None:
                continue
            backoff = records[tp].calculate_backoff()
            if backoff:
                backoff_by_nodes[place[0]].append(backoff)
            waiting.setdefault(place[0], {}).setdefault(place[1], set()).add(tp.partition)
        in_flight = self._in_flight
        for node_id, group in layout.nodes.items():
            if node_id in in_flight:
                continue
            if node_id is None or node_id == -1:
                if any(tp not in records for members in group.members.values() for tp, _p, _state in members):
                    invalid_metadata = True
                continue
            group.refresh(max_partition_bytes)
            plan = group.plan
            held = waiting.get(node_id)
            if held:
                plan = dict(plan)
                for topic, partitions in held.items():
                    kept = [entry for entry in plan.get(topic, ()) if entry[0] not in partitions]
                    if kept:
                        plan[topic] = kept
                    else:
                        plan.pop(topic, None)
            for topic in group.special:  # some partition awaits a reset or is paused
                skip = held.get(topic, ()) if held else ()
                for tp, p, state in group.members[topic]:
                    if p in skip:
                        continue
                    if state._position is None:
                        awaiting_reset[node_id].append(tp)
                    elif state._paused:
                        resume_futures.append(state._resume_fut)
            grouped[node_id] = plan

    for node_id, partition_data in fetchable.items():
        by_topics = grouped[node_id] = collections.defaultdict(list)
        for tp, position in partition_data:
            by_topics[tp.topic].append((tp.partition, position, max_partition_bytes))
    fetch_requests = []
    max_bytes = self._fetch_max_bytes
    fetched_bytes = getattr(self, "_mirrorline_fetched_bytes", None)
    if fetched_bytes is not None and records:
        # Prefetch bound: records fetched and not yet handed over stay under fetch.max.bytes.
        # Those of paused partitions do not count: the caller cannot drain them, and fetching
        # for the others must not wait for a resume.
        states = assignment._tp_state
        buffered = 0
        for tp in records:
            state = states.get(tp)
            if state is not None and not state._paused:
                buffered += fetched_bytes.get(tp, 0)
        if buffered >= max_bytes:
            grouped = {}  # fetch again once the caller has drained some (that wakes the loop)
        else:
            max_bytes -= buffered
    for node_id, by_topics in grouped.items():
        if not by_topics or node_id in backoff_by_nodes or node_id in awaiting_reset:
            continue
        fetch_requests.append((node_id, FetchRequest(
            self._fetch_max_wait_ms, self._fetch_min_bytes, max_bytes, self._isolation_level,
            list(by_topics.items()), rack_id=self._client_rack or "")))

    timeout = min(map(max, backoff_by_nodes.values())) if backoff_by_nodes else self._fetcher_timeout
    return fetch_requests, awaiting_reset, timeout, invalid_metadata, resume_futures


def _leader(by_topic: dict, tp):
    """``ClusterMetadata.leader_for_partition`` over its partitions map."""
    partitions = by_topic.get(tp.topic)
    meta = None if partitions is None else partitions.get(tp.partition)
    return None if meta is None else meta.leader


#: TopicPartitionState methods that change what a plan reads (position, paused): all of them, in aiokafka 0.14
_TRACKED = ("await_reset", "consumed_to", "reset_to", "seek", "pause", "resume")
_TRACKING_MARKER = "_mirrorline_tracks_changes"


def track_state_changes() -> None:
    """Make every TopicPartitionState note itself in its assignment's ``_mirrorline_changed`` set
    (when the set exists: only assignments a fast plan has laid out) whenever its position or
    pause changes; idempotent."""
    for name in _TRACKED:
        original = getattr(TopicPartitionState, name)
        if getattr(original, _TRACKING_MARKER, False):
            continue

        def tracked(self, *args, _original=original, **kwargs):
            result = _original(self, *args, **kwargs)
            changed = getattr(self._assignment, "_mirrorline_changed", None)
            if changed is not None:
                changed.add(self)
            return result

        functools.update_wrapper(tracked, original)
        setattr(tracked, _TRACKING_MARKER, True)
        setattr(TopicPartitionState, name, tracked)


class _NodeGroup:
    """The assigned partitions led by one node, and their fetch plan, kept up to date topic by topic."""

    __slots__ = ("members", "plan", "special", "stale")

    def __init__(self, members: dict):
        #: topic -> ``[(tp, partition, state), ...]``, in the same order every plan
        self.members = members
        #: topic -> ``[(partition, position, max bytes), ...]`` of the partitions with a position and
        #: not paused, as if nothing were buffered; replaced topic by topic, never changed in place
        self.plan: dict = {}
        #: topics with a partition that awaits a reset or is paused
        self.special: set = set()
        #: topics whose entries must be made again
        self.stale: set = set(members)

    def refresh(self, max_partition_bytes: int) -> None:
        """Make the entries of the stale topics again (the plan dict is new, the lists of the
        other topics stay the same objects: the fetch session compares them by identity)."""
        if not self.stale:
            return
        plan = dict(self.plan)
        for topic in self.stale:
            members = self.members[topic]
            parts = [(p, state._position, max_partition_bytes) for _tp, p, state in members
                     if state._position is not None and not state._paused]
            if parts:
                plan[topic] = parts
            else:
                plan.pop(topic, None)
            if len(parts) == len(members):
                self.special.discard(topic)
            else:
                self.special.add(topic)
        self.plan = plan
        self.stale.clear()


class _Layout:
    """One assignment's partitions by leader (:class:`_NodeGroup`) and where each partition sits."""

    __slots__ = ("nodes", "place", "_by_state", "_changed")

    def __init__(self, assignment, by_topic: dict):
        grouped: dict = {}
        self.place: dict = {}
        self._by_state: dict = {}
        for tp, state in assignment._tp_state.items():
            node_id = _leader(by_topic, tp)
            grouped.setdefault(node_id, {}).setdefault(tp.topic, []).append((tp, tp.partition, state))
            self.place[tp] = self._by_state[state] = (node_id, tp.topic)
        self.nodes = {node_id: _NodeGroup(topics) for node_id, topics in grouped.items()}
        track_state_changes()
        self._changed = assignment._mirrorline_changed = set()

    def take_changes(self) -> None:
        """Mark the topics of the partitions whose position or pause changed since the last plan."""
        changed = self._changed
        if not changed:
            return
        for state in changed:
            place = self._by_state.get(state)
            if place is not None:
                self.nodes[place[0]].stale.add(place[1])
        changed.clear()


def _groups(fetcher, assignment, by_topic: dict) -> _Layout:
    """The assignment's :class:`_Layout`, kept until the assignment or the cluster metadata
    changes (aiokafka replaces its partitions map on every update)."""
    cached = getattr(fetcher, "_mirrorline_groups", None)
    if cached is not None and cached[0] is assignment and cached[1] is by_topic:
        return cached[2]
    layout = _Layout(assignment, by_topic)
    fetcher._mirrorline_groups = (assignment, by_topic, layout)
    return layout


def _walk(self, assignment, fetchable, awaiting_reset, backoff_by_nodes, resume_futures) -> bool:
    """The original's per-partition walk (some partitions have a preferred read replica); returns
    whether some partition's leader is unknown."""
    invalid_metadata = False
    records = self._records
    in_flight = self._in_flight
    select_replica = self._select_read_replica
    leader_for = self._client.cluster.leader_for_partition
    for tp, tp_state in assignment._tp_state.items():
        node_id = select_replica(tp)
        if records and tp in records:
            backoff = records[tp].calculate_backoff()
            if backoff:
                backoff_by_nodes[node_id].append(backoff)
        elif node_id in in_flight:
            continue
        elif node_id is None or node_id == -1:
            invalid_metadata = True
        elif tp_state._position is None:
            # ListOffsets must go to the leader (KIP-392 lets only Fetch go to a follower)
            leader_id = leader_for(tp)
            if leader_id is None or leader_id == -1:
                invalid_metadata = True
            else:
                awaiting_reset[leader_id].append(tp)
        elif tp_state._paused:
            resume_futures.append(tp_state._resume_fut)
        else:
            fetchable[node_id].append((tp, tp_state._position))
    return invalid_metadata


def use_fast_plans(consumer, fetched_bytes: dict | None = None) -> bool:
    """Plan ``consumer``'s fetches with :func:`plan_actions`; False (nothing changed) for an object
    without aiokafka's fetcher, or one whose fetcher lacks the fields the plan reads.

    With ``fetched_bytes`` (partition -> size of the records its latest answer carried, kept by
    :mod:`.fetch_sessions`), the plan bounds what is fetched ahead of the caller to
    ``fetch.max.bytes``."""
    fetcher = getattr(consumer, "_fetcher", None)
    needed = ("_records", "_in_flight", "_preferred_read_replica", "_client", "_max_partition_fetch_bytes",
              "_fetch_max_wait_ms", "_fetch_min_bytes", "_fetch_max_bytes", "_isolation_level",
              "_fetcher_timeout", "_get_actions_per_node")
    if fetcher is None or not all(hasattr(fetcher, name) for name in needed):
        return False
    fetcher._get_actions_per_node = types.MethodType(plan_actions, fetcher)
    fetcher._mirrorline_fetched_bytes = fetched_bytes
    return True
