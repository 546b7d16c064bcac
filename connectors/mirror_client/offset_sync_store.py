"""In-memory history of offset syncs and consumer-offset translation (MM2's ``OffsetSyncStore``).

The checkpoint task reads the offset-syncs topic and feeds every :class:`OffsetSync` to
:meth:`OffsetSyncStore.update` in topic order. For each *upstream* topic-partition the store keeps
a fixed array of 64 slots (one per bit of a Java ``long``) holding references to syncs. A single
sync object may fill a run of consecutive slots; "the same sync" always means the same object
(``is``), never equal field values, because two distinct records may carry identical offsets.

Layout and invariants (for slots ``i < j`` holding *different* objects)
-----------------------------------------------------------------------
* **A** – slot 0 holds the most recent sync fed to the store.
* **B** – a slot is never too far behind an earlier slot:
  ``syncs[i].upstream <= syncs[j].upstream + 2**j - 2**i``.
* **C** – distinct neighbours are spread out roughly exponentially:
  ``syncs[i].upstream >= syncs[j].upstream + 2**max(i - 2, 0)``.
* **D** – slot 63 holds the oldest sync that may still be used for translation.

So precision is fine near the live end of the partition (recent syncs are dense) and coarse further
back, and 64 slots cover the whole 63-bit offset range. The bounds are evaluated with Java's 64-bit
wrap-around: a B bound that wraps below zero makes B hold trivially, a C bound that wraps below
zero makes C fail.

Updating
--------
* The first sync for a partition fills all 64 slots.
* All 64 slots are also overwritten by the new sync when the initial read-to-end is still running
  and ``initialization_must_read_to_end`` is true (so after start-up only the last sync read is
  usable: an older one might be from before offsets that were already checkpointed, and translating
  with it could move checkpoints backwards), or when the new sync's upstream offset is *below*
  slot 0's (the upstream partition was rewound or recreated, so the whole history is invalid).
* Otherwise the new sync goes into slot 0 and a single left-to-right repair pass restores the
  invariants: for each later slot it looks (with a cursor that only moves forward, never past the
  slot being repaired) through the *previous* array for an old sync that could be pushed one
  position further back — one that satisfies B and C relative to the new left neighbour and C
  relative to the right neighbour. The cursor skips values it has promoted, duplicates of the next
  old slot and values too close to the left neighbour. As soon as the current slot already
  satisfies B against its left neighbour the pass stops (the rest of the array is fine); otherwise
  the slot receives the best candidate found, which starts out as the new sync itself.

Translating an upstream consumer offset ``u`` with MM2's rule
-------------------------------------------------------------
(:meth:`OffsetSyncStore.translate_mm2`)

* Nothing (``None``) until :meth:`OffsetSyncStore.finish_initial_read` has been called, or when
  no sync was ever seen for the partition — no checkpoint is emitted.
* Otherwise take the first slot, newest first, whose upstream offset is ``<= u`` (slot 63 if none).
  If even that sync is ahead of ``u`` the group is behind all retained history: ``-1`` (callers
  drop it). An exact match yields the sync's downstream offset; a group past the sync gets
  ``downstream + 1`` — never dead reckoning ``downstream + (u - upstream)``, because records
  between two syncs may have been filtered or offsets consumed by transaction markers, and
  overshooting would skip data. The price is re-reading some records after a fail-over.

Exact translation (beyond MM2)
------------------------------
Next to the slots the store keeps, per partition, the *contiguous runs* of
:mod:`mirrorline.connectors.mirror_client.offset_sync_runs`: stretches where adjacent syncs prove upstream
offsets map one to one downstream. :meth:`OffsetSyncStore.translate_downstream` answers from a run
when one covers ``u`` (exact: no re-read at fail-over) and with MM2's rule above otherwise;
:meth:`OffsetSyncStore.translate_mm2` is MM2's rule alone. Runs are built from every sync read,
the start-up read included (adjacency in topic order is what they rest on, not the slots), so a
restarted checkpoint task translates lagging groups exactly where MM2 gives ``-1``; this never
moves a checkpoint backwards, since an exact offset is never below any offset MM2's rule gave for
the same or an earlier position. Callers pass each record's offset in the offset-syncs topic: a
gap there (compaction, an undecodable record) means syncs may be missing, and no run joins across
it.

The class is pure (no Kafka I/O, no asyncio). Each update builds a new slot list and swaps it in,
so a reader holding the previous list never sees a half-repaired array.
"""

