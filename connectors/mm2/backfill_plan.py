"""What a backfill copies, decided before anything is written: per-partition ranges and the checks.

Pure functions over what the clusters reported (log bounds, stored offsets, checkpoints), so
every rule is unit-tested without Kafka:

- ``--from``/``--to`` positions: ``earliest``, ``latest``, ``offset:N``, ``timestamp:MS``
  (``--from`` inclusive, ``--to`` exclusive; ``--to`` defaults to the log end when planning).
- A range that starts below the log start (deleted by retention) is refused naming the
  partition and the offsets, unless ``allow_gaps``, which starts at the log start and counts them.
- **No overlap, no interleaving with streaming** (docs/backfill.md): a partition that MirrorSource
  has already streamed (a stored source offset) or whose remote partition already holds records
  is refused — an older range would land after newer records. A partition this backfill already
  finished is skipped; one it started is resumed with the range it stored.
- **Continuing a stream** (a job a worker cluster runs, which holds the partition: the
  connector's tasks have let it go): a partition MirrorSource has streamed up to a stored offset
  ``S`` is copied from ``S + 1`` (whatever ``--from`` says), appended to the remote partition
  after the copy of ``S``; the caller checks that the remote partition ends with that copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirrorline.api import ConfigError, ConnectError

#: The checkpoint "connector" name under which backfills keep their per-partition plan in the
#: flow's offset store (beside MirrorSourceConnector's offsets; no connector reads it).
CHECKPOINT_CONNECTOR = "mirrorline-backfill"

_POSITION = re.compile(r"^(earliest|latest|offset:(\d+)|timestamp:(-?\d+))$")


@dataclass(frozen=True)
class Position:
    """A parsed ``--from``/``--to`` value."""

    kind: str  # earliest, latest, offset, timestamp
    value: int = 0

    def __str__(self) -> str:
        return self.kind if self.kind in ("earliest", "latest") else f"{self.kind}:{self.value}"


def parse_position(option: str, text: str) -> Position:
    """``earliest``, ``latest``, ``offset:N`` or ``timestamp:MS``; ConfigError naming the option otherwise."""
    match = _POSITION.match(text.strip())
    if not match:
        raise ConfigError(f"{option} {text!r}: expected earliest, latest, offset:N or timestamp:MS")
    if match.group(2) is not None:
        return Position("offset", int(match.group(2)))
    if match.group(3) is not None:
        return Position("timestamp", int(match.group(3)))
    return Position(match.group(1))


@dataclass(frozen=True)
class Bounds:
    """What the source reported for one partition: log start and end, and the offsets for timestamps."""

    log_start: int
    log_end: int
    #: offset of the first record at or after each requested timestamp (None: none that late)
    for_times: dict[int, int | None] = field(default_factory=dict)


def resolve(position: Position, bounds: Bounds) -> int:
    """The offset ``position`` means in a partition with ``bounds`` (not clamped)."""
    if position.kind == "earliest":
        return bounds.log_start
    if position.kind == "latest":
        return bounds.log_end
    if position.kind == "offset":
        return position.value
    found = bounds.for_times.get(position.value)
    return bounds.log_end if found is None else found


@dataclass
class PartitionRange:
    """One source partition's copy: ``[start, end)`` to ``remote``, whose first record lands at ``base``."""

    topic: str
    partition: int
    remote: str
    start: int
    end: int
    base: int
    gap: int = 0
    #: start and base as planned, before resumption skipped what the target already holds
    planned_start: int = -1
    planned_base: int = -1
    #: ``(start, base, records)`` of the part a resumed run found already copied
    trimmed: tuple[int, int, int] | None = None
    #: the source offset MirrorSource had stored when this range continued its stream (None: it had none)
    streamed: int | None = None

    def __post_init__(self) -> None:
        if self.planned_start < 0:
            self.planned_start, self.planned_base = self.start, self.base

    @property
    def size(self) -> int:
        """Offsets in the range (records, unless compaction or transactions left gaps)."""
        return max(0, self.end - self.start)

    def checkpoint(self, done: bool = False) -> dict:
        """The value stored under :data:`CHECKPOINT_CONNECTOR` for this partition."""
        value = {"start": self.start, "end": self.end, "base": self.base, "remote": self.remote, "done": done}
        if self.streamed is not None:
            value["streamed"] = self.streamed
        return value


@dataclass
class Plan:
    """Ranges to copy, partitions already done, and what was noted on the way."""

    ranges: list[PartitionRange] = field(default_factory=list)
    already_done: list[tuple[str, int]] = field(default_factory=list)
    resumed: list[tuple[str, int]] = field(default_factory=list)
    #: partitions MirrorSource had streamed, continued after its stored offset
    continued: list[tuple[str, int]] = field(default_factory=list)
    gaps: int = 0

    @property
    def total(self) -> int:
        """Offsets to copy over every range."""
        return sum(r.size for r in self.ranges)


