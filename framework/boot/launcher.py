"""ProcessLauncher: runs the workers a plugin command describes (e.g. one per MM2 flow).

Each WorkerSpec becomes a StandaloneHerder with its own stores, started with its connector
configs, or (``distributed``) a DistributedHerder that joins its group and whose leader
writes the connector configs. All run on this event loop until SIGTERM/SIGINT, then stop side
by side (each task flushes and stores its offsets, each bounded in time, so a worker whose
cluster is unreachable does not hold up the others' stop). Workers started this way serve
no REST API; with ``listeners`` the process serves ``/health`` and ``/metrics`` instead
(:class:`~mirrorline.boot.health_server.HealthServer`), bound before any worker starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket

from mirrorline.api.errors import NotFoundError
from mirrorline.api.launcher import WorkerLauncher, WorkerSpec
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import validate_or_raise
from mirrorline.runtime.config_providers import resolve_worker_settings
from mirrorline.boot.health_server import HealthServer
from mirrorline.boot.process import StopSignals, check_listener_free, kafka_cluster_id, parse_listener
from mirrorline.runtime.exactly_once import worker_support
from mirrorline.runtime.distributed.herder import DistributedHerder
from mirrorline.runtime.herder import Herder
from mirrorline.runtime.standalone import StandaloneHerder
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF, WORKER_CONFIG_DEF
from mirrorline.storage.configs import TargetState
from mirrorline.storage.kafka_configs import KafkaConfigStore
from mirrorline.storage import FileOffsetStore, MemoryConfigStore, MemoryOffsetStore, MemoryStatusStore

log = logging.getLogger(__name__)


class ProcessLauncher(WorkerLauncher):
    """Runs WorkerSpecs as standalone or distributed herders in this process."""

    def __init__(self, plugins: PluginRegistry, stop_event: asyncio.Event | None = None):
        self.plugins = plugins
        self.clients = KAFKA_CLIENTS
        self.stop_event = stop_event or asyncio.Event()
        self.herders: list[Herder] = []
        #: The /health and /metrics server while :meth:`run` serves ``listeners``.
        self.health_server: HealthServer | None = None

    async def run(self, workers: list[WorkerSpec], listeners: list[str] | None = None) -> None:
        server = None
        if listeners:
            listener = parse_listener(listeners)
            check_listener_free(listener)
            server = HealthServer([spec.worker_id for spec in workers])
        with StopSignals(self.stop_event) as stop:
            try:
                if server is not None:
                    await server.start(listener)
                    self.health_server = server
                # a stop asked for while workers start (a cluster down makes a start retry for long)
                # is not left waiting until every start ends
                starting = asyncio.ensure_future(self._start_all(workers, server))
                asked = asyncio.ensure_future(stop.wait())
                try:
                    await asyncio.wait({starting, asked}, return_when=asyncio.FIRST_COMPLETED)
                    if starting.done():
                        starting.result()
                        log.info("Running %d worker(s): %s", len(workers), ", ".join(w.worker_id for w in workers))
                        await asked
                        log.info("Shutting down: stopping tasks and storing their offsets")
                    else:
                        log.warning("Shutting down while workers were starting (%d of %d begun): stopping what "
                                    "started; the others are not started", len(self.herders), len(workers))
                        starting.cancel()
                        await asyncio.gather(starting, return_exceptions=True)
                finally:
                    for future in (starting, asked):
                        if not future.done():
                            future.cancel()
            finally:
                try:
                    await self._stop_herders()
                finally:  # answers liveness probes until the workers have stored their offsets
                    if server is not None:
                        await server.stop()

    async def _start_all(self, workers: list[WorkerSpec], server: HealthServer | None) -> None:
        """Start the workers one after the other (each joins :attr:`herders` as its start begins, so
        a start that is interrupted or fails is stopped with the others)."""
        for spec in workers:
            herder = await self._start(spec)
            if server is not None:
                server.add(spec.worker_id, herder)

    async def _stop_herders(self) -> None:
        """Stop every herder side by side; one failing to stop cleanly is logged, not let end the others'."""
        herders = list(reversed(self.herders))
        results = await asyncio.gather(*(herder.stop() for herder in herders), return_exceptions=True)
        for herder, result in zip(herders, results):
            if isinstance(result, BaseException):
                log.error("Worker %s did not stop cleanly: %r; what it had not stored (offsets, statuses) is "
                          "read again or re-done when it next starts", getattr(herder, "worker_id", herder), result,
                          exc_info=result)

    async def _resolved_settings(self, spec: WorkerSpec) -> dict[str, str]:
        """The spec's worker settings with references to the worker's config providers resolved."""
        return await asyncio.to_thread(resolve_worker_settings, spec.worker_config,
                                       self.plugins.config_provider_classes())

    async def set_connector_state(self, worker: WorkerSpec, connector: str, state: str) -> bool:
        if state not in (TargetState.STOPPED.value, TargetState.STARTED.value):
            raise ValueError(f"state must be STOPPED or STARTED, not {state!r}")
        raw = await self._resolved_settings(worker)
        config = DISTRIBUTED_CONFIG_DEF.parse(raw)
        await kafka_cluster_id(config)  # a clear error when the cluster is down
        raw = {k: str(v) for k, v in raw.items()}
        raw["config.storage.replication.factor"] = str(config["config.storage.replication.factor"])
        store = KafkaConfigStore.from_config(raw)
        await store.start()
        try:
            if connector not in store.connectors():
                raise NotFoundError(f"worker cluster {worker.worker_id} (config topic {store.topic}) has no "
                                    f"connector {connector}: has this flow ever run?")
            target = TargetState(state)
            if store.target_state(connector) == target:
                return False
            await store.put_target_state(connector, target)
            if target is TargetState.STOPPED:  # as PUT /connectors/{name}/stop: no task configs either
                await store.put_task_configs(connector, [])
            log.info("Connector %s of worker cluster %s is now %s", connector, worker.worker_id, state)
            return True
        finally:
            await store.stop()

    async def run_job(self, job, settings, *, client_settings=None):
        from mirrorline.spark.runner import JobRunner  # the Spark backend loads only when a job runs

        runner = JobRunner(self.plugins.jobs(), self.clients, self.plugins.config_provider_classes())
        return await runner.run(job, settings, client_settings)

    async def _start(self, spec: WorkerSpec) -> Herder:
        if spec.distributed:
            return await self._start_distributed(spec)
        spec = dataclasses.replace(spec, worker_config=await self._resolved_settings(spec))
        config = WORKER_CONFIG_DEF.parse(spec.worker_config)
        cluster_id = await kafka_cluster_id(config)
        offsets_file = config["offset.storage.file.filename"]
        herder = StandaloneHerder(
            spec.worker_id, config, self.plugins,
            offset_store=FileOffsetStore(offsets_file) if offsets_file else MemoryOffsetStore(),
            config_store=MemoryConfigStore(), status_store=MemoryStatusStore(), kafka_cluster_id=cluster_id)
        self.herders.append(herder)
        await herder.start()
        for connector in spec.connector_configs:
            await herder.put_connector_config(connector["name"], connector, allow_replace=True)
        return herder

    async def _start_distributed(self, spec: WorkerSpec) -> DistributedHerder:
        spec = dataclasses.replace(spec, worker_config=await self._resolved_settings(spec))
        config = DISTRIBUTED_CONFIG_DEF.parse(spec.worker_config)
        for connector in spec.connector_configs:  # a bad config is a one-line error now, not a FAILED status later
            # before any client is opened; exactly.once.support=required needs the worker's setting
            validate_or_raise(self.plugins, connector, config["topic.creation.enable"],
                              exactly_once=worker_support(config))
        cluster_id = await kafka_cluster_id(config)
        herder = DistributedHerder(spec.worker_config, config, self.plugins, kafka_cluster_id=cluster_id,
                                   managed_connectors=spec.connector_configs)
        # no REST API: the id names the process, so statuses show which node runs each task
        herder.set_url("", f"{spec.worker_id}@{socket.gethostname()}:{os.getpid()}")
        self.herders.append(herder)
        await herder.start()
        return herder
