"""Incremental fetch sessions (KIP-227) for an AIOKafkaConsumer, which sends only full fetches.

aiokafka lists every assigned partition in every Fetch request, and the broker answers for every
one, data or not. A mirror task holds thousands of mostly quiet partitions, so each fetch cost
O(partitions) to encode, for the broker to answer and to decode, several times a second while
nothing moves: profiled at 1,000 topics x 2 partitions, the fetch loop was three quarters of an
idle mirror's CPU. Java's consumer (so MM2) has used fetch sessions since Kafka 1.1: after one
full fetch, a request names only the partitions whose fetch offset changed (and those dropped,
as "forgotten"), and a response only the partitions with records, an error or a new high
watermark / log start offset.

:func:`use_fetch_sessions` puts that under one consumer, at its client's ``send``: aiokafka's
fetcher still builds its full request and reads the response as before (partitions missing from
a response simply had nothing new, which is what the broker means by leaving them out), while on
the wire each broker node gets one session:

- the first request to a node (and any after a failure) is a full one that opens a session
  (``session_id`` 0, ``epoch`` 0); the response carries the session id (0: the broker keeps no
  session, so the next request is full again);
- later requests carry the session id, the next epoch, the partitions whose fetch offset or
  size limit differs from what the session holds, and the ones no longer fetched as forgotten;
- any error (connection, timeout, a session the broker no longer knows, a wrong epoch) closes
  the session on our side; on a session error the same fetch is sent again at once as a full
  one, so the fetcher never sees it.

The broker fetches every partition of the session at its remembered offset, so a partition left
out of a request because its offset did not change is still read: nothing is skipped. Brokers
older than Fetch v7 get aiokafka's full requests unchanged.

While records flow from a node (its last fetch brought records and was answered within
:data:`FLOWING_ANSWER_S`), the next fetch to it asks the broker to wait for
:data:`FLOWING_MIN_BYTES` or :data:`FLOWING_MAX_WAIT_MS`, whichever comes first; once a fetch
comes back empty, or only after a longer wait (a heartbeat a second), the consumer's own
``fetch.min.bytes`` and ``fetch.max.wait.ms`` apply again (1 byte, and up to 5 s for a mirror
task), so the first record after a quiet spell is answered at once. With ``fetch.min.bytes`` = 1
throughout, a trickle of records was fetched nearly one batch at a time: at 1 MB/s of 1 KB
records a task spent 0.67 of a core on hundreds of fetch and produce round trips a second.
Waiting 25 ms under load gathers them (1 MiB arrives sooner only from about 40 MB/s per task).
The gathering size was 128 KiB until 2026-11-29: from about 5 MB/s per task that arrived before
the wait was up, so at 15 MB/s per task a fetch went out every ~9 ms and mirroring 30 MB/s over
two tasks cost as much CPU as Java MM2 (68.7 against 68.1 CPU-s in 150 s); gathering up to 1 MiB
took it to 39.9 for a p99 still 0.55x MM2's (docs/performance.md). Either way a record waits at
most the gather wait on the source. The wait is the consumer's to choose
(``gather_max_wait_ms``): shorter lowers the latency of a trickle and costs round trips; 0
turns gathering off (``fetch.min.bytes`` = 1 throughout, as Java's consumer).

The wait also follows the flow's rate (since 2026-12-01): while the consumer's records come in
slower than :data:`FAST_FLOW_BYTES_PER_S`, a flowing fetch waits only the *trickle* wait
(``gather_trickle_wait_ms``, :data:`TRICKLE_MAX_WAIT_MS` by default, never longer than the gather
wait); from that rate on it waits the whole gather wait, and it goes back to the trickle wait once
the rate falls under :data:`TRICKLE_BYTES_PER_S` (:class:`FlowRate`). Measured side by side with
MM2, a 5-10 ms wait had the lower latency at 1 MB/s, where round trips are cheap in total, and the
25-ms wait the lower tail at 10 and 30 MB/s, where a short wait's extra round trips carry a batch
per partition each and their CPU showed in the tail (docs/performance.md).

A partition that comes back into a session after more than :data:`GAP_SIGN_S` out of it, or
fetched again after no request went to its node for that long (its fetched records waited for
the caller), is reported to the consumer's
:class:`~.fetch_errors.FetchErrorWatch` as a sign that its topic may have changed meanwhile: a
topic deleted and re-created while nobody fetched it answers no error once it has grown past the
old position. The check costs nothing for partitions that stay in the session.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer
from aiokafka.protocol.fetch import FetchRequest

from mirrorline.clients.fetch_errors import FetchErrorWatch

log = logging.getLogger(__name__)

_FETCH_API_KEY = 1
_SESSION_VERSION = 7
_SESSION_ERRORS = {70, 71}  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
_MAX_EPOCH = 2 ** 31 - 1
#: How long a partition may stay out of its fetch session before its return counts as a topic-change sign.
GAP_SIGN_S = 0.25
#: While records flow from a node: the least a fetch asks the broker to gather, and the longest it
#: waits by default (a consumer may choose another wait: :class:`FetchSessions`).
FLOWING_MIN_BYTES = 1024 * 1024
FLOWING_MAX_WAIT_MS = 25
#: A fetch answered with records within this long means records are flowing.
FLOWING_ANSWER_S = 0.1
#: While records flow slower than :data:`FAST_FLOW_BYTES_PER_S`: the longest a fetch waits by default.
TRICKLE_MAX_WAIT_MS = 10
#: A consumer whose records come in at this rate or faster (over one :data:`RATE_WINDOW_S`) gathers
#: for the whole gather wait ...
FAST_FLOW_BYTES_PER_S = 2 * 1024 * 1024
#: ... until its rate falls under this one (the gap keeps a flow near the bound from flapping).
TRICKLE_BYTES_PER_S = 1024 * 1024
#: How long the records' rate is summed over before it is judged.
RATE_WINDOW_S = 0.5

Key = tuple[str, int]  # (topic, partition): a plain tuple, cheaper to make than a TopicPartition
#: one topic's partitions in a request, as aiokafka lays them out: (partition, fetch offset, max bytes)
Partitions = list[tuple[int, int, int]]
#: a request's partitions by topic
Layout = dict[str, Partitions]


@dataclass
class _Session:
    """What one node's session holds, as the broker sees it after our last successful request."""

    session_id: int = 0
    epoch: int = 0
    #: the partitions held, by topic, as the request that put them there listed them
    topics: Layout = field(default_factory=dict)
    #: when the last answer came (time.monotonic()): the partitions held were fetched until then
    answered_at: float = 0.0

    def reset(self) -> None:
        self.session_id, self.epoch, self.topics = 0, 0, {}


