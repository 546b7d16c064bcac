"""MirrorSourceTask hands batches over partition by partition in turn, each partition's order kept."""

from __future__ import annotations

from mirrorline.connectors.source_mirror.task import interleave


def test_batches_are_interleaved_round_robin_keeping_each_partitions_order():
    per_partition = [["a0", "a1", "a2"], ["b0"], ["c0", "c1"]]
    out = interleave(per_partition)
    assert out == ["a0", "b0", "c0", "a1", "c1", "a2"]
    for items in per_partition:
        assert [x for x in out if x in items] == items


def test_one_partition_is_returned_as_it_is():
    only = ["a0", "a1"]
    assert interleave([only]) is only
