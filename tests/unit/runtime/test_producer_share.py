"""The bookkeeping of producers shared by a connector's tasks in one process (``tasks.share.clients``).

A stand-in producer counts starts and stops (a pure unit test: tests/integration/mirror/
test_shared_task_clients.py shares real producers against real brokers).
"""

from __future__ import annotations

import pytest

from mirrorline.clients.consumer_share import settings_key
from mirrorline.runtime.producer_share import ProducerShares


class StandIn:
    made = 0

    def __init__(self, fail: bool = False):
        StandIn.made += 1
        self.starts = self.stops = 0
        self.fail = fail

    async def start(self):
        self.starts += 1
        if self.fail:
            raise RuntimeError("broker down")

    async def stop(self):
        self.stops += 1

    async def flush(self):
        return None


async def test_tasks_with_equal_settings_hold_one_producer_and_the_last_stops_it():
    shares = ProducerShares()
    made: list[StandIn] = []

    def make():
        made.append(StandIn())
        return made[-1]

    first = shares.producer("c|w", {"acks": "all", "client_id": "task-0"}, make)
    second = shares.producer("c|w", {"acks": "all", "client_id": "task-1"}, make)  # client ids differ: still shared
    other = shares.producer("c|w", {"acks": "1", "client_id": "task-2"}, make)    # other settings: its own
    await first.start()
    await second.start()
    await other.start()
    assert len(made) == 2 and made[0].starts == 1 and first.holders == 2
    await first.flush()  # the producer's own methods pass through
    await first.stop()
    await first.stop()  # a second stop of one hold changes nothing
    assert made[0].stops == 0 and second.holders == 1
    await second.stop()
    assert made[0].stops == 1
    await other.stop()
    assert len(shares) == 0

    # a task that joins after the last one stopped gets a new producer
    again = shares.producer("c|w", {"acks": "all", "client_id": "task-0"}, make)
    await again.start()
    assert len(made) == 3 and made[2].starts == 1
    await again.stop()


async def test_a_hold_handed_out_before_the_last_stop_gets_a_new_producer():
    shares = ProducerShares()
    made: list[StandIn] = []

    def make():
        made.append(StandIn())
        return made[-1]

    first = shares.producer("c|w", {}, make)
    await first.start()
    late = shares.producer("c|w", {}, make)  # handed out, not started yet
    await first.stop()
    await late.start()
    assert len(made) == 2 and made[0].stops == 1 and made[1].starts == 1
    await late.stop()


async def test_a_failed_start_leaves_nothing_behind():
    shares = ProducerShares()
    hold = shares.producer("c|w", {}, lambda: StandIn(fail=True))
    with pytest.raises(RuntimeError, match="broker down"):
        await hold.start()
    assert len(shares) == 0
    await hold.stop()  # never held: nothing to release


def test_consumers_share_only_with_equal_settings_client_id_aside():
    a = settings_key({"bootstrap.servers": "a:9092", "client.id": "t-0"}, 0, True, 25)
    assert a == settings_key({"client.id": "t-1", "bootstrap.servers": "a:9092"}, 0, True, 25)
    assert a != settings_key({"bootstrap.servers": "a:9092", "client.id": "t-0"}, 0, True, 5)
    assert a != settings_key({"bootstrap.servers": "b:9092"}, 0, True, 25)
