"""Connector configs, task configs and target states in Kafka Connect's config topic.

The topic has exactly one partition (so every worker reads every change in the same order)
and is compacted. Records, string keys and schemaless JSON values, as Java Connect writes them:

- ``connector-<name>`` -> ``{"properties": {...}}``; null when the connector is deleted
  (deletion also forgets its task configs and target state);
- ``task-<name>-<n>`` -> ``{"properties": {...}}``: buffered, not applied yet;
- ``commit-<name>`` -> ``{"tasks": N}``: applies the buffered task configs of the connector at
  once, if tasks ``0..N-1`` are all there (extra, older task records may be left over by
  compaction and are ignored, as Connect ignores them); otherwise the connector's task configs
  are inconsistent and read as empty until a complete commit comes;
- ``target-state-<name>`` -> ``{"state": "STARTED"|"PAUSED", "state.v2": ...}``; STOPPED is
  written ``state=PAUSED, state.v2=STOPPED`` so that workers predating STOPPED read PAUSED;
  ``state.v2`` wins when present; null means "never set" (STARTED).

- ``session-key`` -> ``{"key": <base64>, "algorithm": "HmacSHA256", "creation-timestamp": <ms>}``:
  the key that signs REST requests forwarded between workers (KIP-507), written by the leader;
  the store keeps the latest and the one before it (requests signed during a rotation verify).

- ``tasks-fencing-<name>`` -> ``{"task-count": N}`` (exactly-once source support, KIP-618): written
  by the leader once the transactional producers of the connector's previous generation of tasks
  are fenced; N is the number of tasks of the generation it lets start. Task configs committed
  after a connector's latest such record make it *pending fencing* (:meth:`KafkaConfigStore.
  pending_fencing`): its new tasks wait until the next record. Each complete commit of task
  configs is a new *generation* (:meth:`KafkaConfigStore.task_generation`).
- ``restart-connector-<name>`` -> ``{"include-tasks": bool, "only-failed": bool}``: a restart of the
  connector and (some of) its tasks, written by the leader; every worker restarts what it runs
  of it. Only requests read after ``start()`` are acted on (as Connect: an old request left in
  the compacted topic is not carried out again by a worker that starts later).

- ``mirrorline-job-*``: bulk jobs' configs and target states, read and written by the
  :attr:`KafkaConfigStore.jobs` section (:mod:`mirrorline.storage.kafka_jobs`); Java workers skip them.

Other record types (``logger-cluster-*``) are skipped. Records that cannot be parsed are logged and skipped.

``put_*`` and ``remove_connector`` write, then read the topic to its end, so the change is
visible on return. The ``listener`` is called with ``(kind, connector)`` - kind ``"connector"``
(config written or deleted), ``"tasks"`` (task configs committed), ``"target_state"``,
``"fencing"`` (a task-count record) or ``"restart"`` (a restart request, read with
:meth:`KafkaConfigStore.restart_request`) -
for changes read after ``start()`` loaded the existing records, including this store's own
writes; it runs on the event loop and must not block. ``offset`` is the config-topic offset
read so far (the next offset to read; -1 before anything was read), what Connect workers
compare during rebalances.

Topic settings (worker config): ``config.storage.topic``, ``config.storage.replication.factor``
(default 3). An existing topic with more than one partition is refused, as Connect refuses it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api.errors import ConnectError, RecordTooLargeError
from mirrorline.api.kafka import ConsumerRecord

from mirrorline.storage.configs import ConfigStore, TargetState
from mirrorline.storage.jobs import JOB_KEY_PREFIX
from mirrorline.storage.kafka_jobs import KafkaJobConfigs
from mirrorline.storage.kafka_log import KafkaBasedLog, LogBackedStore, storage_settings

log = logging.getLogger(__name__)

DEFAULT_REPLICATION_FACTOR = 3

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
TASK_COUNT_PREFIX = "tasks-fencing-"
SESSION_KEY_KEY = "session-key"
RESTART_PREFIX = "restart-connector-"


@dataclass(frozen=True)
class SessionKey:
    """The cluster's key for signing forwarded REST requests, as Connect's ``session-key`` record holds it."""

    key: bytes
    algorithm: str
    created_ms: int

    def __repr__(self) -> str:
        return f"SessionKey(algorithm={self.algorithm!r}, created_ms={self.created_ms})"

    @classmethod
    def generate(cls, size_bytes: int = 32) -> SessionKey:
        """A new random HmacSHA256 key (256 bits, Connect's default size)."""
        return cls(secrets.token_bytes(size_bytes), "HmacSHA256", int(time.time() * 1000))

    def record_value(self) -> dict[str, Any]:
        """The ``session-key`` record value."""
        return {"key": base64.b64encode(self.key).decode("ascii"), "algorithm": self.algorithm,
                "creation-timestamp": self.created_ms}


def _encode(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def target_state_value(state: TargetState) -> dict[str, str]:
    """The record value for ``state``: STOPPED doubles as PAUSED for workers that predate it."""
    state = TargetState(state)
    return {"state": TargetState.PAUSED.value if state is TargetState.STOPPED else state.value,
            "state.v2": state.value}


class TaskConfigsTooLargeError(ConnectError):
    """A task config is larger than the config topic (``max.message.bytes``) or the worker's producer
    (``max.request.size``) accepts; the message says which settings to raise. No commit was written,
    so the connector's previous task configs stay in force."""

    def __init__(self, topic: str, connector: str, largest: int, cause: BaseException):
        super().__init__(
            f"The task configs of connector {connector} could not be written to the config topic {topic}: its "
            f"largest task record is {largest} bytes, more than the topic's max.message.bytes (broker default "
            f"1048588) or the worker's max.request.size (default 1048576) allow ({cause!r}). Raise the config "
            f"topic's max.message.bytes (kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
            f"--add-config max.message.bytes=N) and the worker's max.request.size, or raise the connector's "
            f"tasks.max so that each task config holds less")
        self.largest = largest


class KafkaConfigStore(LogBackedStore, ConfigStore):
    """Configs kept in the compacted, single-partition config topic (distributed mode)."""

    def __init__(self, topic: str, client_props: Mapping[str, Any], *,
                 replication_factor: int = DEFAULT_REPLICATION_FACTOR, topic_config: Mapping[str, Any] | None = None,
                 listener: Callable[[str, str], None] | None = None):
        self.listener = listener
        self._configs: dict[str, dict[str, str]] = {}
        self._task_counts: dict[str, int] = {}
        self._tasks: dict[tuple[str, int], dict[str, str]] = {}
        self._deferred: dict[str, dict[int, dict[str, str]]] = {}
        self._inconsistent: set[str] = set()
        self._states: dict[str, TargetState] = {}
        self._task_count_records: dict[str, int] = {}
        self._pending_fencing: set[str] = set()
        self._generations: dict[str, int] = {}
        self._restart_requests: dict[str, tuple[bool, bool]] = {}
        self._session_key: SessionKey | None = None
        self._previous_session_key: SessionKey | None = None
        self._offset = -1
        self._started = False
        #: The section holding bulk jobs' configs (``mirrorline-job-*`` records).
        self.jobs = KafkaJobConfigs(self)
        self.log = KafkaBasedLog(topic, client_props, self._on_record, partitions=1,
                                 replication_factor=replication_factor, topic_config=topic_config)

    @classmethod
    def from_config(cls, worker_config: Mapping[str, Any], listener: Callable[[str, str], None] | None = None,
                    ) -> KafkaConfigStore:
        """A store configured from worker settings (client settings come from the same map)."""
        topic, _, replication_factor = storage_settings(worker_config, "config.storage", 1, DEFAULT_REPLICATION_FACTOR)
        return cls(topic, worker_config, listener=listener, replication_factor=replication_factor)

    @property
    def offset(self) -> int:
        """The next config-topic offset to read (-1 before any record was read)."""
        return self._offset

    def inconsistent(self) -> set[str]:
        """Connectors whose last task-config commit did not find all its task records."""
        return set(self._inconsistent)

    async def read_to_end(self) -> None:
        """Read the config topic up to its current end (every record written before this call)."""
        await self.log.read_to_end()

    async def start(self) -> None:
        await super().start()
        if len(self.log.topic_partitions) != 1:
            count = len(self.log.topic_partitions)
            await self.log.stop()
            raise ValueError(f"config topic {self.topic!r} must have exactly 1 partition, but has {count}")
        self._started = True

    async def stop(self, writes_wait_s: float | None = None) -> None:
        self._started = False
        await super().stop(writes_wait_s)

    # --- reads --------------------------------------------------------------------------

    def connectors(self):
        return {name: dict(config) for name, config in sorted(self._configs.items())}

    def task_configs(self, connector):
        if connector in self._inconsistent:
            return []
        return [dict(self._tasks[(connector, i)]) for i in range(self._task_counts.get(connector, 0))]

    def target_state(self, connector):
        return self._states.get(connector, TargetState.STARTED)

    def task_count_record(self, connector: str) -> int | None:
        """The task count of the connector's latest ``tasks-fencing-*`` record (None: there is none)."""
        return self._task_count_records.get(connector)

    def pending_fencing(self, connector: str) -> bool:
        """Whether task configs were committed after the connector's latest task-count record (or
        there is none): its tasks must wait for the previous generation to be fenced."""
        return connector in self._pending_fencing

    def task_generation(self, connector: str) -> int:
        """How many complete task-config commits of the connector were read (-1: none)."""
        return self._generations.get(connector, -1)

    @property
    def session_key(self) -> SessionKey | None:
        """The latest session key read from the topic (None before the leader wrote one)."""
        return self._session_key

    def session_keys(self) -> list[bytes]:
        """The keys a forwarded request may be signed with: the latest and the one before it."""
        return [k.key for k in (self._session_key, self._previous_session_key) if k is not None]

    # --- writes -------------------------------------------------------------------------

    async def put_connector(self, connector, config):
        await self._write([(CONNECTOR_PREFIX + connector, {"properties": {k: str(v) for k, v in config.items()}})])

    async def remove_connector(self, connector):
        await self._write([(CONNECTOR_PREFIX + connector, None), (TARGET_STATE_PREFIX + connector, None)])

    async def put_task_configs(self, connector, configs):
        tasks = [(key.encode("utf-8"), _encode(value)) for key, value in
                 ((f"{TASK_PREFIX}{connector}-{i}", {"properties": {k: str(v) for k, v in c.items()}})
                  for i, c in enumerate(configs))]
        if tasks:  # every task record acknowledged before the commit that makes them visible
            try:
                await self.log.send_batch(tasks)
            except RecordTooLargeError as exc:  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, or max.request.size
                raise TaskConfigsTooLargeError(self.topic, connector, max(len(k) + len(v) for k, v in tasks),
                                               exc) from exc
        await self._write([(COMMIT_PREFIX + connector, {"tasks": len(configs)})])

    async def put_target_state(self, connector, state):
        await self._write([(TARGET_STATE_PREFIX + connector, target_state_value(state))])

    async def put_task_count_record(self, connector: str, count: int) -> None:
        """Write ``tasks-fencing-<connector>`` (the leader's job, after fencing); visible on return."""
        await self._write([(TASK_COUNT_PREFIX + connector, {"task-count": int(count)})])

    async def put_restart_request(self, connector: str, *, include_tasks: bool, only_failed: bool) -> None:
        """Write Connect's restart request for ``connector`` (the leader's job)."""
        await self._write([(RESTART_PREFIX + connector, {"include-tasks": include_tasks, "only-failed": only_failed})])

    def restart_request(self, connector: str) -> tuple[bool, bool]:
        """``(include_tasks, only_failed)`` of the latest restart request read for ``connector``."""
        return self._restart_requests.get(connector, (False, False))

    async def put_session_key(self, key: SessionKey) -> None:
        """Write a new session key (the leader's job); visible in :attr:`session_key` on return."""
        await self._write([(SESSION_KEY_KEY, key.record_value())])

    async def _write(self, records: list[tuple[str, Any]]) -> None:
        await self.log.send_batch([(key.encode("utf-8"), _encode(value)) for key, value in records])
        await self.log.read_to_end()

    # --- reading the log ----------------------------------------------------------------

    def _on_record(self, record: ConsumerRecord) -> None:
        self._offset = record.offset + 1
        try:
            key = record.key.decode("utf-8") if record.key is not None else ""
            value = json.loads(record.value) if record.value is not None else None
        except ValueError as exc:
            log.error("config topic %s: skipping record at offset %d that cannot be parsed: %s",
                      record.topic, record.offset, exc)
            return
        if value is not None and not isinstance(value, dict):
            log.error("config topic %s: skipping record %r: value is not a JSON object", record.topic, key)
            return
        if key.startswith(TARGET_STATE_PREFIX):
            self._on_target_state(key[len(TARGET_STATE_PREFIX):], value)
        elif key.startswith(CONNECTOR_PREFIX):
            self._on_connector(key[len(CONNECTOR_PREFIX):], value)
        elif key.startswith(TASK_PREFIX):
            self._on_task(key, value)
        elif key.startswith(COMMIT_PREFIX):
            self._on_commit(key[len(COMMIT_PREFIX):], value)
        elif key.startswith(TASK_COUNT_PREFIX):
            self._on_task_count(key[len(TASK_COUNT_PREFIX):], value)
        elif key == SESSION_KEY_KEY:
            self._on_session_key(value)
        elif key.startswith(RESTART_PREFIX):
            self._on_restart_request(key[len(RESTART_PREFIX):], value)
        elif key.startswith(JOB_KEY_PREFIX):
            self.jobs.on_record(key, value)
        else:
            log.debug("config topic %s: skipping record %r", record.topic, key)

    def _on_connector(self, connector: str, value: dict | None) -> None:
        if value is None:
            self._configs.pop(connector, None)
            self._task_counts.pop(connector, None)
            self._deferred.pop(connector, None)
            self._inconsistent.discard(connector)
            for task_key in [k for k in self._tasks if k[0] == connector]:
                del self._tasks[task_key]
        else:
            properties = value.get("properties")
            if not isinstance(properties, dict):
                log.error("config topic: skipping config of connector %r without properties", connector)
                return
            self._configs[connector] = dict(properties)
        self._notify("connector", connector)

    def _on_task(self, key: str, value: dict | None) -> None:
        connector, _, number = key[len(TASK_PREFIX):].rpartition("-")
        if not connector or not number.isdigit():
            log.error("config topic: skipping task record with malformed key %r", key)
            return
        if value is None:  # Connect ignores task tombstones too
            return
        properties = value.get("properties")
        if not isinstance(properties, dict):
            log.error("config topic: skipping task record %r without properties", key)
            return
        self._deferred.setdefault(connector, {})[int(number)] = dict(properties)

    def _on_commit(self, connector: str, value: dict | None) -> None:
        if value is None:
            return
        count = value.get("tasks")
        if not isinstance(count, int) or count < 0:
            log.error("config topic: skipping commit of connector %r without a task count", connector)
            return
        deferred = self._deferred.pop(connector, {})
        if all(i in deferred for i in range(count)):
            self._tasks.update({(connector, i): config for i, config in deferred.items()})
            self._inconsistent.discard(connector)
            self._generations[connector] = self._generations.get(connector, -1) + 1
        else:
            log.error("config topic: commit of %d task(s) for connector %r found only tasks %s; "
                      "its task configs are inconsistent until the next complete commit",
                      count, connector, sorted(deferred))
            self._inconsistent.add(connector)
        self._task_counts[connector] = count
        # task configs after the latest task-count record: the next generation needs a round of fencing
        self._pending_fencing.add(connector)
        self._notify("tasks", connector)

    def _on_task_count(self, connector: str, value: dict | None) -> None:
        if value is None:
            return
        count = value.get("task-count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            log.error("config topic: skipping task-count record of connector %r without a task count", connector)
            return
        self._task_count_records[connector] = count
        self._pending_fencing.discard(connector)
        self._notify("fencing", connector)

    def _on_target_state(self, connector: str, value: dict | None) -> None:
        if value is None:
            self._states.pop(connector, None)
        else:
            name = value.get("state.v2", value.get("state"))
            try:
                self._states[connector] = TargetState(name)
            except ValueError:
                log.error("config topic: skipping unknown target state %r of connector %r", name, connector)
                return
        self._notify("target_state", connector)

    def _on_restart_request(self, connector: str, value: dict | None) -> None:
        if value is None:
            return
        include_tasks, only_failed = value.get("include-tasks", False), value.get("only-failed", False)
        if not isinstance(include_tasks, bool) or not isinstance(only_failed, bool):
            log.error("config topic: skipping restart request of connector %r with non-boolean flags: %r",
                      connector, value)
            return
        self._restart_requests[connector] = (include_tasks, only_failed)
        self._notify("restart", connector)

    def _on_session_key(self, value: dict | None) -> None:
        if value is None:
            return
        try:
            key = SessionKey(base64.b64decode(value["key"], validate=True), str(value["algorithm"]),
                             int(value["creation-timestamp"]))
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            log.error("config topic: skipping session key record that cannot be read: %r", exc)
            return
        if self._session_key is not None and key.key != self._session_key.key:
            self._previous_session_key = self._session_key
        self._session_key = key

    def _notify(self, kind: str, connector: str) -> None:
        if self._started and self.listener is not None:
            try:
                self.listener(kind, connector)
            except Exception:  # noqa: BLE001 - the listener's problem must not stop the log
                log.exception("config store listener failed on %s %r", kind, connector)
