"""Contiguous runs of offset syncs: exact consumer-offset translation beyond MM2's "+1" rule.

Why adjacent syncs can prove a 1:1 mapping
------------------------------------------
mirrorline's offset-sync writer (``connectors/source_mirror/offset_syncs.py``) makes a sync due
for a record when it is the first of the task's lifetime, the downstream offset ran
``offset.lag.max`` past the last sync, the upstream offset did not step by exactly 1, or the
downstream offset went backwards. A due sync of the first, third or fourth kind is one the chain
*needs* and is always written; one due only to ``offset.lag.max`` (or the latest position promoted
at a task commit, whose step was 1 as well) may be replaced by a newer sync of its partition while
it waits, as MM2 coalesces. So for two syncs ``p`` then ``s`` of one partition that are *adjacent*
in the offset-syncs topic, every record acknowledged after ``p`` and before ``s`` stepped upstream
by exactly 1, and every record up to ``s`` stepped downstream by at least 1; only the step into
``s`` itself may skip upstream (that is why ``s`` was due). With ``n`` records after ``p`` up to
``s``: ``s.u - p.u = n - 1 + skip`` and ``s.d - p.d = n + extra``, where ``extra`` counts records
on the remote partition that are not this mirror's copies. If ``s.u - p.u == s.d - p.d > 0`` then
``skip == extra + 1``; on a remote partition the mirror alone writes (``extra == 0``) every step
was 1 and upstream ``p.u..s.u`` maps one to one onto ``p.d..s.d``. Chaining such pairs gives a
:class:`Run` ``(u0, d0, u_end)`` that translates any ``u0 <= U <= u_end`` to ``d0 + (U - u0)``,
the downstream offset of the record a consumer at ``U`` reads next. With foreign records
(``extra > 0``) that answer is still never ahead of the truth, since each copy sits at or after
its translated offset and a position inside the final skip lands before ``s.d``: a consumer
re-reads at most ``extra`` records and skips none.

This rests on the writer losing no sync the chain needs. One lost before it was written (a crash
with syncs queued or in flight, a failed send, the writer's coalescing past 10,000 queued, Java
MM2's writer, which coalesces every kind when 10 are in flight) cannot be seen in MM2's format, and
a lost skip matched by records re-sent after a restart can make two syncs look contiguous. So
mirrorline's writer numbers the syncs it sends per partition and says so in record headers
(:func:`chain_headers`; MM2's readers ignore headers); dropping a needed sync skips a number. The
checkpoint task's reader joins two syncs only when they carry the same writer id and consecutive
numbers (or the restart rule below): a lost sync leaves a hole in the numbers, and syncs without
the headers (Java MM2's) never join, so they get MM2's rule.

Restarted tasks
---------------
A task stopping (rebalance, re-split, shutdown, failure) stores its source offsets, then flushes
its syncs, the latest position of each partition included, so its last sync of a partition is at
the source offset it stored, ``o``. The next task (a new writer) resumes at ``o + 1`` and puts
``o`` on its first sync ``s`` of that partition (header ``mirrorline.sync.resumes-after``, only on
number 0). The reader joins ``s`` to the partition's previous sync ``p`` in the topic when
``p.u == o``, whichever writer wrote ``p``. That is safe for the same reason as above, with
``n = 1``: ``p`` says the copy of ``o`` is at ``p.d``; everything the new task copies comes after
``o`` and ``s`` is its first copy, so upstream offsets between ``o`` and ``s.u`` hold nothing the
task was given (transaction markers, aborted or filtered records); any record on the remote
partition between ``p.d`` and ``s.d`` is an *extra* (the old task's copies of records after ``o``
it had not stored, which the new task copies again, or someone else's). Hence a consumer
translated through ``p -> s`` re-reads at most those extras and skips nothing, and with none
(a clean stop) the join is exact. Every way this can fail makes the rule refuse, not lie: the
final flush failed or was cut short (``p.u < o``: no join), the old task wrote syncs past ``o``
(``p.u > o``: no join, and ``s`` is an upstream rewind), the new task moved off ``o + 1`` (records
lost to retention, topic re-created: the writer sends no resumes header), or ``s`` itself was
dropped (the first sync sent is then number 1, which joins nothing).

Adjacency is all that matters, not how the topic is read: the first sync of a read starts a run,
and every later sync either extends the open run or closes it. So runs can be built from every sync
of the start-up read, even where MM2's slots keep only the last one
(``initialization_must_read_to_end``): a restarted checkpoint task re-reads the whole topic and
rebuilds the same runs. The caller must say when adjacency is *not* proven (a gap in the
offset-syncs topic's own offsets: compaction removed records, or a record could not be decoded) and
the next sync of every partition then starts afresh instead of joining across the gap.

What breaks or removes runs
---------------------------
* not adjacent, not contiguous (``s.u - p.u != s.d - p.d``) or not moving (``s.u == p.u``): the
  open run is closed; ``s`` may start the next one;
* upstream rewind (``s.u < p.u``: topic recreated or truncated upstream, or a task re-sending
  records after a restart): every run of the partition is dropped, as ``OffsetSyncStore`` drops its
  whole history;
* downstream rewind (``s.d < p.d``: the remote topic was truncated or recreated): runs reaching
  ``s.d`` or beyond describe records that may no longer be there and are dropped;
* more than ``max_runs`` runs: the oldest are dropped.

Runs are searched newest first, as MM2 searches its slots, so the latest copy of the history wins
when two runs overlap. The module is pure: no Kafka, no asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .formats import OffsetSync

__all__ = ["MAX_RUNS", "Chain", "PartitionRuns", "Run", "UNCHAINED", "SYNC_RESUMES_HEADER", "SYNC_SEQUENCE_HEADER",
           "SYNC_WRITER_HEADER", "chain_headers", "chain_of", "joins"]

#: Record headers mirrorline's offset-sync writer adds (MM2's readers ignore headers): the writer's
#: random id and, per upstream partition, the number of the sync among those it sent. Two syncs
#: are adjacent *as written* only when they come from one writer with consecutive numbers, so a
#: sync lost before it reached the topic (a crash, a failed send, coalescing a sync the chain
#: needs) breaks the chain.
SYNC_WRITER_HEADER = "mirrorline.sync.writer"
SYNC_SEQUENCE_HEADER = "mirrorline.sync.sequence"
#: On a writer's first sync (number 0) of a partition only: the source offset the task resumed
#: after (its stored source offset), when it resumed from one and has not moved since. See
#: "Restarted tasks" in the module docstring.
SYNC_RESUMES_HEADER = "mirrorline.sync.resumes-after"


class Chain(NamedTuple):
    """Where an offset-sync record stands in its writer's chain (from its headers)."""

    writer: bytes
    sequence: int
    resumes_after: int | None = None


