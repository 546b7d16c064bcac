"""Bulk jobs: batch work a plugin runs on Spark beside its connectors (backfill, reconciliation).

A job is the batch counterpart of a connector. A plugin registers its job classes through the
``register_jobs`` hook (listed by ``mirrorline plugins``); each declares its settings with a
:class:`~mirrorline.api.config.ConfigDef` exactly as a connector does, and does its work in
:meth:`Job.run`. It reaches Spark, progress display, logging, client settings and stored
source offsets only through the :class:`JobContext` it is given, so a third party can add a job
without importing mirrorline's runtime, and this module imports no pyspark.

A plugin's CLI command runs a job with
:meth:`~mirrorline.api.launcher.WorkerLauncher.run_job`; the runtime builds the SparkSession
(embedded ``local[*]`` unless ``spark.master`` says otherwise) on first use of
:attr:`JobContext.spark`.

A worker cluster runs jobs too (``POST /jobs`` with ``{"name", "config": {"job.class", ...}}``):
the runtime turns the submitted config into the job's settings with :meth:`Job.prepare` (which
may take them from a connector the job names: ``"connector": "my-mirror"``), asks
:meth:`Job.partitions` which source partitions the job will write (no two jobs write the same
ones at once, and the named connector's tasks leave them alone meanwhile), and runs the job on
one worker, in a process of its own (a Spark driver each). If that worker dies, another runs
the job again: a job is written so that a rerun resumes (the backfill resumes exactly).

API addition (jobs): new in this version; nothing else in the contract changed for it.
API addition (jobs in the worker cluster): :class:`JobSettings`, :class:`ConnectorRef`,
:meth:`Job.prepare`, :meth:`Job.partitions`, :attr:`Job.connector_classes`,
:attr:`JobContext.job_name`, :attr:`JobContext.partitions`; all have defaults, so jobs
written before them keep working (and cannot name a connector).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.clients import KafkaClients
from mirrorline.api.config import Config, ConfigDef
from mirrorline.api.errors import ConfigError


class Progress(ABC):
    """A progress display for one long step: a bar with rate and ETA on a terminal, log lines otherwise."""

    @abstractmethod
    def update(self, completed: int, total: int | None = None) -> None:
        """Set how many units are done so far (never more than ``total``).

        ``total`` changes the amount of work when it is only known as the step goes on (Spark
        tasks of stages planned one after another); None keeps it.
        """

    @abstractmethod
    def close(self) -> None:
        """End the display (prints the final rate); idempotent."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SourceOffsets(ABC):
    """The source offsets a worker cluster stores (its offset store), for a job to read and write.

    Offsets have the shape connectors give them: a source partition (dict) maps to an offset
    (dict). Written offsets are what a connector of that name finds when its tasks next start.
    """

    @abstractmethod
    async def get(self, connector: str, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        """The stored offset of each partition (None where nothing is stored), read to the store's end."""

    @abstractmethod
    async def put(self, connector: str, offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        """Store offsets (None forgets a partition) and wait until the store has them."""


@dataclass(frozen=True)
class PartitionTarget:
    """Where :meth:`JobContext.write_kafka` writes one source partition: the target topic (same
    partition number) and the target offset its first input record must land at (``base``)."""

    remote_topic: str
    base: int


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`JobContext.write_kafka` did, per source partition ``(topic, partition)``."""

    #: offset-sync candidates ``(upstream, downstream)``: first record, every ``sync_every``-th, gaps, last
    syncs: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    #: ``(last source offset read, target end offset, records written by this run)``
    done: dict[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)
    #: key + value + header bytes written by this run
    bytes: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class ConnectorRef:
    """The connector a job submitted to a worker cluster names (``"connector": ...``): its name and config."""

    name: str
    #: The connector's settings as stored (config-provider references resolved).
    config: Mapping[str, str]


@dataclass(frozen=True)
class JobSettings:
    """A job's settings ready to run, and the Java-style client settings of each cluster it reaches."""

    settings: dict[str, str]
    client_settings: dict[str, dict[str, str]] = field(default_factory=dict)


class JobContext(ABC):
    """What a running job may use: its parsed config, Spark, progress, a logger, client settings, offsets."""

    #: The job's name in the worker cluster (None when a command runs it).
    job_name: str | None = None
    #: The source partitions the worker cluster recorded this job as writing (:meth:`Job.partitions`,
    #: fixed when the job was accepted); None when a command runs it. A job restricts itself to them.
    partitions: Sequence[Mapping[str, Any]] | None = None

    #: The job's settings parsed with its ``config_def``.
    config: Config
    #: The settings exactly as given (unparsed), e.g. to pass client layers on.
    settings: Mapping[str, str]
    #: Logs under ``mirrorline.job.<job name>``.
    logger: logging.Logger
    #: Kafka clients for the driver's own requests (admin, offsets, small writes): the same
    #: :class:`~mirrorline.api.clients.KafkaClients` connectors get from their context.
    clients: KafkaClients

    @property
    @abstractmethod
    def spark(self) -> Any:
        """The ``pyspark.sql.SparkSession``, built on first use (blocking: 10-35 s; call it from a thread).

        Raises a :class:`~mirrorline.api.errors.ConnectError` with one line when pyspark or Java is
        missing or the master is unreachable.
        """

    @abstractmethod
    def check_spark(self) -> None:
        """Fail now, with the one-line ConnectError :attr:`spark` would raise, if Spark cannot run here
        (pyspark or Java missing, master unreachable), without starting it; blocking but quick.

        A job calls it before it changes anything, so bad set-up never leaves half-done work.
        """

    @abstractmethod
    def client_settings(self, cluster: str) -> dict[str, str]:
        """Java-style client settings (bootstrap.servers, security.*, sasl.*, ssl.*) of ``cluster``,
        as the caller of ``run_job`` named it; ConfigError when unknown."""

    @abstractmethod
    def read_kafka(self, cluster: str, ranges: Mapping[tuple[str, int], tuple[int, int]]) -> Any:
        """A Spark DataFrame of the records of each ``(topic, partition)`` in ``[start, end)`` on ``cluster``.

        Columns: topic, partition, offset, key, value, headers (``[]`` when none), timestamp,
        timestampType; one Spark partition per Kafka partition, in offset order. The read fails
        when a start lies below the partition's log start (never skips silently).
        """

    @abstractmethod
    def write_kafka(self, frame: Any, cluster: str, targets: Mapping[tuple[str, int], PartitionTarget],
                    sync_every: int, max_records_per_second: float = 0.0) -> WriteResult:
        """Write ``frame`` (as :meth:`read_kafka` returns it, unshuffled) to ``cluster``; blocking.

        Each record keeps its partition, key, value, headers and timestamp, in order. The
        caller must own each target partition during the write; records the target already holds
        past ``base`` are skipped (a retried task or a resumed job adds no duplicates).
        ``max_records_per_second`` (> 0) caps each Spark task's rate (API addition, default
        none). Raises ConnectError with the first line of a failed task.
        """

    @abstractmethod
    def progress(self, total: int, unit: str = "records", description: str = "") -> Progress:
        """A progress display for ``total`` units of work (a rich bar with rate and ETA on a terminal)."""

    @abstractmethod
    async def run_spark(self, work: Callable[[], Any], description: str) -> Any:
        """Run blocking Spark ``work`` in a thread, showing the progress of its Spark tasks; its result.

        For steps whose record count is not known while they run (a join, an aggregation): the
        display counts the tasks of the Spark stages ``work`` starts, and grows as stages are
        planned. Exceptions from ``work`` propagate.
        """

    @abstractmethod
    def source_offsets(self, worker_settings: Mapping[str, str]) -> AbstractAsyncContextManager[SourceOffsets]:
        """The offset store of the worker cluster ``worker_settings`` describes (``offset.storage.topic``
        and how to reach it), opened for the ``async with`` block.

        Empty ``worker_settings`` mean the worker cluster running the job (its offset store, in
        either mode); a command given empty settings raises ConfigError.
        """


class Job(ABC):
    """A batch job a plugin provides; subclasses declare ``name``, ``config_def`` and :meth:`run`."""

    #: How CLI commands and ``run_job`` name the job.
    name: str
    #: One line for ``mirrorline plugins``.
    description: str = ""
    #: Every setting the job takes, declared once (validation, documentation).
    config_def: ConfigDef = ConfigDef()
    #: Connector classes (names or aliases) a job submitted to a worker cluster may take its
    #: settings from (``"connector": <name>``); empty: the job names no connector.
    connector_classes: tuple[str, ...] = ()

    def version(self) -> str:
        """The job's version, shown by ``mirrorline plugins``."""
        return "0.1.0"

    def prepare(self, settings: Mapping[str, str], connector: ConnectorRef | None) -> JobSettings:
        """The settings a worker cluster runs the job with, from the submitted ``settings``.

        ``connector`` is the connector the submission names (its class is one of
        :attr:`connector_classes`), whose settings (clusters, security, topics ...) the job may
        take. Raise ConfigError naming the setting for bad input. The default passes the
        settings through and takes no connector.
        """
        if connector is not None:
            raise ConfigError(f"connector: job {self.name} does not take its settings from a connector")
        return JobSettings(dict(settings))

    async def partitions(self, prepared: JobSettings, clients: KafkaClients) -> list[dict[str, Any]]:
        """The source partitions (as the bound connector keys its offsets) the job will write; may ask the clusters.

        Called once, when a worker cluster accepts the job: another job writing any of them at
        the same time is refused, and the job's connector leaves them to the job until it is
        done (:meth:`~mirrorline.api.context.ConnectorContext.partitions_held_by_jobs`). Raise
        ConnectError with one line when the clusters cannot say. The default: none (the job
        writes no partition, e.g. a reconciliation).
        """
        return []

    @abstractmethod
    async def run(self, context: JobContext) -> dict[str, Any]:
        """Do the work; return a JSON-able summary. Raise ConnectError for a one-line failure."""