class _SessionFetchRequest(FetchRequest):
    """aiokafka's FetchRequest with session fields, the changed partitions and the forgotten ones."""

    def __init__(self, full: FetchRequest, session_id: int, epoch: int,
                 changed: list[tuple[str, list[tuple[int, int, int]]]], forgotten: list[tuple[str, list[int]]],
                 gather_ms: int = 0):
        max_wait, min_bytes = full._max_wait_ms, full._min_bytes
        if gather_ms > 0:  # records flow: gather up to FLOWING_MIN_BYTES for at most gather_ms
            max_wait = min(max_wait, gather_ms)
            min_bytes = max(min_bytes, min(FLOWING_MIN_BYTES, full._max_bytes))
        super().__init__(max_wait, min_bytes, full._max_bytes, full._isolation_level, changed, full._rack_id)
        self.full = full
        self.session = (session_id, epoch)
        self.forgotten = forgotten
        self.built_version: int | None = None

    def build(self, request_struct_class):
        self.built_version = request_struct_class.API_VERSION
        if self.built_version < _SESSION_VERSION:
            return self.full.build(request_struct_class)
        struct = super().build(request_struct_class)
        # FetchRequest.build writes a sessionless fetch (0, -1, no forgotten topics): put ours in
        struct.session_id, struct.session_epoch = self.session
        struct.forgotten_topics_data = self.forgotten
        return struct


