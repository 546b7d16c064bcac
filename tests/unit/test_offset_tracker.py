"""Unit tests of mirrorline.runtime.offset_tracker.OffsetTracker: only acknowledged prefixes are committable."""

from __future__ import annotations

import pytest

from mirrorline.runtime.offset_tracker import OffsetTracker

P0 = {"stream": 0}
P1 = {"stream": 1}
P2 = {"stream": 2}


def submit_all(tracker: OffsetTracker, records):
    """Submit (partition, offset) pairs in order; return the handles."""
    return [tracker.submit(partition, offset) for partition, offset in records]


def sequence(partition, count, start=0):
    return [(partition, {"seq": n}) for n in range(start, start + count)]


# Table: records submitted in order, the indices acked (in that order), and the expected
# committable() result after those acks.
CASES = [
    pytest.param(sequence(P0, 3), [], [], id="nothing acked"),
    pytest.param(sequence(P0, 3), [0], [(P0, {"seq": 0})], id="first acked"),
    pytest.param(sequence(P0, 3), [0, 1, 2], [(P0, {"seq": 2})], id="all acked in order"),
    pytest.param(sequence(P0, 3), [2, 1, 0], [(P0, {"seq": 2})], id="all acked in reverse"),
    pytest.param(sequence(P0, 3), [1], [], id="later acked, first not"),
    pytest.param(sequence(P0, 3), [1, 2], [], id="all but the first acked"),
    pytest.param(sequence(P0, 5), [0, 2, 3], [(P0, {"seq": 0})], id="gap stops the prefix"),
    pytest.param(sequence(P0, 5), [3, 0, 1, 4], [(P0, {"seq": 1})], id="out of order up to a gap"),
    pytest.param(sequence(P0, 5), [4, 3, 2, 1, 0], [(P0, {"seq": 4})], id="gap closed last"),
    pytest.param(sequence(P0, 3) + sequence(P1, 3), [0, 3, 4], [(P0, {"seq": 0}), (P1, {"seq": 1})],
                 id="two partitions independent"),
    pytest.param(sequence(P0, 3) + sequence(P1, 3), [1, 2, 3], [(P1, {"seq": 0})],
                 id="blocked partition does not block another"),
    pytest.param([(P0, {"seq": 0}), (P1, {"seq": 0}), (P0, {"seq": 1}), (P1, {"seq": 1}), (P2, {"seq": 0})],
                 [4, 3, 2, 0], [(P0, {"seq": 1}), (P2, {"seq": 0})], id="interleaved partitions"),
    pytest.param([(None, None), (P0, {"seq": 0}), (None, {"seq": 9}), (P0, None), (P0, {"seq": 1})],
                 [4, 1], [(P0, {"seq": 1})], id="records without partition or offset ignored"),
]


@pytest.mark.parametrize("records, acks, expected", CASES)
def test_committable(records, acks, expected):
    tracker = OffsetTracker("conn")
    handles = submit_all(tracker, records)
    for index in acks:
        tracker.ack(handles[index])
    assert sorted(tracker.committable(), key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize("records, acks, expected", CASES)
def test_outstanding_counts_unacked_tracked_records(records, acks, expected):
    tracker = OffsetTracker("conn")
    handles = submit_all(tracker, records)
    tracked = [h for h in handles if h is not None]
    assert tracker.outstanding == len(tracked)
    for index in acks:
        tracker.ack(handles[index])
    acked = {index for index in acks if handles[index] is not None}
    assert tracker.outstanding == len(tracked) - len(acked)


@pytest.mark.parametrize("partition, offset", [(None, None), (None, {"seq": 1}), (P0, None)])
def test_records_without_position_are_not_tracked(partition, offset):
    tracker = OffsetTracker("conn")
    assert tracker.submit(partition, offset) is None
    tracker.ack(None)  # acking "nothing" is harmless
    assert tracker.outstanding == 0
    assert tracker.committable() == []


def test_committable_consumes():
    tracker = OffsetTracker("conn")
    handles = submit_all(tracker, sequence(P0, 4))
    tracker.ack(handles[0])
    tracker.ack(handles[1])
    assert tracker.committable() == [(P0, {"seq": 1})]
    assert tracker.committable() == []  # nothing new since
    tracker.ack(handles[3])
    assert tracker.committable() == []  # seq 2 still in flight
    tracker.ack(handles[2])
    assert tracker.committable() == [(P0, {"seq": 3})]
    assert tracker.committable() == []


def test_submissions_after_a_commit():
    tracker = OffsetTracker("conn")
    (first,) = submit_all(tracker, sequence(P0, 1))
    tracker.ack(first)
    assert tracker.committable() == [(P0, {"seq": 0})]
    later = submit_all(tracker, sequence(P0, 2, start=1))
    tracker.ack(later[1])
    assert tracker.committable() == []
    tracker.ack(later[0])
    assert tracker.committable() == [(P0, {"seq": 2})]


def test_partitions_compare_by_value_not_key_order():
    tracker = OffsetTracker("conn")
    a = tracker.submit({"topic": "t", "partition": 0}, {"offset": 1})
    b = tracker.submit({"partition": 0, "topic": "t"}, {"offset": 2})
    tracker.ack(b)
    assert tracker.committable() == []  # same source partition: b waits for a
    tracker.ack(a)
    assert tracker.committable() == [({"topic": "t", "partition": 0}, {"offset": 2})]


def test_double_ack_counts_once():
    tracker = OffsetTracker("conn")
    handles = submit_all(tracker, sequence(P0, 2))
    tracker.ack(handles[0])
    tracker.ack(handles[0])
    assert tracker.outstanding == 1
    assert tracker.committable() == [(P0, {"seq": 0})]
    tracker.ack(handles[0])  # after it was consumed
    assert tracker.outstanding == 1


def test_submitted_dicts_are_copied():
    tracker = OffsetTracker("conn")
    partition, offset = {"stream": 0}, {"seq": 0}
    handle = tracker.submit(partition, offset)
    partition["stream"] = 99
    offset["seq"] = 99
    tracker.ack(handle)
    assert tracker.committable() == [({"stream": 0}, {"seq": 0})]


def test_same_offset_submitted_twice():
    tracker = OffsetTracker("conn")
    first, second = submit_all(tracker, [(P0, {"seq": 5}), (P0, {"seq": 5})])
    tracker.ack(second)
    assert tracker.committable() == []
    tracker.ack(first)
    assert tracker.committable() == [(P0, {"seq": 5})]
    assert tracker.outstanding == 0


def test_many_records_out_of_order():
    tracker = OffsetTracker("conn")
    handles = submit_all(tracker, sequence(P0, 100))
    order = list(range(1, 100, 2)) + list(range(0, 100, 2))  # odds, then evens
    for index in order:
        tracker.ack(handles[index])
        # while odds are acked, seq 0 blocks everything; each even then releases itself and the next odd
        expected = [] if index % 2 else [(P0, {"seq": index + 1})]
        assert tracker.committable() == expected
    assert tracker.outstanding == 0
