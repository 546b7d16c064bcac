"""``mirrorline mm2 MM2_PROPERTIES [--clusters B ...]``: MirrorMaker 2's dedicated mode.

Reads an ``mm2.properties`` in MM2's own format and runs, on this node, one worker per
replication flow whose target is selected (all by default), each writing to its target
cluster with the connector configs MM2 would derive (``A->B.topics``, per-cluster client
settings, flow overrides ...).

As MM2, every flow runs the Heartbeat connector (flows not enabled run only that), and
enabled flows also run the MirrorSource and MirrorCheckpoint connectors; a connector whose
validation refuses its config (e.g. the checkpoint connector with ``emit.offset-syncs.enabled =
false``) stands aside with one log line while the others run.

As MM2's dedicated mode, each flow's worker is a distributed worker: it joins the group
``<source>-mm2`` on the target cluster and keeps configs, offsets and statuses in
``mm2-configs.<source>.internal``, ``mm2-offsets.<source>.internal`` and
``mm2-status.<source>.internal`` there (names and replication factors configurable with
the usual worker settings). Several nodes started with the same file share each flow's
tasks, and take over a node's tasks when it stops or dies; the group's leader writes the
connector configs derived from the file.

These workers serve no REST API. ``--listeners http://0.0.0.0:8083`` (or a top-level
``listeners`` in the file; the option wins) makes the process serve ``GET /health`` — 200 once
every flow's worker has joined its group and holds an assignment, 503 naming the flows that
have not — and ``GET /metrics`` for Kubernetes probes and Prometheus.

A process uses about one core. ``--processes N`` (or ``auto``: one per core) runs the node's
flows in N processes, which share the tasks as N nodes would (:mod:`mirrorline.connectors.mm2.processes`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from mirrorline.api import Command, ConfigError, KafkaClients, WorkerLauncher, WorkerSpec
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.clients import (
    admin_client,
    cluster_id,
    connect_admin,
    refuse_same_cluster,
    same_cluster_flow_allowed,
)
from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.flow_connectors import flow_connectors, log_left_out
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, Flow, MirrorMakerConfig
from mirrorline.connectors.mm2.processes import (
    ChildProcesses,
    child_argv,
    die_with_parent,
    process_count,
    run_with_children,
    tag_log_lines,
)

log = logging.getLogger(__name__)

#: How long the start-up check waits for a cluster to give its id before leaving the check to the connectors.
CLUSTER_ID_TIMEOUT_S = 15.0


def worker_specs(config: MirrorMakerConfig, target_filter: list[str] | None) -> list[WorkerSpec]:
    """One distributed WorkerSpec per flow, with the connectors MM2 runs for it.

    A connector whose own validation refuses its config is left out with one log line, and the
    rest run (:mod:`mirrorline.connectors.mm2.flow_connectors`); ConfigError only when nothing is left.
    """
    flows = config.flows(target_filter)
    if not any(flow.enabled for flow in flows):
        raise ConfigError("No source->target replication flows are enabled: set for example 'A->B.enabled = true'")
    specs, left_out = [], []
    for flow in flows:
        chosen = flow_connectors(flow)
        log_left_out(chosen)
        left_out.extend(f"flow {flow.name}: {name}: {why}" for name, why in chosen.left_out.items())
        if chosen.configs:
            specs.append(WorkerSpec(flow.name, dict(flow.worker_config), chosen.configs, distributed=True))
    if not specs:
        raise ConfigError("no connector can run: " + "; ".join(left_out))
    return specs


async def refuse_same_cluster_flows(flows: list[Flow], clients: KafkaClients) -> None:
    """ConfigError if a flow's source and target aliases name one physical cluster (same cluster id).

    Asks each cluster once, with the flow's own client settings. A cluster that cannot be
    reached now is skipped: the workers report it, and the connectors check again when they start.
    A cluster that refuses the settings (a failed login, an untrusted certificate, a missing
    truststore) is a ConfigError naming the cluster and the cause, before anything is written.
    ``allow.same.cluster.flow=true`` (top level or ``A->B.``) lets a flow through.
    """
    ids: dict[str, str | None] = {}

    async def id_of(alias: str, config: dict[str, str], side: str) -> str | None:
        if alias not in ids:
            try:
                admin = admin_client(clients, config, side, f"mm2-cluster-id-{alias}")
            except ConfigError as exc:  # e.g. a missing truststore: say which cluster's settings
                raise ConfigError(f"cluster {alias}: {exc}") from None
            try:
                with clients.quiet_logs():  # the workers report an unreachable cluster; no need to twice
                    async with asyncio.timeout(CLUSTER_ID_TIMEOUT_S):
                        await connect_admin(admin, config, side)
                    async with asyncio.timeout(CLUSTER_ID_TIMEOUT_S):
                        ids[alias] = await cluster_id(admin)
            except (OSError, asyncio.TimeoutError) as exc:
                # a refused login or an untrusted certificate will not pass by waiting: stop before
                # any worker writes anything; a cluster that is down is left to the workers
                with clients.quiet_logs():
                    problem = await clients.security_problem(client_props(config, side, "admin"))
                if problem:
                    raise ConfigError(f"cluster {alias}: {problem}") from None
                log.debug("Cluster %s did not give its id (%s); its flows are checked when they start", alias, exc)
                ids[alias] = None
            finally:
                await admin.close()
        return ids[alias]

    for flow in flows:
        config = flow.connector_configs[SOURCE_CONNECTOR]
        if same_cluster_flow_allowed(config):
            continue
        if any("${" in str(value) for value in config.values()):
            continue  # config-provider references: the worker resolves them; the connector checks at start
        source_id = await id_of(flow.source, config, "source")
        if source_id is not None:
            refuse_same_cluster(flow.source, source_id, flow.target, await id_of(flow.target, config, "target"))


class MirrorMakerCommand(Command):
    """Runs the flows of an mm2.properties file on this node."""

    name = "mm2"
    help = "run MirrorMaker 2 flows from an mm2.properties file (MM2 dedicated mode)"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", help="MirrorMaker 2 config file, in MM2's own format")
        parser.add_argument("--clusters", nargs="+", default=None,
                            help="run only the flows whose target is one of these aliases")
        parser.add_argument("--listeners", default=None, metavar="http://HOST:PORT",
                            help="serve GET /health and GET /metrics there (default: the file's top-level "
                                 "'listeners', else no HTTP server)")
        parser.add_argument("--processes", default="1", metavar="N",
                            help="run the flows in N processes on this node, to use N cores; 'auto': one per "
                                 "CPU core (default 1). Set tasks.max to at least N")
        parser.add_argument("--child-of", type=int, default=None, help=argparse.SUPPRESS)  # set by --processes

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        processes = process_count(args.processes)
        child_of = getattr(args, "child_of", None)
        if child_of is not None:
            die_with_parent(child_of)
        if processes > 1 or child_of is not None:
            tag_log_lines()
        props = load_config_file(args.mm2_properties)
        try:
            config = MirrorMakerConfig(props)
            if config.enable_internal_rest and child_of is None:
                log.info("dedicated.mode.enable.internal.rest=true: accepted; mirrorline's nodes need no internal "
                         "REST server (task configs and zombie fencing go through each flow's config topic)")
            specs = worker_specs(config, args.clusters)
            flows = [flow for flow in config.flows(args.clusters) if flow.name in {s.worker_id for s in specs}]
            if child_of is None:  # the parent has checked already
                await refuse_same_cluster_flows(flows, launcher.clients)
        except ConfigError as exc:
            raise ConfigError(f"{args.mm2_properties}: {exc}") from None
        listeners = None if child_of is not None else listeners_of(args.listeners, props)

        async def run_own() -> None:
            if listeners:
                await launcher.run(specs, listeners=listeners)
            else:  # launchers written before the listeners argument still work
                await launcher.run(specs)

        if processes > 1 and child_of is None:
            argv = child_argv(args.mm2_properties, args.clusters, getattr(args, "log_level", None))
            await run_with_children(run_own, ChildProcesses(argv, processes - 1))
        else:
            await run_own()
        return 0


def listeners_of(option: str | None, props: dict[str, str]) -> list[str] | None:
    """The ``--listeners`` option, else the file's top-level ``listeners``, as a list (None: neither)."""
    raw = option if option is not None else props.get("listeners")
    if raw is None:
        return None
    listeners = [item.strip() for item in str(raw).split(",") if item.strip()]
    return listeners or None
