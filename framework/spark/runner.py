"""Runs plugin jobs (``register_jobs``) on Spark: the runtime side of :mod:`mirrorline.api.jobs`.

:class:`JobRunner` parses a job's settings with its ConfigDef, gives it a
:class:`SparkJobContext` and runs it on the caller's event loop. The SparkSession is built on
the job's first use of ``context.spark`` (in a thread: a JVM starts) and stopped when the job
ends, whatever the outcome; its UI address is printed to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from mirrorline.api.clients import KafkaClients
from mirrorline.api.errors import ConfigError, ConnectError
from mirrorline.api.jobs import Job, JobContext, Progress, SourceOffsets
from mirrorline.spark.progress import make_progress

log = logging.getLogger(__name__)

#: Seconds between two looks at Spark's task counts for :meth:`SparkJobContext.run_spark`.
TRACK_EVERY_S = 1.0


class SparkTaskTracker:
    """Counts the tasks of the Spark stages that one job group's jobs have started (Spark's status tracker)."""

    def __init__(self, session, group: str):
        self._tracker = session.sparkContext.statusTracker()
        self._group = group

    def tasks(self) -> tuple[int, int]:
        """``(completed, total)`` over the group's stages that have begun; blocking (py4j calls)."""
        completed = total = 0
        for job_id in self._tracker.getJobIdsForGroup(self._group):
            job = self._tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = self._tracker.getStageInfo(stage_id)
                # stages skipped (reused shuffle output) never begin; counting them would stall the total
                if stage is not None and (stage.numActiveTasks or stage.numCompletedTasks or stage.numFailedTasks):
                    completed += stage.numCompletedTasks
                    total += stage.numTasks
        return completed, total


class _StoreOffsets(SourceOffsets):
    """SourceOffsets over a started KafkaOffsetStore."""

    def __init__(self, store):
        self._store = store

    async def get(self, connector, partitions):
        return await self._store.get(connector, partitions)

    async def put(self, connector, offsets):
        await self._store.put(connector, list(offsets))


class JobHost:
    """What the process running a job offers it beyond a command's run: set by a worker cluster's job process.

    The defaults are a command's: progress on the terminal or in the log, the Spark UI printed,
    no offset store of its own (a job must name one).
    """

    #: The job's name in the worker cluster.
    job_name: str | None = None
    #: The source partitions the worker cluster recorded the job as writing.
    partitions: list[dict[str, Any]] | None = None

    def progress(self, inner: Progress, total: int, unit: str, description: str) -> Progress:
        """The progress display the job gets (``inner`` is the terminal/log one)."""
        return inner

    def spark_ui(self, url: str) -> None:
        """The Spark UI's address, once the session runs."""
        print(f"Spark UI: {url}", file=sys.stderr, flush=True)

    def worker_offsets(self) -> contextlib.AbstractAsyncContextManager[SourceOffsets] | None:
        """The offset store of the worker cluster running the job (None: there is none)."""
        return None


