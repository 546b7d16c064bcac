"""CatchUpWatch: when a MirrorSource task's lag ends a backlog (connectors/source_mirror/catch_up.py)."""

from __future__ import annotations

import pytest

from mirrorline.connectors.source_mirror.catch_up import BACKLOG_RECORDS, CatchUpWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watch(clock: Clock | None = None, **kwargs) -> CatchUpWatch:
    return CatchUpWatch(clock=clock or Clock(), **kwargs)


def test_a_backlog_copied_down_to_a_hundredth_of_its_peak_is_caught_up_once():
    w = watch()
    said = [w.lag_is(lag) for lag in (0, 50_000, 400_000, 250_000, 90_000, 4_001, 4_000, 3_000, 0)]
    assert said == [False, False, False, False, False, False, True, False, False]
    assert w.peak == 0  # no longer behind


def test_a_lag_that_never_reached_the_backlog_is_no_catch_up():
    w = watch()
    assert not any(w.lag_is(lag) for lag in (0, BACKLOG_RECORDS - 1, 5_000, 0, BACKLOG_RECORDS - 1, 0))


def test_records_in_flight_at_a_steady_rate_are_not_a_backlog_left():
    """A flow that keeps 20,000 records in flight after a 100,000 backlog has not caught up (over 1 %)."""
    w = watch()
    assert not any(w.lag_is(lag) for lag in (100_000, 60_000, 20_000, 25_000, 20_000, 18_000))
    assert w.peak == 100_000


def test_catch_ups_closer_than_the_gap_share_one_request_and_the_later_one_comes_when_the_gap_is_over():
    clock = Clock()
    w = watch(clock, min_gap_s=10.0)
    assert [w.lag_is(lag) for lag in (20_000, 0)] == [False, True]
    clock.now += 3
    assert [w.lag_is(lag) for lag in (30_000, 10)] == [False, False]  # a second burst, 3 s later
    clock.now += 4
    assert not w.lag_is(5)  # still inside the gap
    clock.now += 4
    assert w.lag_is(5)  # 11 s after the first: the second burst's catch-up is said now
    assert w.peak == 0


def test_a_rising_lag_after_a_catch_up_starts_a_new_backlog():
    w = watch()
    assert [w.lag_is(lag) for lag in (10_000, 100)] == [False, True]
    assert w.peak == 0 and not w.lag_is(100)
    assert w.lag_is(50_000) is False and w.peak == 50_000


def test_the_backlog_must_be_a_positive_count():
    with pytest.raises(ValueError, match="backlog_records must be 1 or more"):
        CatchUpWatch(backlog_records=0)
