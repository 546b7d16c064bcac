"""``mirrorline mm2 MM2_PROPERTIES [--clusters B ...]``: MirrorMaker 2's dedicated mode.

Reads an ``mm2.properties`` in MM2's own format and runs, on this node, one worker per
replication flow whose target is selected (all by default), each writing to its target
cluster with the connector configs MM2 would derive (``A->B.topics``, per-cluster client
settings, flow overrides ...).

As MM2, every flow runs the Heartbeat connector (flows not enabled run only that), and
enabled flows also run the MirrorSource and MirrorCheckpoint connectors.

Differences from MM2, until the distributed mode exists: each flow's source offsets are
kept in a file under ``--state-dir`` (MM2 keeps them in ``mm2-offsets.<source>.internal`` on
the target), and several nodes do not share a flow's tasks.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

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


def default_state_dir() -> Path:
    """``$MIRRORLINE_MM2_HOME`` or ``~/.local/state/mirrorline/mm2``."""
    return Path(os.environ.get("MIRRORLINE_MM2_HOME") or os.path.expanduser("~/.local/state/mirrorline/mm2"))


def worker_specs(config: MirrorMakerConfig, target_filter: list[str] | None, state_dir: Path) -> list[WorkerSpec]:
    """One WorkerSpec per flow, with the connectors this build runs for it."""
    specs = []
    for flow in config.flows(target_filter):
        connectors = [flow.connector_configs[name] for name in FLOW_CONNECTORS
                      if flow.connector_configs[name].get("enabled", "false").lower() == "true"]
        if flow.heartbeats_enabled:
            connectors.append(flow.connector_configs[HEARTBEAT_CONNECTOR])
        if not connectors:
            continue
        worker = dict(flow.worker_config)
        worker.setdefault("offset.storage.file.filename",
                          str(state_dir / f"{flow.source}-{flow.target}.offsets.json"))
        specs.append(WorkerSpec(flow.name, worker, connectors))
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
        parser.add_argument("--state-dir", type=Path, default=None,
                            help="where flows keep source offsets (default ~/.local/state/mirrorline/mm2)")

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        props = load_config_file(args.mm2_properties)
        try:
            config = MirrorMakerConfig(props)
            specs = worker_specs(config, args.clusters, args.state_dir or default_state_dir())
        except ConfigError as exc:
            raise ConfigError(f"{args.mm2_properties}: {exc}") from None
        await launcher.run(specs)
        return 0