def plan_partition(topic: str, partition: int, remote: str, bounds: Bounds, start_at: Position, end_at: Position,
                   allow_gaps: bool, stored_offset: int | None, checkpoint: dict | None,
                   target_start: int, target_end: int,
                   continue_streamed: bool = False) -> tuple[PartitionRange | None, str]:
    """The range of one partition and its state: ``copy``, ``continue``, ``resume``, ``done`` or ``empty``.

    Raises ConnectError (one line) for a partition that must not be backfilled (see the module).
    ``target_start``/``target_end`` are the remote partition's log bounds (0, 0 when it does not exist).
    ``continue_streamed``: a partition MirrorSource streamed is continued (state ``continue``:
    the caller checks the remote partition ends with the copy of the stored offset).
    """
    name = f"{topic}-{partition}"
    if checkpoint is not None:
        if checkpoint.get("done"):
            return None, "done"
        streamed = checkpoint.get("streamed")
        if stored_offset is not None and stored_offset not in (int(checkpoint["end"]) - 1, streamed):
            raise ConnectError(f"{name}: an interrupted backfill of this partition (offsets {checkpoint['start']}.."
                               f"{int(checkpoint['end']) - 1}) cannot resume: MirrorSource has streamed it since "
                               f"(stored source offset {stored_offset})")
        return PartitionRange(topic, partition, remote, int(checkpoint["start"]), int(checkpoint["end"]),
                              int(checkpoint["base"]), streamed=streamed), "resume"
    if stored_offset is not None and continue_streamed:
        start, end = stored_offset + 1, min(resolve(end_at, bounds), bounds.log_end)
        if start < bounds.log_start:
            raise ConnectError(f"{name}: MirrorSource stored offset {stored_offset}, but the log now starts at "
                               f"{bounds.log_start}: offsets {start}..{bounds.log_start - 1} were deleted by "
                               f"retention before they were copied")
        if end <= start:
            return None, "empty"
        return PartitionRange(topic, partition, remote, start, end, target_end, streamed=stored_offset), "continue"
    if stored_offset is not None:
        raise ConnectError(f"{name}: MirrorSource has already streamed this partition (stored source offset "
                           f"{stored_offset}); backfilled records would land after newer ones in {remote}. "
                           f"Backfill before starting the flow, or into a flow that has not streamed it "
                           f"(see docs/backfill.md)")
    if target_end > target_start:
        raise ConnectError(f"{name}: target partition {remote}-{partition} already holds records (offsets "
                           f"{target_start}..{target_end - 1}); a backfill only writes into empty partitions so "
                           f"that the copy is exact")
    start, end = resolve(start_at, bounds), min(resolve(end_at, bounds), bounds.log_end)
    gap = 0
    if start < bounds.log_start and end > start:
        if not allow_gaps:
            raise ConnectError(f"{name}: the range starts at offset {start} but the log starts at {bounds.log_start} "
                               f"(offsets {start}..{bounds.log_start - 1} were deleted by retention); use "
                               f"--from earliest, or --allow-gaps to copy what is left and count the gap")
        gap = min(end, bounds.log_start) - start
        start = bounds.log_start
    if end <= start:
        return None, "empty"
    return PartitionRange(topic, partition, remote, start, end, target_end, gap), "copy"


def topic_pattern(text: str | None) -> re.Pattern[str] | None:
    """``--topics``: a regular expression a whole source topic name must match (None: the flow's selection)."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--topics {text!r} is not a valid regular expression: {exc}") from None


def select_topics(flow_topics: dict[str, int], pattern: re.Pattern[str] | None, text: str | None,
                  flow: str) -> dict[str, int]:
    """The flow's selected topics narrowed by ``--topics``; ConnectError when none is left."""
    chosen = {t: n for t, n in flow_topics.items() if pattern is None or pattern.fullmatch(t)}
    if not chosen:
        if pattern is None:
            raise ConnectError(f"flow {flow} selects no existing topic on the source: check 'topics' in the "
                               f"mm2.properties")
        raise ConnectError(f"unknown topic: no topic the flow {flow} mirrors matches --topics {text!r} "
                           f"(it mirrors: {', '.join(sorted(flow_topics)) or 'nothing'})")
    return chosen


def exact_downstream(position: int, start: int, end: int, target_end: int,
                     syncs: list[tuple[int, int]]) -> int | None:
    """The exact target offset of a consumer position ``position`` inside a copied range ``[start, end)``.

    ``syncs`` are the copy's sync candidates, sorted: the first record, every gap in upstream
    offsets and the last record are among them, so between two candidates the offsets run without
    gaps and counting is exact; a position inside a gap (a transaction marker, a compacted-away
    record) resumes at the next record's copy. ``position == end`` (everything read) is the
    target's end. None when ``position`` lies outside ``[start, end]`` or nothing was copied.
    """
    if not syncs or position < start or position > end:
        return None
    if position == end:
        return target_end
    before = [s for s in syncs if s[0] <= position]
    if not before:
        return syncs[0][1]  # before the first copied record (start was a gap): its copy
    upstream, downstream = before[-1]
    after = [s for s in syncs if s[0] > position]
    counted = downstream + (position - upstream)
    return min(counted, after[0][1]) if after else min(counted, target_end)