from __future__ import annotations

from .formats import OffsetSync
from .offset_sync_runs import MAX_RUNS, Chain, PartitionRuns, joins

__all__ = ["OffsetSyncStore", "SYNCS_PER_PARTITION"]

SYNCS_PER_PARTITION = 64
"""Slots kept per upstream topic-partition (the number of bits in a Java ``long``)."""

_INT64_MOD = 1 << 64
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
#: what invariant B adds between slots i and i + 1 (2**(i+1) - 2**i), and invariant C at slot i
_B_STEPS = tuple(1 << i for i in range(SYNCS_PER_PARTITION))
_C_STEPS = tuple(1 << max(i - 2, 0) for i in range(SYNCS_PER_PARTITION))


def _int64(value: int) -> int:
    """Wrap ``value`` to a signed 64-bit integer the way Java ``long`` arithmetic does."""
    return (value - _INT64_MIN) % _INT64_MOD + _INT64_MIN


def _invariant_c(i_sync: OffsetSync, j_sync: OffsetSync, i: int) -> bool:
    """Invariant C for ``i_sync`` at slot ``i`` against an older ``j_sync`` at a later slot.

    Holds when both are the same object, or when the bound does not overflow below zero and
    ``i_sync.upstream >= j_sync.upstream + 2**max(i - 2, 0)``.
    """
    if i_sync is j_sync:
        return True
    bound = _int64(j_sync.upstream_offset + (1 << max(i - 2, 0)))
    return bound >= 0 and i_sync.upstream_offset >= bound


