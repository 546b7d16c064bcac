"""Reconciliation's matching on in-memory DataFrames (local Spark, no Kafka).

Every expected figure is computed here by a plain-Python matcher over the same records, not
written down by hand.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mirrorline.connectors.mm2.offset_map import runs_from_pairs  # noqa: E402
from mirrorline.connectors.mm2.reconcile_match import reconcile_frames  # noqa: E402

SCHEMA = StructType([
    StructField("topic", StringType()), StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
    StructField("timestamp", TimestampType()),
])
EPOCH = dt.datetime(2024, 1, 1)


def frame(spark, rows):
    """rows: (partition, offset, (key, value, headers, ms))."""
    return spark.createDataFrame(
        [("orders", p, o, k, v, h, EPOCH + dt.timedelta(milliseconds=ms)) for p, o, (k, v, h, ms) in rows], SCHEMA)


def truth(source, target):
    """Plain-Python matching: k-th copy of a content <-> k-th source record of that content, per partition."""
    out = {}
    for partition in {p for p, _, _ in source} | {p for p, _, _ in target}:
        src = sorted((o, c) for p, o, c in source if p == partition)
        tgt = sorted((o, c) for p, o, c in target if p == partition)
        norm = lambda c: (c[0], c[1], tuple(c[2] or ()), c[3])  # noqa: E731  (null headers = none)
        waiting = defaultdict(list)
        for o, c in tgt:
            waiting[norm(c)].append(o)
        pairs, missing = [], []
        for o, c in src:
            copies = waiting[norm(c)]
            if copies:
                pairs.append((o, copies.pop(0)))
            else:
                missing.append(o)
        leftovers = [(c, o) for c, offsets in waiting.items() for o in offsets]
        # a leftover repeating an earlier target record is a duplicate; one the source never had is unexpected
        duplicated = sum(1 for c, o in leftovers if any(norm(cc) == c and oo < o for oo, cc in tgt))
        unexpected = len(leftovers) - duplicated
        ordered = sorted(pairs)
        descents = sum(1 for a, b in zip(ordered, ordered[1:]) if b[1] < a[1])
        last_matched = max((s for s, _ in pairs), default=-1)
        out[("orders", partition)] = dict(source=len(src), target=len(tgt), matched=len(pairs),
                                          missing=len(missing),
                                          missing_tail=sum(1 for o in missing if o > last_matched),
                                          duplicated=duplicated, unexpected=unexpected,
                                          out_of_order=descents, runs=runs_from_pairs(pairs),
                                          first_missing=min(missing, default=None),
                                          last_missing=max(missing, default=None))
    return out


def check(spark, source, target):
    results = reconcile_frames(frame(spark, source), frame(spark, target))
    expected = truth(source, target)
    assert set(results) == set(expected)
    for where, want in expected.items():
        got = results[where]
        assert {**got.counts(), "runs": got.runs, "first_missing": got.first_missing,
                "last_missing": got.last_missing} == want, where
    return results


def test_clean_copy_is_one_run_per_partition(spark):
    source = [(p, o, (f"k{o}".encode(), f"v{p}-{o}".encode(), [("h", b"1")], o)) for p in (0, 1) for o in range(50)]
    target = [(p, o + 7, c) for p, o, c in source]  # the copy starts at 7 on the target
    results = check(spark, source, target)
    for p in (0, 1):
        r = results[("orders", p)]
        assert (r.missing, r.duplicated, r.out_of_order, len(r.runs)) == (0, 0, 0, 1)
        assert r.runs[0].source_start == 0 and r.runs[0].target_start == 7 and r.runs[0].length == 50


def test_gaps_duplicates_and_reordering_are_counted(spark):
    rng = random.Random(3)
    source = [(0, o, (f"k{o % 7}".encode(), f"v{o % 11}".encode(), [], o // 3)) for o in range(120)]
    copies = [c for _, o, c in source if o not in (5, 6, 40)]  # three records lost
    copies[10:10] = [copies[9], copies[9]]  # one record copied three times
    copies.append(copies[50])  # and one re-sent at the end
    copies[70], copies[71] = copies[71], copies[70]  # two swapped
    copies.append((b"foreign", b"x", [], 5))  # not from the source at all
    target = [(0, o, c) for o, c in enumerate(copies)]
    rng.shuffle(target)  # arrival order in the DataFrame must not matter
    r = check(spark, source, target)[("orders", 0)]
    assert r.missing == 3 and r.unexpected == 1 and r.duplicated >= 3 and r.out_of_order >= 1


def test_null_key_and_value_and_headers_are_not_confused(spark):
    source = [(0, 0, (None, b"a", None, 1)), (0, 1, (b"a", None, [], 1)), (0, 2, (b"", b"a", [("h", None)], 1)),
              (0, 3, (None, None, [("h", b"")], 1))]
    target = [(0, 0, (b"a", None, None, 1)), (0, 1, (None, b"a", [], 1)), (0, 2, (None, None, [("h", b"")], 1)),
              (0, 3, (b"", b"a", [("h", b"")], 1))]
    r = check(spark, source, target)[("orders", 0)]
    assert r.matched == 3 and r.missing == 1 and r.unexpected == 1


def test_timestamp_is_part_of_the_content(spark):
    source = [(0, 0, (b"k", b"v", [], 1000))]
    target = [(0, 0, (b"k", b"v", [], 1001))]
    r = check(spark, source, target)[("orders", 0)]
    assert (r.matched, r.missing, r.unexpected) == (0, 1, 1)
