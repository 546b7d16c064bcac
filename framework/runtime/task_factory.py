"""TaskFactory: the one place a task's runner is built, source or sink (Connect's ``Worker.buildWorkerTask``).

The :class:`~mirrorline.runtime.worker.Worker` decides *whether* a task runs here; this module
decides *how*: which runner (:class:`~mirrorline.runtime.worker_task.WorkerSourceTask`, its
exactly-once variant, or :class:`~mirrorline.runtime.sink_task.WorkerSinkTask`), its clients'
settings, its transforms, converters and error handling, and the :class:`TaskListener` it
reports to.

Client settings layer as Connect layers them, for every role (:func:`client_props`): the
worker's ``bootstrap.servers``, a ``client.id`` naming the task, the worker's ``producer.*`` /
``consumer.*`` / ``admin.*`` settings, then the connector's ``producer.override.*`` /
``consumer.override.*`` / ``admin.override.*``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mirrorline.api.config import Config, split_list
from mirrorline.api.errors import ConfigError
from mirrorline.api.records import ConnectorTaskId
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.connector_config import ADMIN_OVERRIDE_PREFIX, PRODUCER_OVERRIDE_PREFIX
from mirrorline.runtime.context import StoreOffsetReader
from mirrorline.runtime.converters import build_converters, source_converters
from mirrorline.runtime.error_handling import ErrorHandler
from mirrorline.runtime.exactly_once_task import ExactlyOnceSettings, ExactlyOnceWorkerSourceTask
from mirrorline.runtime.sink_config import (CONSUMER_OVERRIDE_PREFIX, CONSUMER_PREFIX, TOPICS, TOPICS_REGEX,
                                            check_topics, is_sink)
from mirrorline.runtime.sink_task import WorkerSinkTask
from mirrorline.runtime.task_runner import TaskRunner
from mirrorline.runtime.topic_creation import TopicCreation, TopicCreator
from mirrorline.runtime.transform_chain import TransformChain, build_chain
from mirrorline.runtime.worker_config import PRODUCER_PREFIX
from mirrorline.runtime.worker_task import DEFAULT_DELIVERY_TIMEOUT_MS, WorkerSourceTask
from mirrorline.storage.offsets import OffsetStore
from mirrorline.storage.status import State

log = logging.getLogger(__name__)

#: client role -> (the worker's prefix, the connector's override prefix), as in Connect.
CLIENT_PREFIXES = {
    "producer": (PRODUCER_PREFIX, PRODUCER_OVERRIDE_PREFIX),
    "consumer": (CONSUMER_PREFIX, CONSUMER_OVERRIDE_PREFIX),
    "admin": ("admin.", ADMIN_OVERRIDE_PREFIX),
}


class TaskListener(Protocol):
    """What a running task tells its worker. Every runner the factory builds reports through one."""

    async def task_state_changed(self, task_id: ConnectorTaskId, state: State, trace: str | None) -> None:
        """The task is RUNNING, PAUSED ... now (``trace`` only with FAILED); record it."""

    async def task_failed(self, task_id: ConnectorTaskId, exc: BaseException) -> None:
        """The task failed for good (its loops are stopped): FAILED with trace, log, metric, supervisor."""

    def topic_written(self, connector: str, topic: str) -> None:
        """The connector's task wrote to (source) or read from (sink) ``topic`` for the first time."""


def client_props(role: str, worker_config: Config, connector_settings: Config, client_id: str) -> dict[str, Any]:
    """Java-style settings of one client of a task: worker bootstrap and ``<role>.*``, then the connector's overrides."""
    worker_prefix, override_prefix = CLIENT_PREFIXES[role]
    return {
        "bootstrap.servers": ",".join(worker_config["bootstrap.servers"]),
        "client.id": client_id,
        **worker_config.with_prefix(worker_prefix),
        **connector_settings.with_prefix(override_prefix),
    }


def delivery_timeout_ms(value: Any) -> int:
    """The producer's ``delivery.timeout.ms`` (Kafka's default when unset); ConfigError if it is not a positive number."""
    if value is None:
        return DEFAULT_DELIVERY_TIMEOUT_MS
    try:
        parsed = int(str(value).strip())
    except ValueError:
        parsed = 0
    if parsed < 1:
        raise ConfigError(f"delivery.timeout.ms (producer.delivery.timeout.ms on the worker or "
                          f"producer.override.delivery.timeout.ms on the connector): {value!r} is not a positive "
                          f"number of milliseconds")
    return parsed