class FlowRate:
    """Whether a consumer's records come in fast: the bytes of records answered, summed over windows
    of :data:`RATE_WINDOW_S`; a window at :data:`FAST_FLOW_BYTES_PER_S` or more makes the flow
    fast, one under :data:`TRICKLE_BYTES_PER_S` makes it a trickle again."""

    def __init__(self) -> None:
        #: whether the last window judged the flow fast
        self.fast = False
        self._window_start: float | None = None
        self._bytes = 0

    def note(self, size: int, now: float) -> None:
        """``size`` bytes of records were answered at ``now`` (time.monotonic())."""
        if self._window_start is None:
            self._window_start = now
        self._bytes += size
        elapsed = now - self._window_start
        if elapsed < RATE_WINDOW_S:
            return
        rate = self._bytes / elapsed
        if self.fast and rate < TRICKLE_BYTES_PER_S:
            self.fast = False
            log.debug("Records come in at %.0f B/s: fetches gather for the trickle wait", rate)
        elif not self.fast and rate >= FAST_FLOW_BYTES_PER_S:
            self.fast = True
            log.debug("Records come in at %.0f B/s: fetches gather for the whole gather wait", rate)
        self._window_start, self._bytes = now, 0


class FetchSessions:
    """The sessions of one consumer, one per broker node (see the module docstring).

    ``gather_max_wait_ms``: while records flow fast from a node, how long its fetches ask the
    broker to wait for :data:`FLOWING_MIN_BYTES`; 0 never asks for more than the consumer's own
    settings. ``gather_trickle_wait_ms``: the same while the consumer's records come in slower than
    :data:`FAST_FLOW_BYTES_PER_S` (:class:`FlowRate`); never longer than ``gather_max_wait_ms``.
    """

    def __init__(self, watch: FetchErrorWatch | None = None, gather_max_wait_ms: int = FLOWING_MAX_WAIT_MS,
                 gather_trickle_wait_ms: int = TRICKLE_MAX_WAIT_MS) -> None:
        if gather_max_wait_ms < 0:
            raise ValueError(f"gather_max_wait_ms must be 0 or more, not {gather_max_wait_ms}")
        if gather_trickle_wait_ms < 0:
            raise ValueError(f"gather_trickle_wait_ms must be 0 or more, not {gather_trickle_wait_ms}")
        self._sessions: dict[int, _Session] = {}
        self._watch = watch
        self.gather_max_wait_ms = gather_max_wait_ms
        self.gather_trickle_wait_ms = min(gather_trickle_wait_ms, gather_max_wait_ms)
        #: the rate of the records answered, which picks between the two waits
        self.rate = FlowRate()
        #: partition -> when it was last left out of (forgotten by) a session
        self._left: dict[Key, float] = {}
        #: full / incremental requests sent, partitions named in them, session resets, fetches sent
        #: while records flowed (for tests and logs)
        self.counters: Counter = Counter()
        #: nodes whose last answer carried records
        self._flowing: set[int] = set()
        #: partition -> size of the records its latest answer carried
        self.fetched_bytes: dict[Key, int] = {}
        #: partitions answered since the last :meth:`take_answered`; None once an answer was not
        #: read partition by partition (a broker without sessions answers for every partition)
        self._answered: set[Key] | None = set()

    def take_answered(self) -> set[Key] | None:
        """The partitions answered since the last call, whose high watermark, last stable offset or
        fetch position an answer may have moved (an answer under a session names only partitions with
        records, an error or a new watermark); None when that is not known since the last call."""
        answered, self._answered = self._answered, set()
        return answered

    def request_for(self, node_id: int, full: FetchRequest) -> tuple[_SessionFetchRequest, Layout]:
        """The request to send instead of ``full`` to ``node_id``, and the partitions (by topic) it
        leaves the session with.

        The diff goes topic by topic: aiokafka's plan lists a topic's partitions in the same order
        from one fetch to the next, so a topic whose list equals the one the session holds (one
        comparison in C) is left out without looking at its partitions. Idle, that is every topic.
        """
        session = self._sessions.setdefault(node_id, _Session())
        now = time.monotonic()
        wanted: Layout = dict(full.topics)
        if session.session_id == 0:  # open a session: a full request at epoch 0
            self.counters["full"] += 1
            self.counters["partitions_sent"] += sum(len(partitions) for partitions in wanted.values())
            if self._left:
                for topic, partitions in wanted.items():
                    for p, _offset, _max_bytes in partitions:
                        self._returned((topic, p), node_id, now)
            return _SessionFetchRequest(full, 0, 0, full.topics, [], self._flow(node_id)), wanted
        held = session.topics
        changed: list[tuple[str, Partitions]] = []
        forgotten: list[tuple[str, list[int]]] = []
        returned: list[Key] = []
        left = self._left
        sent = 0
        for topic, partitions in wanted.items():
            before = held.get(topic)
            if before == partitions:
                continue
            if before is None:  # a topic new to the session: all of it
                changed.append((topic, partitions))
                sent += len(partitions)
                if left:
                    returned.extend((topic, p) for p, _offset, _max_bytes in partitions)
                continue
            entries = {p: (p, offset, max_bytes) for p, offset, max_bytes in before}
            moved = []
            for entry in partitions:
                kept = entries.pop(entry[0], None)
                if kept != entry:
                    moved.append(entry)
                    if kept is None and left:
                        returned.append((topic, entry[0]))
            if moved:
                changed.append((topic, moved))
                sent += len(moved)
            if entries:  # held before, not fetched now
                forgotten.append((topic, list(entries)))
        if now - session.answered_at > GAP_SIGN_S and self._watch is not None:
            # no request to this node for a while (every partition's records waited for the caller):
            # none of its partitions was fetched meanwhile
            for topic in wanted.keys() & held.keys():
                self._watch.sign(topic, node_id)
        for key in returned:
            self._returned(key, node_id, now)
        for topic in held.keys() - wanted.keys():
            forgotten.append((topic, [p for p, _offset, _max_bytes in held[topic]]))
        for topic, partitions in forgotten:
            for p in partitions:
                left[(topic, p)] = now
        self.counters["incremental"] += 1
        self.counters["partitions_sent"] += sent
        epoch = session.epoch + 1 if session.epoch < _MAX_EPOCH else 1
        return _SessionFetchRequest(full, session.session_id, epoch, changed, forgotten,
                                    self._flow(node_id)), wanted

    def _flow(self, node_id: int) -> int:
        """How long the next fetch to ``node_id`` gathers while records flow (the gather wait if they
        flow fast, else the trickle wait), else 0."""
        if self.gather_max_wait_ms and node_id in self._flowing:
            self.counters["flowing"] += 1
            if self.rate.fast:
                self.counters["flowing_fast"] += 1
                return self.gather_max_wait_ms
            return self.gather_trickle_wait_ms
        return 0

    def _note_records(self, node_id: int, response, waited_s: float) -> None:
        """Whether ``response`` carried records, answered within FLOWING_ANSWER_S, decides whether the
        next fetch to ``node_id`` gathers; their size goes to the rate, which decides for how long."""
        size = 0
        for _topic, partitions in getattr(response, "topics", ()):
            for partition in partitions:
                records = partition[-1]  # the records (message set) of one partition
                if records:
                    size += len(records)
        self.rate.note(size, time.monotonic())
        if size and waited_s < FLOWING_ANSWER_S:
            self._flowing.add(node_id)
        else:
            self._flowing.discard(node_id)

    def _returned(self, key: Key, node_id: int, now: float) -> None:
        """``key`` is fetched again: a sign for its topic if it was out of every session for long."""
        since = self._left.pop(key, None)
        if since is not None and now - since > GAP_SIGN_S and self._watch is not None:
            self._watch.sign(key[0], node_id)

    def succeeded(self, node_id: int, request: _SessionFetchRequest, response, wanted: Layout,
                  waited_s: float = 0.0) -> bool:
        """Record the broker's answer, ``waited_s`` after the request went out; False when it refused
        the session (send the fetch again, full)."""
        session = self._sessions[node_id]
        self._note_records(node_id, response, waited_s)
        if request.built_version is None or request.built_version < _SESSION_VERSION:
            session.reset()  # no sessions on this broker: aiokafka's full requests went out as they were
            self._answered = None
            return True
        error = getattr(response, "error_code", 0)
        if error in _SESSION_ERRORS:
            log.debug("Fetch session %s on node %s refused (error %s); opening a new one",
                      session.session_id, node_id, error)
            self.counters["resets"] += 1
            session.reset()
            return False
        if error:  # another top-level error: start over with a full request next time
            self.counters["resets"] += 1
            session.reset()
            return True
        session.answered_at = time.monotonic()
        session_id, epoch = request.session
        if session_id == 0:
            session.session_id, session.epoch = response.session_id, 0
        else:
            session.epoch = epoch
        session.topics = wanted if session.session_id else {}
        return True

    def failed(self, node_id: int) -> None:
        """The request failed on the way (connection, timeout): the broker's state is unknown, start over."""
        self._flowing.discard(node_id)
        session = self._sessions.get(node_id)
        if session is not None and session.session_id:
            self.counters["resets"] += 1
        if session is not None:
            session.reset()


