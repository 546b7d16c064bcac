"""A distributed herder whose config topic refuses the task configs fails the connector, saying which
settings to raise, instead of leaving it RUNNING without tasks and a log line only.

The store is the in-memory one of :mod:`support.herder_fakes`, made to refuse task configs as
``KafkaConfigStore`` does when a record is over the config topic's ``max.message.bytes``
(tests/integration/test_task_config_scale.py checks that against a real broker).
"""

from __future__ import annotations

from mirrorline.api import SourceConnector, SourceTask
from mirrorline.api.errors import RecordTooLargeError
from mirrorline.plugins import full_name
from mirrorline.storage.kafka_configs import TaskConfigsTooLargeError
from mirrorline.storage.status import State
from support.herder_fakes import InMemoryConfigStore, patch_record_producer, registry_of, start_distributed_herder


class BigTasksConnector(SourceConnector):
    """Returns one task config; never starts a task (the store refuses it)."""

    async def start(self, config) -> None:
        self.name = config["name"]

    def task_class(self):
        return SourceTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"payload": "x" * 100}]

    async def stop(self) -> None:
        pass


class SmallConfigTopic(InMemoryConfigStore):
    """Refuses every task config as a config topic with a too small max.message.bytes does."""

    async def put_task_configs(self, connector, configs):
        raise TaskConfigsTooLargeError("connect-configs", connector, 2_000_000,
                                       RecordTooLargeError("The request included a message larger than the max", code=10))


async def test_task_configs_over_the_config_topic_limit_fail_the_connector_naming_the_setting(monkeypatch):
    patch_record_producer(monkeypatch)
    rig = await start_distributed_herder(registry_of(BigTasksConnector), config_store=SmallConfigTopic())
    try:
        await rig.rebalance()
        created, _ = await rig.herder.put_connector_config(
            "big", {"connector.class": full_name(BigTasksConnector), "tasks.max": "1"}, allow_replace=False)
        assert created
        await rig.rebalance_until_stable()
        status = rig.status_store.connector("big")
        assert status is not None and status.state == State.FAILED
        assert "max.message.bytes" in status.trace and "connect-configs" in status.trace
        assert "tasks.max" in status.trace and "2000000 bytes" in status.trace
        assert rig.config_store.task_configs("big") == []
    finally:
        await rig.stop()
