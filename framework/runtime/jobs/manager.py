"""JobManager: a herder's jobs — recorded in its stores, run where the cluster puts them.

Both herders keep one. It answers the REST reads (``GET /jobs``, ``GET /jobs/{name}``,
``GET /job-plugins``) from the stores, records new jobs (``POST /jobs``: checked with
:mod:`.spec`, partitions fixed with ``Job.partitions``, refused when another job holds them) and
removes or cancels them (``DELETE /jobs/{name}``). It runs the jobs the herder gives it
(:meth:`JobManager.run_here`: all of them in standalone mode, the leader's assignment in
distributed mode), each in a process of its own (:mod:`.process`), and writes each job's
status as it goes: PENDING (waiting for a worker, or for its connector to let its partitions
go), RUNNING with progress, then SUCCEEDED, FAILED or CANCELLED.

A job taken away from this worker (a rebalance, a graceful stop) is stopped without a status:
the worker that gets it runs it again (attempt + 1), and the job resumes. A job the user
cancels is asked to cancel: it cancels its Spark jobs, may hand over what it finished, and is
recorded CANCELLED.

When the partitions jobs hold change (a job accepted, finished or removed), the manager asks
each affected connector running here for new task configs, so its tasks let the partitions go
or take them back.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from mirrorline.api.errors import AlreadyExistsError, BadRequestError, ConnectError, NotFoundError
from mirrorline.api.secrets import redact, scrub, secret_values
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.runtime.background import BackgroundTasks
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.config_providers import has_references
from mirrorline.runtime.jobs.holds import (PartitionsHeldError, check_conflicts, describe, held_partitions, holds,
                                           release_pending)
from mirrorline.runtime.jobs.process import JobProcess, Outcome
from mirrorline.runtime.jobs.spec import JOB_CLASS, job_plugins, prepare_job, resolve_job_class
from mirrorline.storage.jobs import JobRecord, JobState, JobStatus, JobTarget, now_ms

log = logging.getLogger(__name__)

#: Seconds ``Job.partitions`` may take when a job is submitted (it may ask the clusters).
PARTITIONS_TIMEOUT_S = 60.0
#: Seconds between two progress writes of a running job's status.
PROGRESS_EVERY_S = 2.0
#: Seconds between two checks of whether a job's connector let its partitions go.
RELEASE_CHECK_S = 1.0
#: Times a job whose process died (its driver killed, out of memory) runs again on the same worker.
PROCESS_RESTARTS = 2
#: Seconds before the first such rerun (doubled, then tripled, ...).
PROCESS_RESTART_DELAY_S = 2.0
#: Seconds a job asked to cancel gets to end (its Spark jobs cancelled, its hand-over done) before it is killed.
CANCEL_TIMEOUT_S = 300.0


class _Execution:
    """One job running (or waiting to run) here."""

    def __init__(self, name: str):
        self.name = name
        self.task: asyncio.Task | None = None
        self.process: JobProcess | None = None
        self.stopping = False
        self.cancel_sent = False
        self.wakeup = asyncio.Event()


class JobManager:
    """The jobs of one herder; see the module docstring. ``herder`` gives the stores, worker and plugins."""

    def __init__(self, herder: Any):
        self.herder = herder
        self.configs = herder.config_store.jobs
        self.statuses = herder.status_store.jobs
        #: Called (on the event loop) when the set of jobs to run changed: a job added or removed, or finished.
        self.on_jobs_changed: Callable[[], None] = lambda: None
        self._running: dict[str, _Execution] = {}
        self._bound: dict[str, str | None] = {}
        self._background = BackgroundTasks("jobs")
        self._attached = False
        self._closed = False

    def attach(self) -> None:
        """Listen to the stores (after they loaded what they hold)."""
        for name, record in self.configs.jobs().items():
            self._bound[name] = record.connector
        self.configs.listener = self._on_change
        self.statuses.listener = self._on_change
        self._attached = True

    # -- reads ------------------------------------------------------------------------------
    def plugins(self) -> list[dict[str, Any]]:
        """``GET /job-plugins``."""
        return job_plugins(self.herder.plugins)

    def names(self) -> list[str]:
        """Every job's name, sorted."""
        return sorted(self.configs.jobs())

    def runnable(self) -> list[str]:
        """Jobs to run somewhere: recorded and not finished."""
        out = []
        for name in self.configs.jobs():
            status = self.statuses.get(name)
            if status is None or not status.state.finished:
                out.append(name)
        return out

    def held(self, connector: str) -> list[tuple[dict[str, Any], str]]:
        """``(source partition, job)`` of every partition of ``connector`` a job holds."""
        return held_partitions(self.configs, self.statuses, connector)

    def connector_jobs(self, connector: str) -> list[dict[str, Any]]:
        """For a connector's status: the jobs holding its partitions, their state and the partitions."""
        out = []
        for name, record in self.configs.jobs().items():
            status = self.statuses.get(name)
            if record.connector == connector and holds(record, status):
                out.append({"name": name, "state": (status.state if status else JobState.PENDING).value,
                            "partitions": sorted(describe(p) for p in record.partitions)})
        return out

    def info(self, name: str) -> dict[str, Any]:
        """``GET /jobs/{name}``: config, state, progress, rate, ETA, Spark UI, result; NotFoundError if unknown."""
        record = self.configs.job(name)
        if record is None:
            raise NotFoundError(f"Job {name} not found")
        status = self.statuses.get(name) or JobStatus(JobState.PENDING)
        progress = dict(status.progress or {})
        total, completed = progress.get("total") or 0, progress.get("completed") or 0
        if total:
            progress["percent"] = round(100.0 * min(completed, total) / total, 1)
        job_class = record.properties.get(JOB_CLASS, "")
        config_def = None
        try:
            config_def = resolve_job_class(self.herder.plugins, job_class).config_def
        except BadRequestError:
            pass
        info = {
            "name": name, "job.class": job_class, "connector": record.connector,
            "config": redact(record.properties, config_def), "state": status.state.value,
            "cancel_requested": self.configs.target(name) == JobTarget.CANCELLED and not status.state.finished,
            "worker_id": status.worker_id or None, "attempt": status.attempt, "progress": progress or None,
            "records_per_second": progress.get("rate"), "eta_seconds": progress.get("eta_seconds"),
            "spark_ui": status.spark_ui, "result": status.result, "waiting": status.waiting,
            "partitions": sorted(describe(p) for p in record.partitions),
            "holds_partitions": holds(record, status), "created": record.created_ms,
            "started": status.started_ms or None, "updated": status.updated_ms or None, "origin": record.origin,
        }
        if status.trace:
            info["trace"] = status.trace
        return info

    # -- writes -------------------------------------------------------------------------------
    async def create(self, name: str, config: Mapping[str, Any], *, origin: str = "rest") -> dict[str, Any]:
        """Record a new job (``POST /jobs``); its info. 4xx naming the field for bad input."""
        if name in self.configs.jobs():
            raise AlreadyExistsError(f"Job {name} already exists")
        config = {str(k): v for k, v in config.items() if v is not None}
        connectors = self.herder.config_store.connectors()
        bound = config.get("connector")
        resolved = await self._resolved(connectors[bound]) if isinstance(bound, str) and bound in connectors else None
        prepared = prepare_job(self.herder.plugins, config, connectors, resolved)
        try:
            partitions = await bounded(prepared.job_class().partitions(prepared.prepared, KAFKA_CLIENTS),
                                       PARTITIONS_TIMEOUT_S, f"Job {name}: finding its partitions")
        except ConnectError as exc:
            if exc.http_status < 500:
                raise
            raise BadRequestError(f"{JOB_CLASS} {prepared.job_class.name}: cannot tell which partitions the job "
                                  f"writes: {exc}") from None
        check_conflicts(self.configs, self.statuses, prepared.connector, partitions)
        record = JobRecord(name, {k: str(v) for k, v in config.items()}, prepared.connector,
                           tuple(dict(p) for p in partitions), now_ms(), origin)
        await self.configs.put_job(record)
        log.info("Job %s (%s) accepted%s, holding %d partition(s)", name, prepared.job_class.name,
                 f" for connector {prepared.connector}" if prepared.connector else "", len(partitions))
        return self.info(name)

    async def delete(self, name: str) -> tuple[int, dict[str, Any]]:
        """``DELETE /jobs/{name}``: cancel a job not finished yet (202), or remove a finished one (200, its result)."""
        if self.configs.job(name) is None:
            raise NotFoundError(f"Job {name} not found")
        status = self.statuses.get(name)
        if status is None or not status.state.finished:
            if self.configs.target(name) != JobTarget.CANCELLED:
                await self.configs.put_target(name, JobTarget.CANCELLED)
                log.info("Job %s: cancel requested", name)
            return 202, self.info(name)
        info = self.info(name)
        if not status.released and self.configs.job(name).partitions and status.state != JobState.SUCCEEDED:
            info["warning"] = ("the job did not hand its partitions over; its connector streams them again from "
                               "its own stored offsets")
        await self.configs.remove_job(name)
        await self.statuses.remove(name)
        log.info("Job %s removed (it was %s)", name, status.state.value)
        return 200, info

    async def _resolved(self, config: Mapping[str, str]) -> dict[str, str]:
        """``config`` with its config-provider references resolved, as a connector starting here would see it."""
        resolver = self.herder.worker.resolver
        if not resolver.providers or not has_references(config):
            return dict(config)
        return dict((await asyncio.to_thread(resolver.resolve, dict(config))).values)

    # -- running ------------------------------------------------------------------------------
    async def run_here(self, names: list[str] | set[str]) -> None:
        """Run exactly these jobs here: start the new ones, stop (without a status) the others."""
        wanted = set(names)
        for name in [n for n in self._running if n not in wanted]:
            await self.stop(name)
        for name in sorted(wanted - set(self._running)):
            if self._closed:
                return
            execution = _Execution(name)
            self._running[name] = execution
            execution.task = self._background.spawn(self._execute(execution), f"job-{name}")

    def running(self) -> list[str]:
        """Jobs running (or waiting to) here."""
        return sorted(self._running)

    async def stop(self, name: str) -> None:
        """Stop a job here without recording an end: another worker (or a later run) resumes it."""
        execution = self._running.pop(name, None)
        if execution is None:
            return
        execution.stopping = True
        if execution.process is not None:
            await execution.process.stop()
        if execution.task is not None and not execution.task.done():
            execution.task.cancel()
            await asyncio.gather(execution.task, return_exceptions=True)
        log.info("Job %s stopped on worker %s (it resumes where it is assigned next)", name, self.herder.worker_id)

    async def close(self) -> None:
        """Stop every job here (worker shutting down, or dropped from its group)."""
        self._closed = True
        for name in list(self._running):
            await self.stop(name)
        await self._background.close()

    # -- one job ------------------------------------------------------------------------------
    async def _put_status(self, name: str, status: JobStatus) -> None:
        try:
            await self.statuses.put(name, status)
        except Exception as exc:  # noqa: BLE001 - the next write carries the state again
            log.warning("Job %s: could not write its status (%r)", name, exc)

    def _status(self, state: JobState, previous: JobStatus | None, **changes: Any) -> JobStatus:
        base = previous or JobStatus(state)
        values = {**base.__dict__, "state": state, "worker_id": self.herder.worker_id,
                  "generation": getattr(self.herder.worker, "generation", 0), "updated_ms": now_ms(), **changes}
        return JobStatus(**values)

    async def _execute(self, execution: _Execution) -> None:
        name = execution.name
        try:
            await self._run(execution)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the job fails, with the reason, never silently
            log.exception("Job %s failed on worker %s", name, self.herder.worker_id)
            if not execution.stopping:
                await self._put_status(name, self._status(JobState.FAILED, self.statuses.get(name),
                                                          trace=_trace(exc), progress=None))
        finally:
            if self._running.get(name) is execution:
                del self._running[name]

    async def _run(self, execution: _Execution) -> None:
        name = execution.name
        record = self.configs.job(name)
        previous = self.statuses.get(name)
        if record is None or (previous is not None and previous.state.finished):
            return
        attempt = (previous.attempt if previous is not None else 0) + 1
        status = self._status(JobState.PENDING, previous, attempt=attempt, trace=None, result=None, waiting=None,
                              released=False, started_ms=now_ms(), progress=None, spark_ui=None)
        await self._put_status(name, status)
        log.info("Job %s: attempt %d on worker %s", name, attempt, self.herder.worker_id)
        # a job submitted by a connector on another worker may race one accepted here: the older one holds
        earlier = [r for r in self.configs.jobs().values()
                   if (r.created_ms, r.name) < (record.created_ms, record.name)]
        try:
            check_conflicts(_Only(self.configs, earlier), self.statuses, record.connector, record.partitions)
        except PartitionsHeldError as exc:
            await self._put_status(name, self._status(JobState.FAILED, status, trace=str(exc), released=True))
            return
        waiting = None
        while True:
            if self.configs.target(name) == JobTarget.CANCELLED:
                # nothing written by this attempt; an earlier attempt's copy is resumed by a new job
                await self._put_status(name, self._status(JobState.CANCELLED, status, waiting=None,
                                                          released=attempt == 1))
                return
            reason = None
            if record.connector and record.partitions:
                reason = release_pending(self.herder.plugins, self.herder.config_store, self.herder.status_store,
                                         record.connector, record.partitions)
            if reason is None:
                break
            if reason != waiting:
                waiting = reason
                log.info("Job %s: %s", name, reason)
                status = self._status(JobState.PENDING, status, waiting=reason)
                await self._put_status(name, status)
            execution.wakeup.clear()
            try:
                async with asyncio.timeout(RELEASE_CHECK_S):
                    await execution.wakeup.wait()
            except asyncio.TimeoutError:
                pass
        connectors = self.herder.config_store.connectors()
        resolved = await self._resolved(connectors[record.connector]) \
            if record.connector and record.connector in connectors else None
        if record.connector and record.connector not in connectors:
            raise BadRequestError(f"connector: connector {record.connector} was deleted before the job could run")
        prepared = prepare_job(self.herder.plugins, record.properties, connectors, resolved)
        # the worker's spark.* settings (e.g. spark.master from the Helm chart) are every job's defaults
        originals = getattr(self.herder.worker_config, "originals", {}) or {}
        spark_defaults = {str(k): str(v) for k, v in originals.items() if str(k).startswith("spark.")}
        spec = {"name": name, "job": prepared.job_class.name,
                "settings": {**spark_defaults, **prepared.prepared.settings},
                "client_settings": prepared.prepared.client_settings,
                "partitions": [dict(p) for p in record.partitions]}
        secrets = sorted({*secret_values(prepared.prepared.settings),
                          *(s for c in prepared.prepared.client_settings.values() for s in secret_values(c))},
                         key=len, reverse=True)
        status = self._status(JobState.RUNNING, status, waiting=None)
        await self._put_status(name, status)
        state = {"status": status, "last": 0.0}

        async def on_event(message: dict[str, Any]) -> None:
            loop = asyncio.get_running_loop()
            if message.get("type") == "spark_ui":
                state["status"] = self._status(JobState.RUNNING, state["status"], spark_ui=message.get("url"))
            elif message.get("type") == "progress":
                fields = ("completed", "total", "unit", "description", "rate", "eta_seconds")
                progress = {k: message.get(k) for k in fields}
                state["status"] = self._status(JobState.RUNNING, state["status"], progress=progress)
                if loop.time() - state["last"] < PROGRESS_EVERY_S:
                    return
            else:
                return
            state["last"] = loop.time()
            await self._put_status(name, state["status"])

        for restart in range(PROCESS_RESTARTS + 1):
            process = JobProcess(spec, self.herder.offset_store, on_event)
            execution.process = process
            execution.cancel_sent = False
            await process.start()
            log.info("Job %s runs in process %s on worker %s", name, process.pid, self.herder.worker_id)
            if self.configs.target(name) == JobTarget.CANCELLED:
                await self._cancel(execution)
            outcome = await process.wait()
            if execution.stopping:
                return
            if outcome.kind != "died" or self.configs.target(name) == JobTarget.CANCELLED \
                    or restart == PROCESS_RESTARTS:
                break
            # the driver died (killed, out of memory) but the worker lives: run the job again here; it resumes
            delay = PROCESS_RESTART_DELAY_S * (restart + 1)
            log.warning("Job %s: %s; running it again in %.0f s (it resumes)", name, outcome.message, delay)
            await asyncio.sleep(delay)
            attempt += 1
            state["status"] = self._status(JobState.RUNNING, state["status"], attempt=attempt, progress=None,
                                           spark_ui=None, trace=f"previous attempt: {outcome.message}")
            await self._put_status(name, state["status"])
        await self._finish(name, state["status"], outcome, secrets)

    async def _finish(self, name: str, status: JobStatus, outcome: Outcome, secrets: list[str]) -> None:
        if outcome.kind == "result":
            final = self._status(JobState.SUCCEEDED, status, result=outcome.summary, released=True)
            log.info("Job %s succeeded", name)
        elif outcome.kind == "cancelled":
            handed_over = isinstance(outcome.summary, dict) and bool(outcome.summary.get("handed_over", True))
            final = self._status(JobState.CANCELLED, status, result=outcome.summary, released=handed_over)
            log.info("Job %s cancelled%s", name, "; it handed over what it copied" if handed_over else "")
        elif outcome.kind == "died" and self.configs.target(name) == JobTarget.CANCELLED:
            final = self._status(JobState.CANCELLED, status, trace=f"cancelled: {outcome.message}", released=False)
            log.warning("Job %s: killed after it did not end within %.0f s of its cancellation", name,
                        CANCEL_TIMEOUT_S)
        else:
            message = scrub(outcome.message, secrets)
            trace = scrub(outcome.trace, secrets) if outcome.trace else None
            final = self._status(JobState.FAILED, status, trace=message + (f"\n{trace}" if trace else ""))
            log.error("Job %s failed: %s", name, message)
        await self._put_status(name, final)

    async def _cancel(self, execution: _Execution) -> None:
        process = execution.process
        if process is None or execution.cancel_sent:
            return
        execution.cancel_sent = True
        log.info("Job %s: cancelling", execution.name)
        await process.cancel()
        self._background.spawn(self._kill_if_stuck(execution, process), f"cancel-timeout-{execution.name}")

    async def _kill_if_stuck(self, execution: _Execution, process: JobProcess) -> None:
        """A cancelled job that does not end in time is killed (it is then CANCELLED, its partitions kept)."""
        await asyncio.sleep(CANCEL_TIMEOUT_S)
        if execution.process is process and not execution.stopping:
            await process.stop()

    # -- store changes ------------------------------------------------------------------------
    def _on_change(self, kind: str, name: str) -> None:
        if not self._attached or self._closed:
            return
        record = self.configs.job(name)
        connectors = {self._bound.get(name)}
        if record is not None:
            self._bound[name] = record.connector
            connectors.add(record.connector)
        elif kind == "job":
            self._bound.pop(name, None)
        for connector in connectors:
            if connector and connector in self.herder.worker.connectors:
                self.herder._on_reconfigure_request(connector)
        for execution in self._running.values():
            execution.wakeup.set()
        execution = self._running.get(name)
        if kind == "job_state" and execution is not None and self.configs.target(name) == JobTarget.CANCELLED:
            self._background.spawn(self._cancel(execution), f"cancel-{name}")
        if kind == "job" or (kind == "job_status" and self.statuses.get(name) is not None
                             and self.statuses.get(name).state.finished):
            self.on_jobs_changed()


