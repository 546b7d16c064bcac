"""``mirrorline mm2 MM2_PROPERTIES [--clusters B ...]``: MirrorMaker 2's dedicated mode.

Reads an ``mm2.properties`` in MM2's own format and runs, on this node, one worker per
replication flow whose target is selected (all by default), each writing to its target
cluster with the connector configs MM2 would derive (``A->B.topics``, per-cluster client
settings, flow overrides ...).

As MM2, every flow runs the Heartbeat connector (flows not enabled run only that), and
enabled flows also run the MirrorSource and MirrorCheckpoint connectors.

As MM2's dedicated mode, each flow's worker is a distributed worker: it joins the group
``<source>-mm2`` on the target cluster and keeps configs, offsets and statuses in
``mm2-configs.<source>.internal``, ``mm2-offsets.<source>.internal`` and
``mm2-status.<source>.internal`` there (names and replication factors configurable with
the usual worker settings). Several nodes started with the same file share each flow's
tasks, and take over a node's tasks when it stops or dies; the group's leader writes the
connector configs derived from the file.
"""

from __future__ import annotations

import argparse
import logging

from framework.api import Command, ConfigError, WorkerLauncher, WorkerSpec
from framework.api.configfile import load_config_file

from connectors.mirror_client.mm2_config import (
    CHECKPOINT_CONNECTOR,
    HEARTBEAT_CONNECTOR,
    SOURCE_CONNECTOR,
    MirrorMakerConfig,
)

log = logging.getLogger(__name__)

#: Connectors an enabled flow runs; the heartbeat connector runs for every flow, enabled or not.
FLOW_CONNECTORS = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR)


def worker_specs(config: MirrorMakerConfig, target_filter: list[str] | None) -> list[WorkerSpec]:
    """One distributed WorkerSpec per flow, with the connectors MM2 runs for it."""
    specs = []
    for flow in config.flows(target_filter):
        connectors = [flow.connector_configs[name] for name in FLOW_CONNECTORS
                      if flow.connector_configs[name].get("enabled", "false").lower() == "true"]
        if flow.heartbeats_enabled:
            connectors.append(flow.connector_configs[HEARTBEAT_CONNECTOR])
        if not connectors:
            continue
        specs.append(WorkerSpec(flow.name, dict(flow.worker_config), connectors, distributed=True))
    if not any(flow.enabled for flow in config.flows(target_filter)):
        raise ConfigError("No source->target replication flows are enabled: set for example 'A->B.enabled = true'")
    return specs


class MirrorMakerCommand(Command):
    """Runs the flows of an mm2.properties file on this node."""

    name = "mm2"
    help = "run MirrorMaker 2 flows from an mm2.properties file (MM2 dedicated mode)"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", help="MirrorMaker 2 config file, in MM2's own format")
        parser.add_argument("--clusters", nargs="+", default=None,
                            help="run only the flows whose target is one of these aliases")

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        props = load_config_file(args.mm2_properties)
        try:
            config = MirrorMakerConfig(props)
            specs = worker_specs(config, args.clusters)
        except ConfigError as exc:
            raise ConfigError(f"{args.mm2_properties}: {exc}") from None
        await launcher.run(specs)
        return 0
