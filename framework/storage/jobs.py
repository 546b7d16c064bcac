"""Bulk jobs in the worker cluster's stores: their configs (config topic) and states (status topic).

A job (``POST /jobs``) is the batch counterpart of a connector: its config lives in the config
store beside connector configs, its state in the status store beside connector statuses, so
every worker answers for it and a worker that joins later sees it. This module holds the record
types and the in-memory stores; :mod:`mirrorline.storage.kafka_jobs` reads and writes the same
records in the Kafka topics.

Config store (records written in the config topic, string keys, JSON values):

- ``mirrorline-job-config-<name>`` -> ``{"properties": {...}, "connector": <name>|null,
  "partitions": [<source partition>, ...], "created": <ms>, "origin": "rest"|"connector"}``:
  the job's config as submitted, the connector it takes its settings from, and the source
  partitions it writes (*holds*: no other job may write them, and the connector's tasks do not
  stream them while the job holds them); null when the job is removed;
- ``mirrorline-job-state-<name>`` -> ``{"state": "STARTED"|"CANCELLED"}``: what the user asked
  for (``DELETE /jobs/{name}`` on a running job writes CANCELLED); null when removed.

Status store: ``mirrorline-job-status-<name>`` -> :class:`JobStatus` as JSON (state, worker id,
generation, attempt, progress, Spark UI, result, trace); null when removed.

Java Connect workers sharing these topics skip both kinds: its config store logs "Discarding
config update record with invalid key" for keys matching none of its prefixes (``connector-``,
``task-``, ``commit-``, ``target-state-``, ``session-key``, ``restart-connector-``,
``tasks-fencing-``, ``logger-cluster-``), and its status store logs "Discarding record with
invalid key" for keys other than ``status-connector-``, ``status-task-`` and ``status-topic-``.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Every job record key in the config topic starts with this (one dispatch in the config store).
JOB_KEY_PREFIX = "mirrorline-job-"
JOB_CONFIG_PREFIX = "mirrorline-job-config-"
JOB_STATE_PREFIX = "mirrorline-job-state-"
#: Job status keys in the status topic.
JOB_STATUS_PREFIX = "mirrorline-job-status-"


class JobTarget(str, enum.Enum):
    """What the user asked of a job."""

    STARTED = "STARTED"
    CANCELLED = "CANCELLED"


class JobState(str, enum.Enum):
    """Where a job stands. PENDING: accepted, not running yet (no worker, or waiting for its partitions)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        """Whether the job has ended (it runs nowhere and will not run again by itself)."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class JobRecord:
    """A job's config record: what to run, the connector it is bound to, the partitions it holds."""

    name: str
    properties: dict[str, str]
    connector: str | None = None
    partitions: tuple[dict[str, Any], ...] = ()
    created_ms: int = 0
    origin: str = "rest"

    def value(self) -> dict[str, Any]:
        """The record value."""
        return {"properties": dict(self.properties), "connector": self.connector,
                "partitions": [dict(p) for p in self.partitions], "created": self.created_ms, "origin": self.origin}

    @classmethod
    def parse(cls, name: str, value: Mapping[str, Any]) -> JobRecord:
        """A record read back; ValueError when it is not a job config."""
        properties = value.get("properties")
        partitions = value.get("partitions", [])
        connector = value.get("connector")
        if not isinstance(properties, dict) or not isinstance(partitions, list) \
                or not all(isinstance(p, dict) for p in partitions) or not (connector is None or isinstance(connector, str)):
            raise ValueError(f"job {name!r}: malformed config record {value!r}")
        return cls(name, {str(k): str(v) for k, v in properties.items()}, connector, tuple(partitions),
                   int(value.get("created") or 0), str(value.get("origin") or "rest"))


