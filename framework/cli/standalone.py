"""``mirrorline standalone WORKER_CONFIG [CONNECTOR_CONFIG ...]``, like ``connect-standalone``."""

from __future__ import annotations

import argparse

from mirrorline.clients.configfile import load_config_file


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``standalone`` subcommand."""
    parser = sub.add_parser("standalone", help="run a single worker (Kafka Connect standalone mode)")
    parser.add_argument("worker_config", help="worker settings (.properties or .yaml)")
    parser.add_argument("connector_configs", nargs="*", help="connector configs (.properties, .yaml or .json)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mirrorline.boot import event_loop
    from mirrorline.boot.standalone import run_standalone

    worker = load_config_file(args.worker_config)
    connectors = [load_config_file(path) for path in args.connector_configs]
    event_loop.run(run_standalone(worker, connectors))
    return 0
