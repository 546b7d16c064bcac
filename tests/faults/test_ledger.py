"""The fault suite's counting (support.faults: tally, longest_stall, peak_rate), without Kafka."""

from __future__ import annotations

import pytest

from support.faults import longest_stall, peak_rate, tally


def ids(*numbers: int, partition: int = 0) -> list[bytes]:
    return [f"x:{partition}:{n}".encode() for n in numbers]


def test_exact_copy_counts_nothing():
    source = {0: ids(0, 1, 2), 1: ids(0, 1, partition=1)}
    counted = tally(source, {0: ids(0, 1, 2), 1: ids(0, 1, partition=1)})
    assert (counted.records, counted.lost, counted.duplicated, counted.out_of_order) == (5, 0, 0, 0)


def test_missing_records_are_lost_per_partition():
    source = {0: ids(0, 1, 2, 3), 1: ids(0, 1, partition=1)}
    counted = tally(source, {0: ids(0, 3), 1: []})
    assert counted.lost == 4
    assert counted.lost_by_partition == {0: 2, 1: 2}
    assert counted.lost_samples[0] == ids(1, 2)
    assert counted.out_of_order == 0


def test_a_missing_target_partition_loses_all_its_records():
    assert tally({0: ids(0), 3: ids(0, 1, partition=3)}, {0: ids(0)}).lost_by_partition == {3: 2}


def test_replay_after_a_crash_counts_duplicates_not_disorder():
    # committed up to 1, copied up to 3, crashed, resumed from 2: 2 and 3 twice
    counted = tally({0: ids(0, 1, 2, 3, 4)}, {0: ids(0, 1, 2, 3, 2, 3, 4)})
    assert (counted.lost, counted.duplicated, counted.out_of_order) == (0, 2, 0)
    assert counted.duplicated_by_partition == {0: 2}


def test_reordering_counts_the_records_to_move():
    counted = tally({0: ids(0, 1, 2, 3, 4)}, {0: ids(0, 3, 1, 2, 4)})
    assert (counted.lost, counted.duplicated, counted.out_of_order) == (0, 0, 1)
    assert tally({0: ids(0, 1, 2, 3)}, {0: ids(3, 2, 1, 0)}).out_of_order == 3


def test_a_record_in_the_wrong_partition_is_lost_and_misplaced():
    source = {0: ids(0, 1), 1: ids(0, partition=1)}
    counted = tally(source, {0: ids(0) + ids(0, partition=1), 1: ids(1)})
    assert counted.lost == 2  # 0:1 is in partition 1, 1:0 in partition 0
    assert counted.misplaced == 2
    assert counted.foreign == 0


def test_records_of_an_older_generation_are_foreign():
    counted = tally({0: [b"new:0:0", b"new:0:1"]}, {0: [b"old:0:0", b"old:0:1", b"new:0:0", b"new:0:1"]})
    assert (counted.lost, counted.duplicated, counted.foreign, counted.out_of_order) == (0, 0, 2, 0)


def test_duplicates_interleaved_with_loss():
    counted = tally({0: ids(0, 1, 2, 3, 4, 5)}, {0: ids(0, 1, 1, 1, 4, 5, 5)})
    assert (counted.lost, counted.duplicated, counted.out_of_order) == (2, 3, 0)
    assert "2 lost" in counted.summary() and "3 duplicated" in counted.summary()


def test_source_ids_must_be_unique():
    with pytest.raises(ValueError):
        tally({0: ids(0), 1: ids(0)}, {})


def test_longest_stall_is_per_partition_and_ignores_the_idle_end():
    samples = [(0.0, {0: 0, 1: 0}), (1.0, {0: 10, 1: 10}), (2.0, {0: 20, 1: 10}), (3.0, {0: 30, 1: 10}),
               (6.0, {0: 30, 1: 20}), (7.0, {0: 40, 1: 30}), (9.0, {0: 40, 1: 30})]
    # partition 1 grew at 1 s and next at 6 s; partition 0 at 3 s and next at 7 s; nothing after 7 s
    assert longest_stall(samples) == 5.0
    # a partition already stuck when sampling starts: measured from the first sample
    stuck = [(0.0, {0: 5}), (1.0, {0: 5}), (4.0, {0: 5}), (4.5, {0: 9})]
    assert longest_stall(stuck) == 4.5
    assert longest_stall([(0.0, {0: 1}), (1.0, {0: 1})]) == 0.0


def test_peak_rate_of_the_whole_topic():
    samples = [(0.0, {0: 0, 1: 0}), (0.5, {0: 100, 1: 100}), (1.5, {0: 150, 1: 150}), (2.0, {0: 150, 1: 150})]
    assert peak_rate(samples) == 400.0
    assert peak_rate([]) == 0.0