class SparkJobContext(JobContext):
    """A job's view of the runtime: lazy SparkSession, progress, logger, client settings, offset stores."""

    def __init__(self, job: Job, settings: Mapping[str, str], client_settings: Mapping[str, Mapping[str, str]],
                 clients: KafkaClients, config_providers: list[type] | None = None, host: JobHost | None = None):
        self.config = job.config_def.parse(settings)
        self.settings = dict(settings)
        self.logger = logging.getLogger(f"mirrorline.job.{job.name}")
        self.clients = clients
        self._client_settings = {name: dict(props) for name, props in client_settings.items()}
        self._config_providers = config_providers or []
        self._session = None
        self._lock = threading.Lock()
        self.host = host or JobHost()
        self.job_name = self.host.job_name
        self.partitions = self.host.partitions

    @property
    def spark(self):
        with self._lock:  # the job may touch it from several threads; one session
            if self._session is None:
                from mirrorline.spark.session import spark_session, ui_url

                self._session = spark_session(self.settings)
                url = ui_url(self._session)
                if url:
                    self.host.spark_ui(url)
            return self._session

    def cancel_spark(self) -> None:
        """Cancel every Spark job this context started (blocking, quick); the calls waiting on them raise."""
        with self._lock:
            session = self._session
        if session is not None:
            session.sparkContext.cancelAllJobs()

    def check_spark(self) -> None:
        from mirrorline.spark.session import DEFAULT_MASTER, check_java, check_master, import_pyspark

        import_pyspark()
        check_java()
        check_master(self.settings.get("spark.master", DEFAULT_MASTER))

    def client_settings(self, cluster: str) -> dict[str, str]:
        if cluster not in self._client_settings:
            raise ConfigError(f"no client settings for cluster {cluster!r}; known: {', '.join(self._client_settings)}")
        return dict(self._client_settings[cluster])

    def read_kafka(self, cluster, ranges):
        from mirrorline.spark.kafka import kafka_options, read_ranges

        return read_ranges(self.spark, kafka_options(self.client_settings(cluster)), ranges)

    def write_kafka(self, frame, cluster, targets, sync_every, max_records_per_second=0.0):
        from mirrorline.spark.producer_settings import librdkafka_settings
        from mirrorline.spark.writer import write_ranges

        settings = librdkafka_settings(self.client_settings(cluster))
        try:
            return write_ranges(frame, settings, targets, sync_every, max_records_per_second)
        except Exception as exc:
            if isinstance(exc, ConnectError):
                raise
            raise ConnectError(f"writing to {cluster} failed: {first_line(exc)}") from None

    def progress(self, total: int, unit: str = "records", description: str = "") -> Progress:
        return self.host.progress(make_progress(total, unit, description, self.logger), total, unit, description)

    async def run_spark(self, work, description):
        group = f"mirrorline-{uuid.uuid4().hex[:12]}"
        tracker = SparkTaskTracker(self.spark, group)

        def grouped():
            context = self.spark.sparkContext
            context.setJobGroup(group, description)  # a property of this thread's jobs only
            try:
                return work()
            finally:
                context.setLocalProperty("spark.jobGroup.id", None)

        progress = self.progress(0, "tasks", description)
        running = asyncio.ensure_future(asyncio.to_thread(grouped))
        try:
            while not running.done():
                await asyncio.wait([running], timeout=TRACK_EVERY_S)
                try:
                    progress.update(*await asyncio.to_thread(tracker.tasks))
                except Exception as exc:  # the display must never fail the work
                    log.debug("Spark task progress unavailable: %r", exc)
            result = running.result()
            _, total = await asyncio.to_thread(tracker.tasks)
            progress.update(total, total)
            return result
        finally:
            progress.close()

    @contextlib.asynccontextmanager
    async def source_offsets(self, worker_settings: Mapping[str, str]) -> AsyncIterator[SourceOffsets]:
        from mirrorline.runtime.config_providers import resolve_worker_settings
        from mirrorline.storage.kafka_offsets import KafkaOffsetStore

        if not worker_settings:
            own = self.host.worker_offsets()
            if own is None:
                raise ConfigError("the job names no offset store (worker settings) and no worker cluster runs it")
            async with own as offsets:
                yield offsets
            return
        raw = await asyncio.to_thread(resolve_worker_settings, dict(worker_settings), self._config_providers)
        store = KafkaOffsetStore.from_config({k: str(v) for k, v in raw.items()})
        await store.start()
        try:
            yield _StoreOffsets(store)
        finally:
            await store.stop()

    def stop_spark(self) -> None:
        """Stop the session if one was built (blocking)."""
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None


class JobRunner:
    """Runs a registered job by name with settings; one SparkSession per run."""

    def __init__(self, jobs: Mapping[str, type[Job]], clients: KafkaClients, config_providers: list[type] | None = None,
                 host: JobHost | None = None):
        self.jobs = dict(jobs)
        self.clients = clients
        self.config_providers = config_providers or []
        self.host = host
        #: The context of the job running now (None before and after), for cancellation.
        self.context: SparkJobContext | None = None

    async def run(self, name: str, settings: Mapping[str, str],
                  client_settings: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
        """Run job ``name``; its summary, or its ConnectError/ConfigError (Spark stopped either way)."""
        from mirrorline.api.errors import NotFoundError

        if name not in self.jobs:
            raise NotFoundError(f"no job named {name!r} is installed; installed jobs: {', '.join(self.jobs) or 'none'}")
        job = self.jobs[name]()
        context = SparkJobContext(job, settings, client_settings or {}, self.clients, self.config_providers, self.host)
        self.context = context
        try:
            return await job.run(context)
        finally:
            self.context = None
            await asyncio.to_thread(context.stop_spark)


def first_line(exc: BaseException) -> str:
    """The first meaningful line of an error from Spark (a Python worker's or the JVM's), for one-line reports."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for marker in ("RuntimeError: ", "KafkaException: ", "Exception: ", "Error: "):
        for line in reversed(lines):
            if marker in line and not line.startswith(("File ", "at ")):
                return line[line.index(marker) + len(marker):][:400]
    return (lines[0] if lines else exc.__class__.__name__)[:400]
