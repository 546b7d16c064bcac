"""The offset map of ``mirrorline reconcile``: runs, exact translation, and its records (no Kafka, no Spark)."""

from __future__ import annotations

import random

from mirrorline.connectors.mm2.offset_map import (
    RUNS_PER_CHUNK,
    MapReader,
    PartitionMap,
    Run,
    encode,
    offset_map_topic,
    runs_from_pairs,
    stale_chunk_keys,
)


def pmap(runs, source_start=0, source_end=10, target_start=0, target_end=10, rid="r1") -> PartitionMap:
    return PartitionMap("orders", 0, "A.orders", source_start, source_end, target_start, target_end,
                        tuple(runs), rid, 1_700_000_000_000, {"missing": 0})


def brute_force(pairs: dict[int, int], position: int, source_end: int) -> int | None:
    """Truth: the smallest target offset among copies of records at or after ``position``."""
    later = [t for s, t in pairs.items() if s >= position]
    if later:
        return min(later)
    return max(pairs.values()) + 1 if pairs else None


def test_topic_name_is_internal_to_every_policy():
    assert offset_map_topic("A") == "mirrorline-offset-map.A.internal"


def test_pairs_compress_to_runs_at_every_gap_or_duplicate():
    # source 0..9 copied to 0..9, but source 4 missing and source 7 copied twice (at 7 and 8)
    pairs = [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4), (6, 5), (7, 6), (8, 8), (9, 9)]
    assert runs_from_pairs(reversed(pairs)) == [Run(0, 0, 4), Run(5, 4, 3), Run(8, 8, 2)]
    assert runs_from_pairs([]) == []


def test_translate_clean_copy_is_identity_shifted():
    m = pmap([Run(100, 40, 50)], source_start=100, source_end=150, target_start=40, target_end=90)
    assert [m.translate(p) for p in (100, 101, 149, 150)] == [40, 41, 89, 90]
    assert m.translate(151) is None  # records reconcile has not seen
    assert m.translate(20) == 40  # below the range: deleted on the source since; resumes at the first copy
    assert m.target_of(120) == 60 and m.target_of(150) is None


def test_translate_around_a_gap_skips_nothing_that_exists():
    m = pmap(runs_from_pairs([(0, 0), (1, 1), (2, 2), (3, 3), (5, 4), (6, 5), (7, 6), (8, 8), (9, 9)]))
    assert m.translate(4) == 4  # record 4 is missing: resume at the copy of record 5
    assert m.translate(8) == 8  # the duplicate at target 7 was read before switching
    assert m.translate(10) == 10


def test_translate_matches_brute_force_on_random_maps():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randrange(1, 40)
        targets = list(range(n + 5))
        rng.shuffle(targets) if rng.random() < 0.3 else None
        kept = sorted(rng.sample(range(n), rng.randrange(1, n + 1)))
        pairs = {s: targets[i] for i, s in enumerate(kept)}
        m = pmap(runs_from_pairs(pairs.items()), source_end=n)
        for position in range(n + 1):
            assert m.translate(position) == brute_force(pairs, position, n), (pairs, position)


def test_empty_partition_and_unmatched_partition():
    assert pmap([], source_start=5, source_end=5, target_start=3, target_end=3).translate(5) == 3
    assert pmap([], source_start=0, source_end=5).translate(2) is None


def test_records_round_trip_and_chunks_come_before_their_header():
    runs = [Run(i * 3, i * 3 + 1, 2) for i in range(RUNS_PER_CHUNK + 5)]
    m = pmap(runs, source_end=runs[-1].source_end)
    records = encode(m)
    assert len(records) == 3 and b'"kind":"map"' in records[-1][0]
    reader = MapReader()
    for key, value in records:
        reader.add(key, value)
    [back] = list(reader.maps())
    assert back == m


def test_a_header_without_all_its_chunks_is_not_a_map():
    records = encode(pmap([Run(0, 0, 10)]))
    reader = MapReader()
    reader.add(*records[-1])  # header only: its writer died before the chunks? never: chunks go first
    assert list(reader.maps()) == []


def test_a_newer_map_replaces_the_older_and_stale_chunks_are_tombstoned():
    old, new = pmap([Run(0, 0, 10)], rid="old"), pmap([Run(0, 0, 5), Run(5, 6, 5)], rid="new")
    reader = MapReader()
    for key, value in encode(old) + encode(new):
        reader.add(key, value)
    stale = stale_chunk_keys(encode(old)[-1][1], "orders", 0)
    assert stale == [encode(old)[0][0]]
    for key in stale:
        reader.add(key, None)
    [back] = list(reader.maps())
    assert back.reconcile_id == "new" and back.runs == new.runs
    reader.add(b"not json", b"x")  # other records are ignored
    assert len(list(reader.maps())) == 1