class OffsetSyncStore:
    """Per-partition history of offset syncs, translating upstream consumer offsets downstream.

    Feed every sync read from the offset-syncs topic to :meth:`update` in topic order, call
    :meth:`finish_initial_read` once the first read-to-end has completed, then use
    :meth:`translate_downstream`. See the module docstring for the data structure and rules.
    """

    def __init__(self, initialization_must_read_to_end: bool = True, max_runs: int = MAX_RUNS) -> None:
        """Create an empty store.

        ``initialization_must_read_to_end`` is true unless the checkpoints topic was loaded
        successfully: while the initial read is in progress each sync then replaces the whole
        history of its partition, so only the last sync read at start-up survives. When false the
        full history is built during the initial read as well (KAFKA-15905). It does not apply to
        the contiguous runs, which are always built from every sync read. ``max_runs`` bounds
        the runs kept per partition (0: MM2's translation only).
        """
        self._initialization_must_read_to_end = initialization_must_read_to_end
        self._max_runs = max_runs
        self._read_to_end = False
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}
        self._runs: dict[tuple[str, int], PartitionRuns] = {}
        # Adjacency in the offset-syncs topic: a gap in its offsets bumps the epoch, and a partition
        # whose last sync was read in an older epoch may have lost syncs since.
        self._epoch = 0
        self._epoch_of: dict[tuple[str, int], int] = {}
        self._next_record_offset: int | None = None
        self._chain_of: dict[tuple[str, int], Chain] = {}
        # Partitions given a sync since take_changed() last ran; None: every translation may differ.
        self._changed: set[tuple[str, int]] | None = None

    @property
    def ready(self) -> bool:
        """Whether the initial read-to-end has finished (translation is allowed)."""
        return self._read_to_end

    def finish_initial_read(self) -> None:
        """Mark the initial read-to-end of the offset-syncs topic as done; idempotent."""
        self._read_to_end = True
        self._changed = None  # translations start answering: every one differs

    def update(self, sync: OffsetSync, record_offset: int | None = None, chain: Chain | None = None) -> None:
        """Record ``sync`` (the next offset-syncs record) for its upstream topic-partition.

        ``record_offset`` is the sync's offset in the offset-syncs topic; when given, a gap since
        the previous record stops every run from joining across it (see :meth:`skip_record`).
        ``chain`` is the record's :class:`~.offset_sync_runs.Chain` (:func:`~.offset_sync_runs.chain_of`):
        when given, the sync joins the previous one of its partition only as
        :func:`~.offset_sync_runs.joins` allows (the same writer's next number, or a restarted
        task's first sync resuming exactly after it), so no sync was lost in between;
        :data:`~.offset_sync_runs.UNCHAINED` never joins. Without either, the syncs are taken to be
        adjacent in topic order.
        """
        self._note_record_offset(record_offset)
        key = (sync.topic, sync.partition)
        if self._changed is not None:
            self._changed.add(key)
        runs = self._runs.get(key)
        if runs is None:
            runs = self._runs[key] = PartitionRuns(self._max_runs)
        adjacent = self._epoch_of.get(key) == self._epoch
        if chain is not None:
            adjacent = adjacent and joins(chain, self._chain_of.get(key), runs.last)
            self._chain_of[key] = chain
        runs.add(sync, adjacent=adjacent)
        self._epoch_of[key] = self._epoch
        current = self._syncs.get(key)
        if current is None:
            self._syncs[key] = [sync] * SYNCS_PER_PARTITION
            return
        self._syncs[key] = self._updated(current, sync)

    def take_changed(self) -> set[tuple[str, int]] | None:
        """The ``(topic, partition)`` keys given a sync since the previous call, and start anew.

        None when any translation may differ from what it was at the previous call: at the first
        call, and after :meth:`finish_initial_read`. A partition not in the set translates every
        offset as it did then (translation depends on nothing but the syncs read), which lets a
        checkpoint cycle pass over a group whose committed offsets did not move either.
        """
        changed, self._changed = self._changed, set()
        return changed

    def skip_record(self, record_offset: int | None = None) -> None:
        """Note an offset-syncs record that is not a usable sync (undecodable): it may hide one.

        No run joins across it; MM2's slots are unaffected.
        """
        self._note_record_offset(record_offset)
        self._epoch += 1

    def _note_record_offset(self, record_offset: int | None) -> None:
        """Bump the adjacency epoch when ``record_offset`` does not follow the previous record."""
        if record_offset is None:
            return
        if self._next_record_offset is not None and record_offset != self._next_record_offset:
            self._epoch += 1
        self._next_record_offset = record_offset + 1

    def _updated(self, original: list[OffsetSync], sync: OffsetSync) -> list[OffsetSync]:
        """Return a new slot list: ``original`` with ``sync`` applied (``original`` unchanged).

        MM2's ``updateSyncArray``. Invariant B for slots ``i`` and ``i + 1`` holds when both hold
        the same sync, when the bound overflows below zero, or when ``syncs[i].upstream <=
        syncs[i + 1].upstream + 2**i`` (Java ``long`` arithmetic); it and C (:func:`_invariant_c`)
        towards the previous slot are written out in the loop, and C towards the next slot is
        evaluated only when it can decide: a checkpoint task reads every sync of the topic,
        thousands after a copy, and the calls were most of an update's cost (9.2 -> 5.0 us).
        """
        only_keep_latest = not self._read_to_end and self._initialization_must_read_to_end
        upstream_rewind = sync.upstream_offset < original[0].upstream_offset
        if only_keep_latest or upstream_rewind:
            return [sync] * SYNCS_PER_PARTITION

        syncs = list(original)
        replacement = sync
        cursor = 0  # next position of `original` that may still be promoted to a later slot
        syncs[0] = sync  # invariant A
        last = SYNCS_PER_PARTITION - 1
        for current in range(1, SYNCS_PER_PARTITION):
            previous = current - 1
            before = syncs[previous]
            before_upstream = before.upstream_offset
            b_step = _B_STEPS[previous]
            c_step = _C_STEPS[previous]
            # Look for an old sync that can move back to `current`, keeping more distinct syncs.
            while True:
                candidate = original[cursor]
                if candidate is before:
                    recent_enough = spaced_from_previous = True
                else:
                    upstream = candidate.upstream_offset
                    bound = upstream + b_step
                    if not _INT64_MIN <= bound <= _INT64_MAX:
                        bound = _int64(bound)
                    recent_enough = bound < 0 or before_upstream <= bound  # B(before, candidate)
                    bound = upstream + c_step
                    if not _INT64_MIN <= bound <= _INT64_MAX:
                        bound = _int64(bound)
                    spaced_from_previous = bound >= 0 and before_upstream >= bound  # C(before, candidate)
                duplicate = cursor + 1 < SYNCS_PER_PARTITION and candidate is original[cursor + 1]
                skip = duplicate or not spaced_from_previous
                if recent_enough and spaced_from_previous and (
                        current == last or _invariant_c(candidate, syncs[current + 1], current)):
                    replacement = candidate  # promoted
                    cursor += 1
                elif skip:
                    cursor += 1
                if not (cursor < current and skip):
                    break
            here = syncs[current]
            if here is before:
                break  # B holds here, hence for the whole remaining tail: done
            bound = here.upstream_offset + b_step
            if not _INT64_MIN <= bound <= _INT64_MAX:
                bound = _int64(bound)
            if bound < 0 or before_upstream <= bound:  # B(before, here): likewise done
                break
            syncs[current] = replacement
        return syncs

    def translate_downstream(
        self, topic: str, partition: int, upstream_offset: int
    ) -> int | None:
        """Translate the upstream consumer offset of ``topic``/``partition`` to a downstream one.

        Exact when a contiguous run covers ``upstream_offset`` (see :meth:`translate_exact`);
        otherwise MM2's rule (:meth:`translate_mm2`). ``None`` before :meth:`finish_initial_read`
        or when no sync is known for the partition.

        Where both answer, the larger wins: both are safe (a consumer starting there skips no
        record), and MM2's can only be larger when a newer sync points at a later copy of the same
        records (a task re-sent them after a restart), which a consumer then need not read twice.
        """
        mm2 = self.translate_mm2(topic, partition, upstream_offset)
        exact = self.translate_exact(topic, partition, upstream_offset)
        if exact is None or mm2 is None:
            return mm2
        return max(exact, mm2)

    def translate_exact(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The exact downstream offset of ``upstream_offset`` if a contiguous run proves it, else ``None``.

        ``None`` as well before :meth:`finish_initial_read`, like every translation.
        """
        if not self._read_to_end:
            return None
        runs = self._runs.get((topic, partition))
        return None if runs is None else runs.translate(upstream_offset)

    def translate_mm2(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """MM2's translation alone, from the 64 slots.

        Returns ``None`` before :meth:`finish_initial_read` or when no sync is known for the
        partition; ``-1`` when ``upstream_offset`` is behind every retained sync (the caller
        drops it); otherwise the nearest retained sync at or before ``upstream_offset`` gives its
        downstream offset on an exact match, or that downstream offset ``+ 1``.
        """
        if not self._read_to_end:
            return None
        syncs = self._syncs.get((topic, partition))
        if syncs is None:
            return None
        chosen = syncs[-1]
        for sync in syncs:
            if sync.upstream_offset <= upstream_offset:
                chosen = sync
                break
        if chosen.upstream_offset > upstream_offset:
            return -1
        if chosen.upstream_offset == upstream_offset:
            return chosen.downstream_offset
        return chosen.downstream_offset + 1

    def syncs(self, topic: str, partition: int) -> list[OffsetSync]:
        """Return a copy of the 64 slots of ``topic``/``partition`` (empty if none seen).

        Slot 0 is the latest sync; repeated entries are the same object. Meant for tests and
        debugging.
        """
        return list(self._syncs.get((topic, partition), ()))