#: The chain of a sync without those headers (Java MM2's, or an older mirrorline's): never adjacent.
UNCHAINED = Chain(b"", -1)


def chain_headers(writer: bytes, sequence: int, resumes_after: int | None = None) -> list[tuple[str, bytes]]:
    """The headers a writer puts on its ``sequence``-th sync of a partition."""
    headers = [(SYNC_WRITER_HEADER, writer), (SYNC_SEQUENCE_HEADER, str(sequence).encode())]
    if resumes_after is not None and sequence == 0:
        headers.append((SYNC_RESUMES_HEADER, str(resumes_after).encode()))
    return headers


def chain_of(headers) -> Chain:
    """The :class:`Chain` of an offset-sync record from its headers, or :data:`UNCHAINED`."""
    found = dict(headers or ())
    writer, sequence = found.get(SYNC_WRITER_HEADER), found.get(SYNC_SEQUENCE_HEADER)
    if not writer or sequence is None:
        return UNCHAINED
    try:
        number = int(sequence)
        resumes = found.get(SYNC_RESUMES_HEADER)
        resumes_after = int(resumes) if resumes is not None and number == 0 else None
    except ValueError:
        return UNCHAINED
    if number < 0:
        return UNCHAINED
    return Chain(bytes(writer), number, resumes_after)


def joins(chain: Chain, previous_chain: Chain | None, previous_sync: OffsetSync | None) -> bool:
    """Whether a sync with ``chain`` may join the partition's previous sync in the topic.

    Either the same writer's next number, or a restarted task's first sync resuming after exactly
    the previous sync's upstream offset (module docstring, "Restarted tasks").
    """
    if chain.sequence < 0 or previous_sync is None:
        return False
    if chain.resumes_after is not None:
        return previous_sync.upstream_offset == chain.resumes_after
    return (previous_chain is not None and previous_chain.sequence >= 0 and previous_chain.writer == chain.writer
            and previous_chain.sequence + 1 == chain.sequence)

MAX_RUNS = 64
"""Default number of runs kept per upstream topic-partition (the newest)."""


@dataclass(frozen=True)
class Run:
    """Upstream offsets ``upstream_start..upstream_end`` (inclusive) mapped one to one from ``downstream_start``."""

    upstream_start: int
    downstream_start: int
    upstream_end: int

    @property
    def downstream_end(self) -> int:
        """Downstream offset of ``upstream_end``."""
        return self.downstream_start + (self.upstream_end - self.upstream_start)

    def covers(self, upstream: int) -> bool:
        """Whether ``upstream`` lies inside the run (both ends included)."""
        return self.upstream_start <= upstream <= self.upstream_end

    def translate(self, upstream: int) -> int:
        """Exact downstream offset of ``upstream`` (which the run must cover)."""
        return self.downstream_start + (upstream - self.upstream_start)


@dataclass
class PartitionRuns:
    """The runs of one upstream topic-partition, newest first, fed its syncs in topic order."""

    max_runs: int = MAX_RUNS
    runs: list[Run] = field(default_factory=list)
    last: OffsetSync | None = None
    open: bool = False  # runs[0] ends at `last` and may be extended by the next adjacent sync

    def add(self, sync: OffsetSync, adjacent: bool = True) -> None:
        """Take the next sync of this partition; ``adjacent`` is false when syncs may be missing before it."""
        previous, self.last = self.last, sync
        if previous is None:
            return
        step_up = sync.upstream_offset - previous.upstream_offset
        step_down = sync.downstream_offset - previous.downstream_offset
        if step_up < 0:
            self.runs.clear()  # the history describes another log
            self.open = False
            return
        if step_down < 0:
            self.runs = [r for r in self.runs if r.downstream_end < sync.downstream_offset]
            self.open = False
            return
        if not (adjacent and step_up == step_down > 0) or self.max_runs <= 0:
            self.open = False
            return
        if self.open:
            head = self.runs[0]
            self.runs[0] = Run(head.upstream_start, head.downstream_start, sync.upstream_offset)
            return
        self.runs.insert(0, Run(previous.upstream_offset, previous.downstream_offset, sync.upstream_offset))
        del self.runs[self.max_runs:]
        self.open = True

    def translate(self, upstream: int) -> int | None:
        """Exact downstream offset of ``upstream`` if a run covers it, else ``None``."""
        for run in self.runs:
            if run.covers(upstream):
                return run.translate(upstream)
        return None
