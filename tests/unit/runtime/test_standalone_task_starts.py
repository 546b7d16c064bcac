"""A standalone herder starts a connector's tasks side by side, as Connect starts each on its own thread."""

from __future__ import annotations

import asyncio

from mirrorline.api import SourceConnector, SourceRecord, SourceTask
from mirrorline.plugins import full_name
from mirrorline.runtime.standalone import StandaloneHerder
from mirrorline.runtime.worker_config import WORKER_CONFIG_DEF
from mirrorline.storage.configs import MemoryConfigStore
from mirrorline.storage.offsets import MemoryOffsetStore
from mirrorline.storage.status import MemoryStatusStore, State
from support.herder_fakes import eventually, patch_record_producer, registry_of

START_DELAY_S = 1.0
STARTED: list[int] = []


class SlowStartConnector(SourceConnector):
    """Three tasks whose start() takes START_DELAY_S each."""

    async def start(self, config) -> None:
        pass

    def task_class(self):
        return SlowStartTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"task": str(i)} for i in range(max_tasks)]

    async def stop(self) -> None:
        pass


class SlowStartTask(SourceTask):
    """Sleeps through its start(), then polls nothing."""

    async def start(self, config: dict[str, str]) -> None:
        await asyncio.sleep(START_DELAY_S)
        STARTED.append(int(config["task"]))

    async def poll(self) -> list[SourceRecord]:
        await asyncio.sleep(0.05)
        return []

    async def stop(self) -> None:
        pass


async def test_standalone_herder_starts_tasks_side_by_side(monkeypatch):
    patch_record_producer(monkeypatch)
    STARTED.clear()
    raw = {"bootstrap.servers": "127.0.0.1:1"}
    herder = StandaloneHerder("127.0.0.1:18083", WORKER_CONFIG_DEF.parse(raw), registry_of(SlowStartConnector),
                              offset_store=MemoryOffsetStore(), config_store=MemoryConfigStore(),
                              status_store=MemoryStatusStore())
    await herder.start()
    try:
        loop = asyncio.get_running_loop()
        began = loop.time()
        await herder.put_connector_config(
            "slow", {"connector.class": full_name(SlowStartConnector), "tasks.max": "3"}, allow_replace=False)
        await eventually(lambda: sorted(STARTED) == [0, 1, 2], timeout=5.0, what="three tasks started")
        elapsed = loop.time() - began
        # one after another, the last task would have waited for the two before it: 3 s
        assert elapsed < 2.5 * START_DELAY_S, f"three tasks taking {START_DELAY_S} s each to start took {elapsed:.2f}s"
        await eventually(lambda: all(s.state == State.RUNNING for s in herder.status_store.tasks("slow").values())
                         and len(herder.status_store.tasks("slow")) == 3, what="three tasks RUNNING")
    finally:
        await herder.stop()