def answered_only(request: FetchRequest, response, wanted: Layout,
                  fetched_bytes: dict[Key, int] | None = None, answered: set[Key] | None = None) -> None:
    """Narrow aiokafka's own ``request`` to the partitions ``response`` answers for.

    aiokafka reads the answer of a fetch against its request: it maps every partition the request
    named to its fetch offset (one ``TopicPartition`` each) before it looks at the answer. Under a
    session the answer holds only the partitions with something new, so at thousands of partitions
    that map was most of the cost of an idle answer. The request has been sent by now; aiokafka
    0.14 reads nothing else of it afterwards. A partition answered but unknown to ``wanted``
    (which the broker does not do) leaves the request as it was.

    ``fetched_bytes`` gets the size of each answered partition's records (the fetch plan's
    prefetch bound reads it: :mod:`.fetch_planner`); ``answered`` gets each answered partition.
    """
    narrowed = []
    complete = True
    for topic, partitions in response.topics:
        entries = []
        asked = {p: (p, offset, max_bytes) for p, offset, max_bytes in wanted.get(topic, ())}
        for partition in partitions:
            if fetched_bytes is not None:
                fetched_bytes[(topic, partition[0])] = len(partition[-1] or b"")
            if answered is not None:
                answered.add((topic, partition[0]))
            entry = asked.get(partition[0])
            if entry is None:
                complete = False
            else:
                entries.append(entry)
        narrowed.append((topic, entries))
    if complete:
        request._topics = narrowed


