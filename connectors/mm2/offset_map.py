"""The exact offset map that ``mirrorline reconcile`` builds: source offset -> target offset, per partition.

Reconciliation matches every source record with its copy on the target by content and keeps,
for each source partition, the offsets of every matched pair. Mirroring copies a partition in
order, so those pairs form a few *runs* of consecutive offsets on both sides: a run
``(source_start, target_start, length)`` says that source offsets ``source_start ..
source_start+length-1`` have their copies at ``target_start ..`` in the same order. A
partition copied cleanly is one run; every gap or duplicate on the target starts a new one.

:class:`PartitionMap` holds one partition's runs and the source range reconciled
(``[source_start, source_end)``), and translates a consumer position (the next offset it would
read on the source) into the exact position on the target (:meth:`PartitionMap.translate`).

The map is stored on the target cluster in a compacted topic,
``mirrorline-offset-map.<source>.internal`` (:func:`offset_map_topic`), next to the data and
readable by any failover tool without a shared filesystem; the name ends in ``.internal`` so
no replication policy mirrors it. Each partition's map is one *header* record keyed by the
source topic and partition, plus *chunk* records holding its runs (a chunk at most
:data:`RUNS_PER_CHUNK` runs, well under Kafka's default 1 MB record limit) keyed by the same
plus the reconciliation's id. Chunks are written before their header, so a reader that
sees a header also sees its chunks; the previous reconciliation's chunks are then deleted
with tombstones. This module only encodes and decodes; :mod:`.offset_map_store` reads and writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

#: Version of the JSON records below.
MAP_VERSION = 1
#: Runs per chunk record: each run is about 30 bytes of JSON, so a chunk stays near 300 KB.
RUNS_PER_CHUNK = 10_000


def offset_map_topic(source_alias: str) -> str:
    """The compacted topic on the target holding the offset maps of flow ``source_alias->target``."""
    return f"mirrorline-offset-map.{source_alias}.internal"


@dataclass(frozen=True)
class Run:
    """``length`` consecutive source offsets from ``source_start`` copied to consecutive target offsets."""

    source_start: int
    target_start: int
    length: int

    @property
    def source_end(self) -> int:
        """The source offset just after the run."""
        return self.source_start + self.length


@dataclass(frozen=True)
class PartitionRange:
    """One source partition and its remote partition, with the offset range read on each side.

    ``target_start == target_end`` when the remote partition holds nothing (or does not exist).
    """

    source_topic: str
    partition: int
    target_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int

    @property
    def key(self) -> tuple[str, int]:
        """(source topic, partition)."""
        return self.source_topic, self.partition


@dataclass(frozen=True)
class PartitionMap(PartitionRange):
    """The offset map of one source partition and its copy on the target: a reconciled range and its runs.

    ``source_start``/``source_end`` is the source range reconciled (end exclusive), and
    ``target_start``/``target_end`` the target range read; ``runs`` are sorted by source offset.
    ``counts`` keeps the reconciliation's figures (missing, duplicated ...) for display.
    """

    runs: tuple[Run, ...]
    reconcile_id: str
    created_ms: int
    counts: dict[str, int] = field(default_factory=dict)

    def covers(self, position: int) -> bool:
        """True when the map can place a consumer whose next source offset is ``position``."""
        return position <= self.source_end

    def translate(self, position: int) -> int | None:
        """The target position of a consumer whose next source offset is ``position`` (None: not covered).

        The consumer resumes at the copy of its next unread record: the smallest target offset
        of the copies of records at or after ``position`` (in a cleanly mirrored partition, the
        copy of record ``position`` itself — 0 re-reads, 0 skips; if the target reordered
        records, the smallest keeps every unread record ahead: re-reads but never skips).
        A position past every matched record resumes just after the last copy; a position
        below the range (records deleted on the source since) resumes at the first copy.
        Positions after ``source_end`` are records the reconciliation has not seen: None.
        """
        if not self.covers(position):
            return None
        candidates = [run.target_start + max(0, position - run.source_start)
                      for run in self.runs if run.source_end > position]
        if candidates:
            return min(candidates)
        if self.runs:
            return max(run.target_start + run.length for run in self.runs)
        # no source record has a copy: only a range with no records at all can be placed
        return self.target_end if self.source_start >= self.source_end else None

    def target_of(self, source_offset: int) -> int | None:
        """The target offset of the copy of source record ``source_offset`` (None: no copy)."""
        for run in self.runs:
            if run.source_start <= source_offset < run.source_end:
                return run.target_start + source_offset - run.source_start
        return None


def runs_from_pairs(pairs: Iterable[tuple[int, int]]) -> list[Run]:
    """Compress ``(source offset, target offset)`` pairs (any order) into runs sorted by source offset."""
    runs: list[Run] = []
    for source, target in sorted(pairs):
        if runs:
            last = runs[-1]
            if source == last.source_end and target == last.target_start + last.length:
                runs[-1] = Run(last.source_start, last.target_start, last.length + 1)
                continue
        runs.append(Run(source, target, 1))
    return runs


# --------------------------------------------------------------------------- records


def _json(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def header_key(source_topic: str, partition: int) -> bytes:
    """The key of a partition's header record."""
    return _json({"kind": "map", "partition": partition, "topic": source_topic})