class ConnectorJobs:
    """What a connector's context may ask of the jobs (``ConnectorContext.partitions_held_by_jobs`` ...)."""

    def __init__(self, herder: Any):
        self._herder = herder

    def held(self, connector: str) -> list[tuple[dict[str, Any], str]]:
        """Partitions of ``connector`` jobs hold."""
        return self._herder.job_manager.held(connector)

    async def submit(self, connector: str, name: str, config: Mapping[str, str]) -> None:
        """Accept a job bound to ``connector`` (written by the connector's worker, not the leader)."""
        await self._herder.create_job(name, {**dict(config), "connector": connector}, origin="connector")

    def info(self, name: str) -> dict[str, Any] | None:
        """A job's info, None when unknown."""
        try:
            return self._herder.job_manager.info(name)
        except NotFoundError:
            return None

    async def remove(self, name: str) -> None:
        """Cancel or remove a job."""
        await self._herder.delete_job(name)


class _Only:
    """A view of job configs limited to some records (the jobs accepted before one)."""

    def __init__(self, configs: Any, records: list[JobRecord]):
        self._records = {r.name: r for r in records}

    def jobs(self) -> dict[str, JobRecord]:
        return dict(self._records)


def _trace(exc: BaseException) -> str:
    if isinstance(exc, ConnectError):
        return str(exc)
    return "".join(traceback.format_exception(exc))