def use_fetch_sessions(consumer: AIOKafkaConsumer, watch: FetchErrorWatch | None = None,
                       gather_max_wait_ms: int = FLOWING_MAX_WAIT_MS,
                       gather_trickle_wait_ms: int = TRICKLE_MAX_WAIT_MS) -> FetchSessions | None:
    """Make a started consumer's fetches incremental (module docstring); returns its sessions, or
    None for an object without aiokafka's client and fetcher (a test's stand-in consumer). Partitions
    back after a gap are reported to ``watch``; the waits as :class:`FetchSessions`."""
    client = getattr(consumer, "_client", None)
    if client is None or getattr(consumer, "_fetcher", None) is None:
        return None
    sessions = FetchSessions(watch, gather_max_wait_ms, gather_trickle_wait_ms)
    original_send = client.send

    async def send(node_id, request, **kwargs):
        if getattr(request, "API_KEY", None) != _FETCH_API_KEY or not isinstance(request, FetchRequest):
            return await original_send(node_id, request, **kwargs)
        for _ in range(2):  # a refused session: once more, as a full request opening a new one
            session_request, wanted = sessions.request_for(node_id, request)
            sent_at = time.monotonic()
            try:
                response = await original_send(node_id, session_request, **kwargs)
            except BaseException:
                sessions.failed(node_id)
                raise
            if sessions.succeeded(node_id, session_request, response, wanted, time.monotonic() - sent_at):
                if session_request.built_version is not None and session_request.built_version >= _SESSION_VERSION:
                    answered_only(request, response, wanted, sessions.fetched_bytes, sessions._answered)
                return response
        return response

    client.send = send
    return sessions
