"""A distributed worker's stop with its internal topics' cluster unreachable: once the status writes
of the stop timed out, its stores do not wait for their unacknowledged writes again, and they close
side by side.

Measured before (docs/operations.md, *Stopping with a cluster unreachable*): each store's close
waited out its unacknowledged writes (5 s) one after another, the status store's again after the
stop had already waited for the same status writes.
"""

from __future__ import annotations

import asyncio
import logging

from support.herder_fakes import registry_of, start_distributed_herder


class SlowStore:
    """Takes a while to close, as a Kafka-backed store whose writes are not acknowledged."""

    def __init__(self) -> None:
        self.waits: list[float | None] = []

    async def stop(self, writes_wait_s: float | None = None) -> None:
        self.waits.append(writes_wait_s)
        await asyncio.sleep(0.3)


async def test_status_writes_that_timed_out_are_given_up_at_once_and_stores_close_side_by_side(caplog):
    rig = await start_distributed_herder(registry_of(), {"task.shutdown.graceful.timeout.ms": "200"})
    herder = rig.herder
    real_stores = (herder.config_store, herder.status_store, herder.offset_store)
    try:
        herder._stopping = True  # status writes are bounded only on the way out

        async def never_acknowledged() -> None:
            await asyncio.sleep(30)

        with caplog.at_level(logging.WARNING):
            await herder._record_states([never_acknowledged()], "1 task(s) stopped")
        assert any("could not record in the status topic that 1 task(s) stopped" in r.getMessage()
                   for r in caplog.records)

        stores = [SlowStore(), SlowStore(), SlowStore()]
        herder.config_store, herder.status_store, herder.offset_store = stores
        loop = asyncio.get_running_loop()
        started = loop.time()
        await herder._stop_stores()
        assert loop.time() - started < 0.6  # side by side: 0.3 s, not 0.9
        assert [store.waits for store in stores] == [[0], [0], [0]]  # its cluster is unreachable: no store waits
    finally:
        herder.config_store, herder.status_store, herder.offset_store = real_stores
        await rig.stop()


async def test_a_store_failing_to_close_is_logged_and_the_others_still_close(caplog):
    rig = await start_distributed_herder(registry_of())
    herder = rig.herder
    real_stores = (herder.config_store, herder.status_store, herder.offset_store)

    class Failing(SlowStore):
        async def stop(self, writes_wait_s=None):
            raise RuntimeError("broken")
    try:
        stores = [Failing(), SlowStore(), SlowStore()]
        herder.config_store, herder.status_store, herder.offset_store = stores
        with caplog.at_level(logging.WARNING):
            await herder._stop_stores()
        assert stores[1].waits == [None] and stores[2].waits == [None]  # the statuses were recorded: normal wait
        assert any("closing its Failing failed: RuntimeError('broken')" in r.getMessage() for r in caplog.records)
    finally:
        herder.config_store, herder.status_store, herder.offset_store = real_stores
        await rig.stop()