@dataclass(frozen=True)
class JobStatus:
    """A job's latest state, written by the worker running it (or by the leader when it is accepted)."""

    state: JobState
    worker_id: str = ""
    generation: int = 0
    attempt: int = 0
    trace: str | None = None
    #: ``{"completed", "total", "unit", "description", "rate", "eta_seconds"}`` of the current step
    progress: dict[str, Any] | None = None
    spark_ui: str | None = None
    result: Any = None
    #: What the job waits for while PENDING (e.g. a connector handing its partitions over)
    waiting: str | None = None
    #: True once a finished job has handed its partitions back (SUCCEEDED, or CANCELLED with its
    #: partial output handed over): the connector's tasks stream them again
    released: bool = False
    started_ms: int = 0
    updated_ms: int = 0

    def value(self) -> dict[str, Any]:
        """The record value."""
        return {"state": self.state.value, "trace": self.trace, "worker_id": self.worker_id,
                "generation": self.generation, "attempt": self.attempt, "progress": self.progress,
                "spark_ui": self.spark_ui, "result": self.result, "waiting": self.waiting,
                "released": self.released, "started": self.started_ms, "updated": self.updated_ms}

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> JobStatus:
        """A status read back; ValueError when it is not one."""
        try:
            return cls(JobState(value["state"]), str(value.get("worker_id") or ""), int(value.get("generation") or 0),
                       int(value.get("attempt") or 0), value.get("trace"), value.get("progress"),
                       value.get("spark_ui"), value.get("result"), value.get("waiting"),
                       bool(value.get("released", False)), int(value.get("started") or 0),
                       int(value.get("updated") or 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed job status {value!r}: {exc!r}") from None


def now_ms() -> int:
    """Wall-clock milliseconds, as statuses record them."""
    return int(time.time() * 1000)


def encode(value: Any) -> bytes | None:
    """A record value as compact JSON (None stays a tombstone)."""
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


#: ``listener(kind, name)``: kind ``"job"`` (config written or removed), ``"job_state"`` or ``"job_status"``.
JobListener = Callable[[str, str], None]


class JobConfigs:
    """Job configs and target states, in memory; :class:`~mirrorline.storage.kafka_jobs.KafkaJobConfigs`
    keeps the same in the config topic. Writes are visible on return; ``listener`` hears of every change."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}
        self._targets: dict[str, JobTarget] = {}
        self.listener: JobListener | None = None

    def jobs(self) -> dict[str, JobRecord]:
        """Every job's config record, by name, sorted."""
        return dict(sorted(self._jobs.items()))

    def job(self, name: str) -> JobRecord | None:
        """One job's config record, or None."""
        return self._jobs.get(name)

    def target(self, name: str) -> JobTarget:
        """What the user asked of the job (STARTED when never set)."""
        return self._targets.get(name, JobTarget.STARTED)

    async def put_job(self, record: JobRecord) -> None:
        """Write a job's config (its target state first: STARTED)."""
        self._apply_target(record.name, JobTarget.STARTED)
        self._apply_job(record.name, record)

    async def put_target(self, name: str, target: JobTarget) -> None:
        """Record what the user asked of the job."""
        self._apply_target(name, target)

    async def remove_job(self, name: str) -> None:
        """Forget the job's config and target state."""
        self._apply_target(name, None)
        self._apply_job(name, None)

    # -- applying records (the Kafka section calls these as it reads the topic) --------------
    def _apply_job(self, name: str, record: JobRecord | None) -> None:
        if record is None:
            self._jobs.pop(name, None)
        else:
            self._jobs[name] = record
        self._notify("job", name)

    def _apply_target(self, name: str, target: JobTarget | None) -> None:
        if target is None:
            self._targets.pop(name, None)
        else:
            self._targets[name] = target
            self._notify("job_state", name)

    def _notify(self, kind: str, name: str) -> None:
        if self.listener is not None:
            self.listener(kind, name)


class JobStatuses:
    """Job statuses in memory; :class:`~mirrorline.storage.kafka_jobs.KafkaJobStatuses` keeps them in the
    status topic. ``listener`` hears of every change (kind ``"job_status"``)."""

    def __init__(self) -> None:
        self._statuses: dict[str, JobStatus] = {}
        self.listener: JobListener | None = None

    def get(self, name: str) -> JobStatus | None:
        """The job's latest status, or None."""
        return self._statuses.get(name)

    def all(self) -> dict[str, JobStatus]:
        """Every job status, by name."""
        return dict(self._statuses)

    async def put(self, name: str, status: JobStatus) -> None:
        """Record a job's status."""
        self._apply(name, status)

    async def remove(self, name: str) -> None:
        """Forget a job's status."""
        self._apply(name, None)

    def _apply(self, name: str, status: JobStatus | None) -> None:
        previous = self._statuses.get(name)
        if status is None:
            self._statuses.pop(name, None)
        else:
            self._statuses[name] = status
        if self.listener is not None and (previous is None or status is None or previous.state != status.state
                                          or previous.released != status.released):
            self.listener("job_status", name)


@dataclass
class JobStores:
    """The two job stores a herder uses."""

    configs: JobConfigs = field(default_factory=JobConfigs)
    statuses: JobStatuses = field(default_factory=JobStatuses)
