"""OffsetSyncStore's slot update, written out for speed, keeps exactly the slots of MM2's
``updateSyncArray`` as written plainly (the reference below, the store's previous code)."""

from __future__ import annotations

import random

import pytest

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_store import (
    SYNCS_PER_PARTITION, OffsetSyncStore, _int64, _invariant_c)


def _invariant_b(i_sync: OffsetSync, j_sync: OffsetSync, i: int, j: int) -> bool:
    """MM2's invariant B for ``i_sync`` at slot ``i`` and ``j_sync`` at slot ``j`` (``i < j``)."""
    if i_sync is j_sync:
        return True
    bound = _int64(j_sync.upstream_offset + (1 << j) - (1 << i))
    return bound < 0 or i_sync.upstream_offset <= bound


def reference_updated(original: list[OffsetSync], sync: OffsetSync) -> list[OffsetSync]:
    """MM2's slot update with every invariant evaluated as MM2 evaluates it (after the initial read)."""
    if sync.upstream_offset < original[0].upstream_offset:
        return [sync] * SYNCS_PER_PARTITION
    syncs = list(original)
    replacement = sync
    cursor = 0
    syncs[0] = sync
    last = SYNCS_PER_PARTITION - 1
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            candidate = original[cursor]
            recent_enough = _invariant_b(syncs[previous], candidate, previous, current)
            spaced_from_previous = _invariant_c(syncs[previous], candidate, previous)
            spaced_from_next = current == last or _invariant_c(candidate, syncs[current + 1], current)
            duplicate = cursor + 1 < SYNCS_PER_PARTITION and candidate is original[cursor + 1]
            promote = recent_enough and spaced_from_previous and spaced_from_next
            if promote:
                replacement = candidate
            skip = duplicate or not spaced_from_previous
            if promote or skip:
                cursor += 1
            if not (cursor < current and skip):
                break
        if _invariant_b(syncs[previous], syncs[current], previous, current):
            break
        syncs[current] = replacement
    return syncs


def _steps(rng: random.Random, shape: str):
    """Upstream offsets of a run of syncs: steady, bursty, repeated, rewinding, or near the int64 ends."""
    upstream = {"huge": (1 << 63) - 5_000, "negative": -(1 << 63) + 10}.get(shape, 0)
    for _ in range(rng.randrange(50, 400)):
        if shape == "rewind" and rng.random() < 0.03:
            upstream = max(0, upstream - rng.randrange(1, 1000))
        elif shape == "repeat" and rng.random() < 0.3:
            pass
        else:
            upstream += rng.choice([1, 1, 2, 3, 10, 100, 1000, rng.randrange(1, 1 << 20)])
        yield _int64(upstream)


@pytest.mark.parametrize("shape", ["steady", "rewind", "repeat", "huge", "negative"])
@pytest.mark.parametrize("seed", range(12))
def test_slot_update_matches_the_plain_algorithm(shape, seed):
    rng = random.Random(f"{shape}-{seed}")
    store = OffsetSyncStore()
    store.finish_initial_read()
    slots = None
    for n, upstream in enumerate(_steps(rng, shape)):
        sync = OffsetSync("t", 0, upstream, n)
        if slots is None:
            slots = [sync] * SYNCS_PER_PARTITION
            store.update(sync)
            continue
        if shape == "repeat" and rng.random() < 0.2:
            sync = slots[0]  # the same object again
        expected = reference_updated(slots, sync)
        got = store._updated(slots, sync)
        assert [id(s) for s in got] == [id(s) for s in expected], f"after {n} syncs"
        slots = got
