"""Connector and task statuses in Kafka Connect's status topic.

Records (string keys, schemaless JSON values, as Java Connect writes them):
``status-connector-<name>`` and ``status-task-<name>-<n>`` ->
``{"state": s, "trace": s|null, "worker_id": s, "generation": n}``; null removes the status.
``mirrorline-job-status-<name>`` records hold bulk jobs' states, read and written by the
:attr:`KafkaStatusStore.jobs` section (:mod:`mirrorline.storage.kafka_jobs`). A task status may
carry ``config_digest`` (beyond Connect, ignored by Java workers): a digest of the task config
the instance runs, so a worker can tell whether every instance runs its current config.
Other keys (``status-topic-*`` active-topic records) are skipped, as are records that cannot be
parsed or carry a state this framework does not know (both logged).

Every worker reads every status from the topic (compacted, ``status.storage.partitions``
partitions, default 5; records partitioned by key), so any worker's REST API can answer for
every connector. Writes wait for the broker's acknowledgement and for this store to read the
topic to its end, so a status is visible here on return and on other workers a moment later.
The last write of a key wins; unlike Java Connect this store does not guard writes by
generation (the herder decides who may write a status).

Topic settings (worker config): ``status.storage.topic``, ``status.storage.partitions``
(default 5), ``status.storage.replication.factor`` (default 3).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mirrorline.api.kafka import ConsumerRecord

from mirrorline.storage.jobs import JOB_STATUS_PREFIX
from mirrorline.storage.kafka_jobs import KafkaJobStatuses
from mirrorline.storage.kafka_log import KafkaBasedLog, LogBackedStore, storage_settings
from mirrorline.storage.status import State, Status, StatusStore

log = logging.getLogger(__name__)

DEFAULT_PARTITIONS = 5
DEFAULT_REPLICATION_FACTOR = 3

CONNECTOR_PREFIX = "status-connector-"
TASK_PREFIX = "status-task-"


def status_value(status: Status) -> bytes:
    """The record value, fields in the order of Connect's status schema (then ``config_digest`` if known)."""
    value = {"state": status.state.value, "trace": status.trace, "worker_id": status.worker_id,
             "generation": status.generation}
    if status.config_digest is not None:
        value["config_digest"] = status.config_digest
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class KafkaStatusStore(LogBackedStore, StatusStore):
    """Statuses kept in the compacted status topic (distributed mode)."""

    def __init__(self, topic: str, client_props: Mapping[str, Any], *, partitions: int = DEFAULT_PARTITIONS,
                 replication_factor: int = DEFAULT_REPLICATION_FACTOR, topic_config: Mapping[str, Any] | None = None):
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[str, dict[int, Status]] = {}
        #: The section holding bulk jobs' statuses (``mirrorline-job-status-*`` records).
        self.jobs = KafkaJobStatuses(self)
        self.log = KafkaBasedLog(topic, client_props, self._on_record, partitions=partitions,
                                 replication_factor=replication_factor, topic_config=topic_config)

    @classmethod
    def from_config(cls, worker_config: Mapping[str, Any]) -> KafkaStatusStore:
        """A store configured from worker settings (client settings come from the same map)."""
        topic, partitions, replication_factor = storage_settings(worker_config, "status.storage", DEFAULT_PARTITIONS,
                                                                 DEFAULT_REPLICATION_FACTOR)
        return cls(topic, worker_config, partitions=partitions, replication_factor=replication_factor)

    async def put_connector(self, connector, status):
        await self._write([(CONNECTOR_PREFIX + connector, status_value(status))])

    async def put_task(self, connector, task, status):
        await self._write([(f"{TASK_PREFIX}{connector}-{task}", status_value(status))])

    def connector(self, connector):
        return self._connectors.get(connector)

    def tasks(self, connector):
        return dict(sorted(self._tasks.get(connector, {}).items()))

    async def remove(self, connector, keep_connector=False):
        records = [(f"{TASK_PREFIX}{connector}-{task}", None) for task in sorted(self._tasks.get(connector, {}))]
        if not keep_connector:
            records.append((CONNECTOR_PREFIX + connector, None))
        await self._write(records)

    async def _write(self, records: list[tuple[str, bytes | None]]) -> None:
        if records:
            await self.log.send_batch([(key.encode("utf-8"), value) for key, value in records])
        await self.log.read_to_end()

    def _on_record(self, record: ConsumerRecord) -> None:
        try:
            key = record.key.decode("utf-8") if record.key is not None else ""
            value = json.loads(record.value) if record.value is not None else None
        except ValueError as exc:
            log.error("status topic %s: skipping record at %d/%d that cannot be parsed: %s",
                      record.topic, record.partition, record.offset, exc)
            return
        if key.startswith(JOB_STATUS_PREFIX):
            self.jobs.on_record(key, value)
            return
        if key.startswith(CONNECTOR_PREFIX):
            connector, task = key[len(CONNECTOR_PREFIX):], None
        elif key.startswith(TASK_PREFIX):
            connector, _, number = key[len(TASK_PREFIX):].rpartition("-")
            if not connector or not number.isdigit():
                log.error("status topic %s: skipping task status with malformed key %r", record.topic, key)
                return
            task = int(number)
        else:
            log.debug("status topic %s: skipping record %r", record.topic, key)
            return
        status = None if value is None else self._parse(key, value)
        if value is not None and status is None:
            return
        if task is None:
            if status is None:
                self._connectors.pop(connector, None)
            else:
                self._connectors[connector] = status
        elif status is None:
            tasks = self._tasks.get(connector, {})
            tasks.pop(task, None)
            if not tasks:
                self._tasks.pop(connector, None)
        else:
            self._tasks.setdefault(connector, {})[task] = status

    @staticmethod
    def _parse(key: str, value: Any) -> Status | None:
        try:
            digest = value.get("config_digest")
            return Status(state=State(value["state"]), worker_id=str(value["worker_id"]),
                          trace=value.get("trace"), generation=int(value.get("generation") or 0),
                          config_digest=str(digest) if digest is not None else None)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("status topic: skipping status %r that cannot be read (%r): %r", key, exc, value)
            return None
