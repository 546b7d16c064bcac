"""Job configs and statuses in the worker cluster's config and status topics (records: :mod:`.jobs`).

Each is a section of its store: the store's tail hands it the records whose keys start with
``mirrorline-job-`` (config topic) or ``mirrorline-job-status-`` (status topic), and it writes
through the store's log, reading the topic to its end afterwards, so a write is visible on
return here and on every other worker a moment later.
"""

from __future__ import annotations

import logging
from typing import Any

from mirrorline.storage.jobs import (JOB_CONFIG_PREFIX, JOB_STATE_PREFIX, JOB_STATUS_PREFIX, JobConfigs, JobRecord,
                                     JobStatus, JobStatuses, JobTarget, encode)

log = logging.getLogger(__name__)


class KafkaJobConfigs(JobConfigs):
    """Job configs and target states in the config topic; ``store`` is the KafkaConfigStore holding them."""

    def __init__(self, store: Any):
        super().__init__()
        self._store = store

    async def put_job(self, record: JobRecord) -> None:
        await self._write([(JOB_STATE_PREFIX + record.name, {"state": JobTarget.STARTED.value}),
                           (JOB_CONFIG_PREFIX + record.name, record.value())])

    async def put_target(self, name: str, target: JobTarget) -> None:
        await self._write([(JOB_STATE_PREFIX + name, {"state": JobTarget(target).value})])

    async def remove_job(self, name: str) -> None:
        await self._write([(JOB_STATE_PREFIX + name, None), (JOB_CONFIG_PREFIX + name, None)])

    async def _write(self, records: list[tuple[str, Any]]) -> None:
        await self._store.log.send_batch([(key.encode("utf-8"), encode(value)) for key, value in records])
        await self._store.log.read_to_end()

    def on_record(self, key: str, value: dict | None) -> None:
        """Apply one job record read from the config topic (malformed ones are logged and skipped)."""
        if key.startswith(JOB_CONFIG_PREFIX):
            name = key[len(JOB_CONFIG_PREFIX):]
            try:
                self._apply_job(name, None if value is None else JobRecord.parse(name, value))
            except ValueError as exc:
                log.error("config topic: skipping job record %r: %s", key, exc)
        elif key.startswith(JOB_STATE_PREFIX):
            name = key[len(JOB_STATE_PREFIX):]
            try:
                self._apply_target(name, None if value is None else JobTarget(value.get("state")))
            except ValueError:
                log.error("config topic: skipping job state record %r with unknown state %r", key, value)
        else:
            log.debug("config topic: skipping record %r", key)


class KafkaJobStatuses(JobStatuses):
    """Job statuses in the status topic; ``store`` is the KafkaStatusStore holding them."""

    def __init__(self, store: Any):
        super().__init__()
        self._store = store

    async def put(self, name: str, status: JobStatus) -> None:
        await self._write(name, status.value())

    async def remove(self, name: str) -> None:
        await self._write(name, None)

    async def _write(self, name: str, value: Any) -> None:
        await self._store.log.send_batch([((JOB_STATUS_PREFIX + name).encode("utf-8"), encode(value))])
        await self._store.log.read_to_end()

    def on_record(self, key: str, value: Any) -> None:
        """Apply one job status read from the status topic (malformed ones are logged and skipped)."""
        name = key[len(JOB_STATUS_PREFIX):]
        if value is None:
            self._apply(name, None)
            return
        try:
            self._apply(name, JobStatus.parse(value))
        except ValueError as exc:
            log.error("status topic: skipping job status %r: %s", key, exc)
