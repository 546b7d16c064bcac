"""OffsetSyncStore: MM2's 64-slot sync history and offset translation (reference mm2.md §4.3).

These are MM2 conformance tests (Kafka's OffsetSyncStoreTest vectors), so they check MM2's rule,
``translate_mm2``. ``translate_downstream`` answers exactly where contiguous runs prove it
(tests/unit/test_offset_sync_runs.py); the last tests here check how the two combine.
"""

from __future__ import annotations

import random

import pytest

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_store import SYNCS_PER_PARTITION, OffsetSyncStore

TOPIC = "orders"


def sync(store: OffsetSyncStore, upstream: int, downstream: int, topic=TOPIC, partition=0):
    """Feed one sync for ``topic``/``partition`` and return it."""
    s = OffsetSync(topic, partition, upstream, downstream)
    store.update(s)
    return s


def ready_store(initialization_must_read_to_end: bool = True) -> OffsetSyncStore:
    """A store whose initial read-to-end has already finished (on an empty topic)."""
    store = OffsetSyncStore(initialization_must_read_to_end)
    store.finish_initial_read()
    return store


def translate(store: OffsetSyncStore, upstream: int, topic: str = TOPIC, partition: int = 0):
    """Shorthand for ``store.translate_mm2`` (MM2's rule, without the exact runs)."""
    return store.translate_mm2(topic, partition, upstream)


def distinct(slots: list[OffsetSync]) -> list[OffsetSync]:
    """The distinct sync objects in slot order (runs of the same object collapsed)."""
    out: list[OffsetSync] = []
    for s in slots:
        if not out or out[-1] is not s:
            out.append(s)
    return out


def assert_invariants(slots: list[OffsetSync], latest: OffsetSync | None = None) -> None:
    """Check invariants A, B and C over every pair of slots ``i < j`` (like Kafka's test).

    Pairs with equal upstream offsets are skipped: two distinct records may carry the same
    offsets (e.g. a re-sent sync) and are then allowed to sit next to each other.
    """
    assert len(slots) == SYNCS_PER_PARTITION
    if latest is not None:
        assert slots[0] is latest  # A
    for j in range(SYNCS_PER_PARTITION):
        j_up = slots[j].upstream_offset
        for i in range(j):
            i_up = slots[i].upstream_offset
            if i_up == j_up:
                continue
            lower = j_up + (1 << max(i - 2, 0))
            assert i_up >= lower, f"C({i},{j}): {i_up} < {lower}"
            upper = j_up + (1 << j) - (1 << i)
            if upper < (1 << 63):  # a Java bound that overflows is trivially satisfied
                assert i_up <= upper, f"B({i},{j}): {i_up} > {upper}"
    ups = [s.upstream_offset for s in slots]
    assert ups == sorted(ups, reverse=True)


# --- the examples of the reference, step by step ---------------------------------------------

# (action, upstream, downstream-or-expected); "sync" feeds a sync, "tr" asserts a translation.
REFERENCE_STEPS = [
    ("sync", 100, 200),
    ("tr", 150, 201),   # ahead of the sync: +1, no dead reckoning (not 250)
    ("tr", 100, 200),   # exact
    ("tr", 99, -1),     # behind every retained sync
    ("sync", 150, 251),
    ("tr", 150, 251),   # exact on the new sync
    ("tr", 120, 201),   # the older sync is still retained and nearest at/below 120
    ("tr", 5, -1),
    ("tr", 1000, 252),
    ("sync", 200, 10),  # downstream reset (target truncated): translation follows it
    ("tr", 200, 10),
    ("tr", 201, 11),
    ("tr", 150, 251),   # history is kept: downstream going backwards is not a rewind
    ("sync", 20, 20),   # upstream rewind: history is cleared
    ("tr", 20, 20),
    ("tr", 19, -1),
    ("tr", 150, 21),    # (150 -> 251) is gone; only (20 -> 20) remains, +1 rule
    ("tr", 200, 21),
    ("tr", 100, 21),
]


