"""How produce lanes share one broker's ready batches (mirrorline.clients.produce_lanes.split_by_size)."""

from __future__ import annotations

from mirrorline.clients.produce_lanes import MIN_SHARE_BYTES, split_by_size


def test_ready_batches_are_split_into_shares_of_about_equal_bytes_in_order():
    batches = {f"p{i}": 200_000 for i in range(12)}
    shares = split_by_size(batches, 2, lambda size: size)
    assert [list(s) for s in shares] == [[f"p{i}" for i in range(6)], [f"p{i}" for i in range(6, 12)]]


def test_every_partition_is_in_exactly_one_share():
    batches = {f"p{i}": 10_000 * (i + 1) for i in range(9)}
    shares = split_by_size(batches, 3, lambda size: size)
    assert len(shares) == 3 and all(shares)
    assert [tp for s in shares for tp in s] == list(batches)


def test_small_requests_are_not_split():
    batches = {"a": MIN_SHARE_BYTES // 4, "b": MIN_SHARE_BYTES // 4}
    assert split_by_size(batches, 2, lambda size: size) == [batches]


def test_no_more_shares_than_partitions_or_lanes():
    assert len(split_by_size({"a": 10 ** 6}, 4, lambda size: size)) == 1
    assert len(split_by_size({f"p{i}": 10 ** 6 for i in range(8)}, 3, lambda size: size)) == 3
