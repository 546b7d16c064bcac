"""Commands plugins add to the ``mirrorline`` CLI, and the launcher they use to run workers.

A plugin may contribute a subcommand (hook ``register_commands``) that turns its own
configuration format into workers: MM2's dedicated mode reads ``mm2.properties`` and runs
one worker per replication flow. Such a command never touches the runtime directly; it
describes workers as :class:`WorkerSpec` and hands them to the :class:`WorkerLauncher` it
is given, which runs them until the process is told to stop (SIGTERM/SIGINT) and then stops
them gracefully (tasks flush and store offsets).

API change (``listeners``): ``WorkerLauncher.run`` takes an optional ``listeners`` list, so a
command whose workers serve no REST API (MM2's dedicated mode) can still be probed and scraped
in production. Launchers that predate it are called without the argument when it is None.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.clients import KafkaClients


@dataclass
class WorkerSpec:
    """One worker to run: its id, its worker settings, and the connectors it runs from the start.

    With ``distributed`` false the worker runs alone (standalone mode: source offsets in
    ``offset.storage.file.filename``) and creates ``connector_configs`` itself. With
    ``distributed`` true it joins the cluster named by its ``group.id``, keeping configs,
    offsets and statuses in the ``config/offset/status.storage.topic`` topics; processes
    running the same spec (on one machine or several) share its connectors' tasks, and the
    group's leader writes ``connector_configs`` (replacing stored ones that differ), as MM2's
    dedicated mode does. A distributed worker started this way serves no REST API (see
    ``listeners`` of :meth:`WorkerLauncher.run` for health and metrics).
    """

    worker_id: str
    worker_config: dict[str, str]
    connector_configs: list[dict[str, str]] = field(default_factory=list)
    distributed: bool = False


class WorkerLauncher(ABC):
    """Runs workers on the current process; provided by the runtime to plugin commands."""

    #: Kafka clients for commands that talk to clusters themselves (failover tools, topic selection):
    #: the same :class:`~mirrorline.api.clients.KafkaClients` connectors get from their context.
    clients: KafkaClients

    @abstractmethod
    async def run(self, workers: list[WorkerSpec], listeners: list[str] | None = None) -> None:
        """Run every worker until the process is asked to stop, then stop them all gracefully.

        With ``listeners`` (Connect's format, e.g. ``["http://0.0.0.0:8083"]``; the first is
        used) the process also serves, while it runs, ``GET /health`` — 200
        ``{"status": "healthy"}`` once every worker is healthy (a distributed worker: joined its
        group and holds an assignment), else 503 while any is starting (500 if one is
        unhealthy), naming which — and ``GET /metrics`` (Prometheus text of the whole process).
        The port is bound before any worker starts.

        Raises a :class:`~mirrorline.api.errors.ConnectError` naming the problem when a worker
        cannot start (bad settings, Kafka unreachable, a connector config rejected) or the
        listener's port cannot be bound (a ConfigError if ``listeners`` is malformed).
        """


    async def set_connector_state(self, worker: WorkerSpec, connector: str, state: str) -> bool:
        """Stop (``"STOPPED"``) or resume (``"STARTED"``) a connector of a distributed worker cluster.

        ``worker`` describes the cluster (its ``worker_config`` names the config topic and how to
        reach it); no worker is started. The change is written to the config topic as
        ``PUT /connectors/{name}/stop`` or ``/resume`` would write it, so the running workers
        apply it, and workers started later keep it. Returns False when the connector was
        already in that state. Raises a :class:`~mirrorline.api.errors.NotFoundError` when the
        cluster has no such connector, and ConnectError when the cluster cannot be reached.

        API addition (failover tools): launchers that predate it raise NotImplementedError.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot change connector states")


    async def run_job(self, job: str, settings: Mapping[str, str], *,
                      client_settings: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
        """Run the bulk job registered as ``job`` (hook ``register_jobs``) on Spark; return its summary.

        ``settings`` are the job's settings (parsed with its ``config_def``; ``spark.*`` keys also
        configure the SparkSession: ``spark.master``, memory ...); ``client_settings`` gives the
        Java-style client settings of each cluster the job reaches, by name
        (:meth:`~mirrorline.api.jobs.JobContext.client_settings`). Raises NotFoundError for an
        unknown job, ConfigError for bad settings and ConnectError (one line) when Spark cannot run.

        API addition (jobs): launchers that predate it raise NotImplementedError.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot run jobs")


class Command(ABC):
    """A ``mirrorline`` subcommand contributed by a plugin."""

    #: The subcommand name (``mirrorline <name> ...``).
    name: str
    #: One line shown by ``mirrorline --help``.
    help: str

    @abstractmethod
    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's arguments to its parser."""

    @abstractmethod
    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        """Carry out the command; returns the exit code. Raise ConnectError for a one-line error."""