def test_reference_examples():
    store = ready_store()
    for action, upstream, value in REFERENCE_STEPS:
        if action == "sync":
            s = sync(store, upstream, value)
            assert_invariants(store.syncs(TOPIC, 0), s)
        else:
            assert translate(store, upstream) == value, (upstream, value)
    # after the rewind every slot is the rewind sync
    slots = store.syncs(TOPIC, 0)
    assert all(s is slots[0] for s in slots) and slots[0].upstream_offset == 20


def test_first_sync_fills_all_slots():
    store = ready_store()
    s = sync(store, 7, 9)
    slots = store.syncs(TOPIC, 0)
    assert len(slots) == 64 and all(x is s for x in slots)
    assert store.syncs(TOPIC, 1) == []


# --- readiness, unknown partitions, independence ---------------------------------------------

def test_no_translation_before_initial_read_finishes():
    store = OffsetSyncStore()
    assert not store.ready
    assert translate(store, 0) is None
    sync(store, 100, 200)
    for u in (0, 100, 200):
        assert translate(store, u) is None
    store.finish_initial_read()
    assert store.ready
    assert [translate(store, u) for u in (0, 100, 200)] == [-1, 200, 201]
    store.finish_initial_read()  # idempotent
    assert store.ready


def test_no_translation_without_syncs_for_partition():
    store = ready_store()
    assert translate(store, 0) is None
    sync(store, 10, 10, partition=0)
    assert translate(store, 10, partition=1) is None
    assert translate(store, 10, topic="other") is None
    assert store.syncs("other", 0) == []


def test_partitions_are_independent():
    store = ready_store()
    sync(store, 100, 1000, partition=0)
    sync(store, 50, 500, partition=1)
    sync(store, 100, 7, topic="other", partition=0)
    sync(store, 10, 20, partition=1)  # rewinds partition 1 only
    assert translate(store, 100, partition=0) == 1000
    assert translate(store, 150, partition=0) == 1001
    assert translate(store, 50, partition=1) == 21
    assert translate(store, 9, partition=1) == -1
    assert translate(store, 100, topic="other") == 7
    assert store.syncs(TOPIC, 0)[0].upstream_offset == 100


def test_repeated_sync_with_same_offsets_is_kept_apart_by_identity():
    store = ready_store()
    first = sync(store, 10, 10)
    second = sync(store, 10, 10)
    assert first == second and first is not second
    slots = store.syncs(TOPIC, 0)
    assert slots[0] is second and slots[63] is first
    assert_invariants(slots, second)
    assert translate(store, 10) == 10


# --- initial read-to-end ----------------------------------------------------------------------

@pytest.mark.parametrize(
    "must_read_to_end, expected",
    [
        # only the last sync read at start-up is usable
        (True, {0: -1, 50: -1, 99: -1, 100: 100, 101: 101, 500: 101}),
        # history is kept, translation for lagging groups right away
        # (100, 90, 60 and 0 are retained: C forces wider spacing in later slots)
        (False, {0: 0, 5: 1, 59: 1, 60: 60, 89: 61, 90: 90, 99: 91, 100: 100, 500: 101}),
    ],
)
def test_initial_read(must_read_to_end, expected):
    store = OffsetSyncStore(initialization_must_read_to_end=must_read_to_end)
    last = None
    for offset in range(0, 101, 10):
        last = sync(store, offset, offset)
        assert_invariants(store.syncs(TOPIC, 0), last)
    slots = store.syncs(TOPIC, 0)
    if must_read_to_end:
        assert all(s is last for s in slots)
    else:
        assert [s.upstream_offset for s in distinct(slots)] == [100, 90, 60, 0]
    store.finish_initial_read()
    assert {u: translate(store, u) for u in expected} == expected


