"""Topic-change signs held back while batches fetched before them wait (``mirrorline.clients.sign_order``).

The fetch loop's side is tested against a real broker in tests/integration/test_batch_fetcher.py;
this is the bookkeeping alone.
"""

from __future__ import annotations

from mirrorline.clients.fetch_errors import FetchErrorWatch
from mirrorline.clients.sign_order import SignOrder


def make() -> tuple[SignOrder, FetchErrorWatch, list[str]]:
    watch = FetchErrorWatch()
    replanned: list[str] = []
    return SignOrder(watch, replanned.append), watch, replanned


def test_a_sign_of_a_topic_with_nothing_waiting_goes_to_the_watch_at_once():
    order, watch, replanned = make()
    order.sign("t", 1, error=True)
    assert watch.take() == {"t": 1} and watch.noted == 1
    assert order.held == {} and replanned == []


def test_a_sign_waits_until_every_partition_of_its_topic_was_handed_over():
    order, watch, replanned = make()
    order.batches_waiting("t")
    order.batches_waiting("t")
    order.batches_waiting("other")
    order.sign("t", 2)
    assert watch.take() == {} and order.held == {"t": 2}
    order.batches_taken("t")
    order.release_due()
    assert watch.take() == {} and replanned == []  # one partition of t still waits
    order.batches_taken("t")
    order.release_due()
    assert watch.take() == {"t": 2} and replanned == ["t"] and order.held == {}
    assert watch.noted == 0  # a session gap, not an error


def test_a_second_sign_while_one_is_held_is_held_too_with_the_latest_broker():
    order, watch, _replanned = make()
    order.batches_waiting("t")
    order.sign("t", 1)
    order.batches_taken("t")
    order.sign("t", 3)  # nothing waits now, but the first sign has not gone out: keep the order
    assert watch.take() == {} and order.held == {"t": 3}
    order.release_due()
    assert watch.take() == {"t": 3}


def test_a_new_assignment_lets_every_held_sign_go():
    order, watch, replanned = make()
    order.batches_waiting("a")
    order.batches_waiting("b")
    order.sign("a", 1)
    order.sign("b", 1)
    order.forget_batches()
    assert watch.take() == {"a": 1, "b": 1} and sorted(replanned) == ["a", "b"]
    order.sign("a", 1)  # nothing waits any more
    assert watch.take() == {"a": 1}


def test_without_a_watch_nothing_is_held():
    replanned: list[str] = []
    order = SignOrder(None, replanned.append)
    order.batches_waiting("t")
    order.sign("t", 1, error=True)
    assert order.held == {}
    order.release_due()
    assert replanned == []
