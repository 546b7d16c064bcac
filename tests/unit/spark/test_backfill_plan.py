"""The backfill's planning rules, without Kafka: positions, ranges, refusals, resumption, exact translation."""

from __future__ import annotations

import pytest

from mirrorline.api import ConfigError, ConnectError

from mirrorline.connectors.mm2.backfill_plan import (Bounds, Position, exact_downstream, parse_position, plan_partition,
                                          select_topics, topic_pattern)


def plan(bounds=Bounds(0, 100), start="earliest", end="latest", allow_gaps=False, stored=None, checkpoint=None,
         target=(0, 0)):
    return plan_partition("orders", 0, "A.orders", bounds, parse_position("--from", start),
                          parse_position("--to", end), allow_gaps, stored, checkpoint, *target)


def test_positions_parse_and_reject_garbage():
    assert parse_position("--from", "earliest") == Position("earliest")
    assert parse_position("--from", "offset:42") == Position("offset", 42)
    assert parse_position("--to", "timestamp:1700000000000") == Position("timestamp", 1_700_000_000_000)
    with pytest.raises(ConfigError, match="--from 'yesterday': expected earliest"):
        parse_position("--from", "yesterday")


def test_whole_log_by_default_and_end_is_exclusive():
    r, state = plan(Bounds(5, 100))
    assert state == "copy" and (r.start, r.end, r.base, r.gap) == (5, 100, 0, 0)
    r, _ = plan(Bounds(0, 100), start="offset:10", end="offset:20")
    assert (r.start, r.end, r.size) == (10, 20, 10)


def test_to_beyond_the_log_end_is_clamped_and_timestamps_resolve():
    r, _ = plan(Bounds(0, 100), end="offset:500")
    assert r.end == 100
    bounds = Bounds(0, 100, {1000: 30, 2000: None})
    r, _ = plan(bounds, start="timestamp:1000", end="timestamp:2000")
    assert (r.start, r.end) == (30, 100)


def test_empty_range_is_reported_as_empty():
    assert plan(Bounds(0, 100), start="offset:100") == (None, "empty")
    assert plan(Bounds(0, 0)) == (None, "empty")


def test_range_below_log_start_is_refused_unless_gaps_allowed():
    with pytest.raises(ConnectError, match=r"orders-0: the range starts at offset 0 but the log starts at 40 "
                                           r"\(offsets 0\.\.39 were deleted"):
        plan(Bounds(40, 100), start="offset:0")
    r, state = plan(Bounds(40, 100), start="offset:0", allow_gaps=True)
    assert state == "copy" and (r.start, r.gap) == (40, 40)


def test_partition_already_streamed_or_target_not_empty_is_refused():
    with pytest.raises(ConnectError, match="MirrorSource has already streamed this partition"):
        plan(stored=57)
    with pytest.raises(ConnectError, match=r"A.orders-0 already holds records \(offsets 0\.\.9\)"):
        plan(target=(0, 10))


def test_checkpoint_resumes_its_own_range_and_done_is_skipped():
    checkpoint = {"start": 3, "end": 80, "base": 0, "remote": "A.orders", "done": False}
    r, state = plan(checkpoint=checkpoint, target=(0, 40))  # the target holding records is expected here
    assert state == "resume" and (r.start, r.end, r.base) == (3, 80, 0)
    assert plan(checkpoint={**checkpoint, "done": True}, stored=79) == (None, "done")


def test_topic_selection_names_unknown_topics():
    topics = {"orders": 3, "payments": 1}
    assert select_topics(topics, topic_pattern("ord.*"), "ord.*", "A->B") == {"orders": 3}
    with pytest.raises(ConnectError, match=r"unknown topic: no topic the flow A->B mirrors matches --topics 'x'"):
        select_topics(topics, topic_pattern("x"), "x", "A->B")
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        topic_pattern("(")


def test_exact_downstream_counts_between_syncs_and_skips_gaps():
    # upstream 10..19 copied to 0..9, then a gap (20, 21 are transaction markers), 22..29 to 10..17
    syncs = [(10, 0), (22, 10), (29, 17)]
    assert exact_downstream(10, 10, 30, 18, syncs) == 0
    assert exact_downstream(15, 10, 30, 18, syncs) == 5
    assert exact_downstream(20, 10, 30, 18, syncs) == 10  # inside the gap: resumes at the next record's copy
    assert exact_downstream(21, 10, 30, 18, syncs) == 10
    assert exact_downstream(25, 10, 30, 18, syncs) == 13
    assert exact_downstream(30, 10, 30, 18, syncs) == 18  # everything read: the target's end
    assert exact_downstream(9, 10, 30, 18, syncs) is None
    assert exact_downstream(31, 10, 30, 18, syncs) is None


def test_interrupted_backfill_does_not_resume_over_streaming():
    checkpoint = {"start": 0, "end": 80, "base": 0, "remote": "A.orders", "done": False}
    assert plan(checkpoint=checkpoint, stored=79)[1] == "resume"  # killed after the hand-off, before "done"
    with pytest.raises(ConnectError, match=r"cannot resume: MirrorSource has streamed it since \(stored source "
                                           r"offset 120\)"):
        plan(checkpoint=checkpoint, stored=120)