def test_initial_read_must_read_to_end_then_history_accumulates():
    store = OffsetSyncStore(initialization_must_read_to_end=True)
    for offset in range(0, 101, 10):
        sync(store, offset, offset)
    store.finish_initial_read()
    for offset in range(110, 201, 10):
        sync(store, offset, offset)
    assert translate(store, 50) == -1         # before the start-up sync: never usable again
    assert translate(store, 100) == 100       # invariant D: the start-up sync stays last
    slots = store.syncs(TOPIC, 0)
    assert slots[63].upstream_offset == 100
    assert_invariants(slots)
    retained = [s.upstream_offset for s in distinct(slots)]
    assert retained == [200, 190, 160, 100]  # a normal exponential history built after start-up
    for u in range(100, 301):
        d = translate(store, u)
        assert d == (u if u in retained else max(r for r in retained if r <= u) + 1)


# Translation points taken from Kafka's OffsetSyncStoreTest (testPastOffsetTranslation*): syncs
# u = d every 10 offsets up to 1000 during the initial read, then on to 10000.
# Each pair is (a sync offset that is retained, the previous retained sync below it).
PAST_OFFSET_POINTS = {
    True: [(1000, -1), (4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160),
           (9880, 9640), (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)],
    False: [(3840, 0), (7680, 3840), (8640, 7680), (9120, 8640), (9600, 9120), (9840, 9600),
            (9900, 9840), (9960, 9900), (9990, 9960), (10000, 9990)],
}


def assert_sparse_sync(store: OffsetSyncStore, offset: int, previous: int) -> None:
    """``offset`` is retained and ``previous`` is the retained sync right below it (-1: none)."""
    assert translate(store, offset - 1) == (-1 if previous == -1 else previous + 1)
    assert translate(store, offset) == offset
    assert translate(store, offset + 1) == offset + 1
    assert translate(store, offset + 2) == offset + 1


@pytest.mark.parametrize("must_read_to_end", [True, False])
def test_past_offset_translation_matches_kafka(must_read_to_end):
    store = OffsetSyncStore(initialization_must_read_to_end=must_read_to_end)
    for offset in range(0, 1001, 10):
        s = sync(store, offset, offset)
        assert_invariants(store.syncs(TOPIC, 0), s)
    store.finish_initial_read()
    if must_read_to_end:
        assert_sparse_sync(store, 1000, -1)
        start = 1010
    else:
        assert_sparse_sync(store, 480, 0)
        assert_sparse_sync(store, 720, 480)
        assert_sparse_sync(store, 1000, 990)
        start = 1000  # Kafka's test re-sends 1000 (a new record with the same offsets)
    for offset in range(start, 10001, 10):
        s = sync(store, offset, offset)
        assert_invariants(store.syncs(TOPIC, 0), s)
    for offset, previous in PAST_OFFSET_POINTS[must_read_to_end]:
        assert_sparse_sync(store, offset, previous)
    # rewinding upstream clears all history
    s = sync(store, 1500, 11000)
    assert_invariants(store.syncs(TOPIC, 0), s)
    assert translate(store, 1499) == -1
    assert translate(store, 1500) == 11000
    assert translate(store, 2000) == 11001


# --- regular syncs: invariants, spacing and "never skip" ------------------------------------

def test_regular_syncs_every_ten_offsets():
    store = ready_store()
    first = None
    for offset in range(0, 10001, 10):
        s = sync(store, offset, offset)
        first = first or s
        slots = store.syncs(TOPIC, 0)
        assert_invariants(slots, s)
        assert slots[63] is first  # D: the earliest usable sync is kept
    slots = store.syncs(TOPIC, 0)
    assert slots[0].upstream_offset == 10000
    kept = distinct(slots)
    # 1001 syncs, 10 apart: about log2(1001) ~ 10 of them survive, exponentially spaced
    assert 10 <= len(kept) <= 64
    gaps = [a.upstream_offset - b.upstream_offset for a, b in zip(kept, kept[1:])]
    assert gaps[0] == 10 and gaps == sorted(gaps) and gaps[-1] >= 2000
    retained = {s.upstream_offset for s in kept}

    previous = -1
    for u in range(0, 10001):
        d = translate(store, u)
        assert d is not None and d >= 0  # syncs[63] is at 0
        assert d <= u + 1  # never past the true position (downstream == upstream) + 1
        if u in retained:
            assert d == u
        assert d >= previous  # monotonic in u
        previous = d
    assert translate(store, 10**9) == 10001