@dataclass
class TaskFactory:
    """Builds task runners for one worker (see the module docstring).

    ``offset_store_for`` and ``exactly_once`` are set by a distributed herder: a source
    connector's own offset store (``offsets.storage.topic``), and a source task's exactly-once
    settings when the worker has ``exactly.once.source.support=enabled`` (KIP-618).
    """

    worker_config: Config
    plugins: PluginRegistry
    listener: TaskListener
    offset_store: OffsetStore
    start_timeout_s: float
    offset_store_for: Callable[[str, Config], Awaitable[OffsetStore]] | None = None
    exactly_once: Callable[[ConnectorTaskId, Config, OffsetStore], ExactlyOnceSettings] | None = None

    async def build(self, task_id: ConnectorTaskId, task: Any, task_config: dict[str, str],
                    connector_class: type, connector_settings: Config) -> TaskRunner:
        """The runner of ``task``, ready to ``start``; raises (naming the setting) when it cannot be built."""
        transforms = build_chain(connector_settings.originals, self.plugins)  # None without transforms
        try:
            if is_sink(connector_class):
                return self._sink(task_id, task, task_config, connector_settings, transforms)
            return await self._source(task_id, task, task_config, connector_class, connector_settings, transforms)
        except BaseException:
            if transforms is not None:
                transforms.close()
            raise

    def _common(self, task_id: ConnectorTaskId) -> dict[str, Any]:
        """Constructor arguments every runner takes: the listener's callbacks and the worker's timings."""
        return {"on_status": self.listener.task_state_changed, "on_failure": self.listener.task_failed,
                "on_topic": self.listener.topic_written, "start_timeout_s": self.start_timeout_s,
                "flush_interval_s": self.worker_config["offset.flush.interval.ms"] / 1000}

    def _client_id(self, task_id: ConnectorTaskId, suffix: str = "") -> str:
        return f"{self.worker_config['client.id']}-{task_id}{suffix}"

    async def _source(self, task_id: ConnectorTaskId, task: Any, task_config: dict[str, str], connector_class: type,
                      connector_settings: Config, transforms: TransformChain | None) -> WorkerSourceTask:
        converters = source_converters(connector_settings, self.worker_config, self.plugins)  # None: ByteArray
        producer_props = client_props("producer", self.worker_config, connector_settings, self._client_id(task_id))
        delivery_ms = delivery_timeout_ms(producer_props.pop("delivery.timeout.ms", None))
        creation = TopicCreation.from_config(connector_settings.originals, self.worker_config["topic.creation.enable"])
        kwargs, ignored = client_kwargs(producer_props, "producer")
        if ignored:
            log.info("Task %s: producer settings with no aiokafka equivalent are ignored: %s", task_id, ignored)
        creator = None
        if creation is not None:
            creator = TopicCreator(task_id, creation, client_props("admin", self.worker_config, connector_settings,
                                                                   self._client_id(task_id, "-admin")))
        # No topic creation and a connector that does not create its topics: let the broker's
        # auto.create.topics.enable decide, as for Kafka Connect's producer.
        kwargs["allow_auto_create_topics"] = creation is None and not getattr(connector_class, "creates_own_topics",
                                                                              False)
        store = self.offset_store if self.offset_store_for is None else \
            await self.offset_store_for(task_id.connector, connector_settings)
        runner: type[WorkerSourceTask] = WorkerSourceTask
        extra: dict[str, Any] = {}
        if self.exactly_once is not None:  # records and offsets in one transaction (KIP-618)
            runner = ExactlyOnceWorkerSourceTask
            extra = {"exactly_once": self.exactly_once(task_id, connector_settings, store)}
        elif connector_settings["tasks.share.clients"]:
            # this worker's tasks of the connector, and no other worker's (several workers may share a process)
            extra = {"client_share": f"{task_id.connector}|worker-{id(self):x}"}
        return runner(
            task_id, task, task_config, producer_kwargs=kwargs, offset_store=store,
            offset_reader=StoreOffsetReader(store, task_id.connector),
            stall_timeout_s=self.worker_config["task.stall.timeout.ms"] / 1000, transforms=transforms,
            converters=converters, errors=ErrorHandler.from_config(task_id, connector_settings),
            topic_creator=creator, delivery_timeout_s=delivery_ms / 1000, **self._common(task_id), **extra)

    def _sink(self, task_id: ConnectorTaskId, task: Any, task_config: dict[str, str], connector_settings: Config,
              transforms: TransformChain | None) -> WorkerSinkTask:
        settings = connector_settings.originals
        check_topics(settings)  # ConfigError naming the field unless exactly one of topics / topics.regex
        kwargs, ignored = client_kwargs(client_props("consumer", self.worker_config, connector_settings,
                                                     self._client_id(task_id)), "consumer")
        if ignored:
            log.info("Task %s: consumer settings with no aiokafka equivalent are ignored: %s", task_id, ignored)
        converters = build_converters(connector_settings, self.worker_config, self.plugins)
        if converters.is_passthrough:  # ByteArray all round: the sink gets bytes and no converter code runs
            converters.close()
            converters = None
        # The dead letter queue is written with the worker's producer settings, as Connect does.
        dlq_props = client_props("producer", self.worker_config, connector_settings, self._client_id(task_id, "-dlq"))
        errors = ErrorHandler.from_config(task_id, connector_settings, sink=True, client_props=dlq_props)
        return WorkerSinkTask(
            task_id, task, task_config, consumer_kwargs=kwargs, topics=split_list(settings.get(TOPICS) or ""),
            topics_regex=str(settings.get(TOPICS_REGEX) or "").strip() or None,
            transforms=transforms, converters=converters, error_handler=errors, **self._common(task_id))