def chunk_key(source_topic: str, partition: int, reconcile_id: str, chunk: int) -> bytes:
    """The key of chunk ``chunk`` of reconciliation ``reconcile_id`` of a partition's map."""
    return _json({"chunk": chunk, "kind": "runs", "partition": partition, "reconcile": reconcile_id,
                  "topic": source_topic})


def encode(pmap: PartitionMap) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` records of a partition's map: its chunks first, then its header."""
    chunks = [pmap.runs[i:i + RUNS_PER_CHUNK] for i in range(0, len(pmap.runs), RUNS_PER_CHUNK)]
    records = [(chunk_key(pmap.source_topic, pmap.partition, pmap.reconcile_id, i),
                _json({"runs": [[r.source_start, r.target_start, r.length] for r in chunk], "version": MAP_VERSION}))
               for i, chunk in enumerate(chunks)]
    header = {"version": MAP_VERSION, "reconcile": pmap.reconcile_id, "chunks": len(chunks),
              "target_topic": pmap.target_topic, "source_start": pmap.source_start, "source_end": pmap.source_end,
              "target_start": pmap.target_start, "target_end": pmap.target_end, "created_ms": pmap.created_ms,
              "counts": pmap.counts}
    records.append((header_key(pmap.source_topic, pmap.partition), _json(header)))
    return records


def stale_chunk_keys(header_value: bytes | None, source_topic: str, partition: int) -> list[bytes]:
    """Keys of the chunks an older header points to (to delete once a newer map is stored)."""
    if not header_value:
        return []
    try:
        header = json.loads(header_value)
        return [chunk_key(source_topic, partition, header["reconcile"], i) for i in range(int(header["chunks"]))]
    except (ValueError, KeyError, TypeError):
        return []


class MapReader:
    """Collects the records of a map topic (read in order) and assembles the complete maps.

    Feed every record with :meth:`add` (compacted or not, tombstones included), then call
    :meth:`maps`. A header whose chunks are not all present (a writer that died midway) is
    left out; undecodable records are skipped.
    """

    def __init__(self) -> None:
        self._headers: dict[tuple[str, int], dict] = {}
        self._chunks: dict[tuple[str, int, str, int], list[list[int]]] = {}

    def add(self, key: bytes | None, value: bytes | None) -> None:
        """Take one record of the map topic into account."""
        try:
            k = json.loads(key) if key else None
            if not isinstance(k, dict):
                return
            if k.get("kind") == "map":
                where = (str(k["topic"]), int(k["partition"]))
                if value is None:
                    self._headers.pop(where, None)
                else:
                    self._headers[where] = json.loads(value)
            elif k.get("kind") == "runs":
                where4 = (str(k["topic"]), int(k["partition"]), str(k["reconcile"]), int(k["chunk"]))
                if value is None:
                    self._chunks.pop(where4, None)
                else:
                    self._chunks[where4] = json.loads(value)["runs"]
        except (ValueError, KeyError, TypeError):
            return

    def maps(self) -> Iterator[PartitionMap]:
        """Every partition map whose header and chunks are all present."""
        for (topic, partition), header in sorted(self._headers.items()):
            try:
                rid, count = str(header["reconcile"]), int(header["chunks"])
                parts = [self._chunks.get((topic, partition, rid, i)) for i in range(count)]
                if any(part is None for part in parts):
                    continue
                runs = tuple(Run(int(s), int(t), int(n)) for part in parts for s, t, n in part)
                yield PartitionMap(topic, partition, str(header["target_topic"]), int(header["source_start"]),
                                   int(header["source_end"]), int(header["target_start"]), int(header["target_end"]),
                                   runs, rid, int(header["created_ms"]), dict(header.get("counts") or {}))
            except (ValueError, KeyError, TypeError):
                continue
