"""OwnedClients: every client a task opened through its context is stopped by close_all, a producer
giving up at once on what it has not had acknowledged, and a client that will not stop is named.

The real case (a task whose stop hung against unreachable clusters) is
tests/faults/test_stop_with_clusters_down.py.
"""

from __future__ import annotations

import asyncio
import contextlib

from mirrorline.api.clients import KafkaClients
from mirrorline.runtime.owned_clients import OwnedClients


class StandIn:
    def __init__(self, hang: bool = False):
        self.hang = hang
        self.stops: list[str] = []

    async def stop(self) -> None:
        self.stops.append("stop")
        if self.hang:
            await asyncio.Event().wait()


class StandInProducer(StandIn):
    async def stop_within(self, timeout: float) -> int:
        self.stops.append(f"stop_within({timeout:g})")
        return 0


class StandInClients(KafkaClients):
    def __init__(self):
        self.made: list[StandIn] = []
        self.hang_next = False

    def _make(self, kind):
        client = kind(self.hang_next)
        self.made.append(client)
        return client

    def admin(self, props):
        return self._make(StandIn)

    def consumer(self, props, *, fetch_batches=None, fetch_sessions=False, gather_max_wait_ms=None,
                 gather_trickle_wait_ms=None, share=None):
        return self._make(StandIn)

    def producer(self, props):
        return self._make(StandInProducer)

    async def security_problem(self, props, timeout_s=10.0):
        return None

    def quiet_logs(self):
        return contextlib.nullcontext()


async def test_close_all_stops_every_client_handed_out_and_a_producer_gives_up_at_once():
    underneath = StandInClients()
    owned = OwnedClients(underneath, "Task t-0")
    admin, consumer, producer = owned.admin({}), owned.consumer({}, share="s"), owned.producer({})
    await owned.close_all(1.0)
    assert admin.stops == ["stop"] and consumer.stops == ["stop"]
    assert producer.stops == ["stop_within(0)"]
    await owned.close_all(1.0)  # handed out once, closed once
    assert admin.stops == ["stop"]


async def test_a_client_that_will_not_stop_is_named_and_does_not_hold_up_the_others(caplog):
    underneath = StandInClients()
    owned = OwnedClients(underneath, "Task t-0")
    underneath.hang_next = True
    owned.consumer({})
    underneath.hang_next = False
    producer = owned.producer({})
    await asyncio.wait_for(owned.close_all(0.2), 2)
    assert producer.stops == ["stop_within(0)"]
    assert "Task t-0: a StandIn it opened did not close" in caplog.text


async def test_clients_a_task_left_open_after_its_stop_are_closed_and_named(caplog):
    underneath = StandInClients()
    owned = OwnedClients(underneath, "Task t-0")
    closed, forgotten, producer = owned.admin({}), owned.consumer({}), owned.producer({})
    closed.is_open, forgotten.is_open, producer.is_open = False, True, True  # the task stopped only the admin
    kinds = await owned.close_left_open(3.0)
    assert sorted(kinds) == ["StandIn", "StandInProducer"]
    assert closed.stops == [] and forgotten.stops == ["stop"]
    assert producer.stops == ["stop_within(3)"]  # left open, not abandoned: its writes get the time there is
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and all(m.startswith("Task t-0: its stop() left a ") for m in warned), warned
    assert any("left a StandInProducer open that it made through context.clients" in m for m in warned)


async def test_a_task_that_closed_its_clients_gets_no_warning(caplog):
    owned = OwnedClients(StandInClients(), "Task t-0")
    consumer = owned.consumer({})
    consumer.is_open = False
    assert await owned.close_left_open(3.0) == []
    assert consumer.stops == [] and "left a" not in caplog.text