@pytest.mark.parametrize("seed", range(8))
def test_random_gaps_never_skip(seed):
    rng = random.Random(seed)
    store = ready_store()
    upstream = rng.randrange(0, 50)
    downstream = rng.randrange(0, 50)
    generated: list[tuple[int, int]] = []
    for _ in range(600):
        s = sync(store, upstream, downstream)
        generated.append((upstream, downstream))
        assert_invariants(store.syncs(TOPIC, 0), s)
        gap = rng.choice([1, 2, 5, rng.randrange(1, 200), rng.randrange(1, 5000)])
        upstream += gap
        downstream += rng.randrange(0, gap + 1)  # some upstream records filtered out

    known = dict(generated)
    ups = [u for u, _ in generated]

    def true_downstream(u: int) -> int:
        """Downstream offset of the latest generated sync at or before ``u``."""
        lo, hi = 0, len(ups) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ups[mid] <= u:
                lo = mid
            else:
                hi = mid - 1
        return known[ups[lo]]

    slots = store.syncs(TOPIC, 0)
    oldest, newest = slots[63], slots[0]
    assert oldest.upstream_offset == generated[0][0]
    assert (newest.upstream_offset, newest.downstream_offset) == generated[-1]
    retained = {s.upstream_offset for s in slots}
    probes = set(rng.sample(range(oldest.upstream_offset, newest.upstream_offset + 100), 3000))
    probes |= {u + k for u in ups for k in (-1, 0, 1)}
    previous = -1
    for u in sorted(probes):
        d = translate(store, u)
        if u < oldest.upstream_offset:
            assert d == -1
            continue
        assert 0 <= d <= true_downstream(u) + 1, u
        assert d <= newest.downstream_offset + 1
        if u in retained:
            assert d == known[u]
        assert d >= previous  # monotonic (downstream offsets here never go backwards)
        previous = d


# --- exact runs on top of MM2's rule ----------------------------------------------------------

@pytest.mark.parametrize("must_read_to_end", [True, False])
def test_exact_runs_survive_the_initial_read(must_read_to_end):
    """Syncs u == d every 10 offsets are adjacent and contiguous: every offset translates exactly,
    even those MM2 forgets after a start-up read (-1) or rounds down (+1 rule)."""
    store = OffsetSyncStore(initialization_must_read_to_end=must_read_to_end)
    for offset in range(0, 101, 10):
        sync(store, offset, offset + 1000)
    assert store.translate_downstream(TOPIC, 0, 50) is None  # still nothing before the read ends
    store.finish_initial_read()
    for u in range(0, 101):
        assert store.translate_downstream(TOPIC, 0, u) == u + 1000
        assert store.translate_exact(TOPIC, 0, u) == u + 1000
    assert translate(store, 50) == (-1 if must_read_to_end else 1001)  # MM2's own answer is unchanged
    # past the newest sync nothing is proven: MM2's rule
    assert store.translate_exact(TOPIC, 0, 101) is None
    assert store.translate_downstream(TOPIC, 0, 101) == 1101
    assert store.translate_downstream(TOPIC, 0, 500) == 1101


def test_without_runs_translation_is_mm2s():
    store = ready_store()
    for u, d in [(100, 200), (150, 230), (160, 260), (200, 330)]:  # no two steps alike: nothing proven
        sync(store, u, d)
    for u in range(90, 260):
        assert store.translate_downstream(TOPIC, 0, u) == translate(store, u)
    disabled = OffsetSyncStore(max_runs=0)
    disabled.finish_initial_read()
    for offset in range(0, 101, 10):
        sync(disabled, offset, offset)
    assert disabled.translate_downstream(TOPIC, 0, 55) == translate(disabled, 55) < 55  # MM2 rounds down
