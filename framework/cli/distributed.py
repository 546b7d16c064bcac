"""``mirrorline distributed WORKER_CONFIG``, like ``connect-distributed``."""

from __future__ import annotations

import argparse

from mirrorline.clients.configfile import load_config_file


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``distributed`` subcommand."""
    parser = sub.add_parser("distributed", help="run a worker of a cluster (Kafka Connect distributed mode)")
    parser.add_argument("worker_config", help="worker settings (.properties or .yaml), with group.id and the "
                                              "config/offset/status storage topics")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mirrorline.boot import event_loop
    from mirrorline.boot.distributed import run_distributed
    from mirrorline.boot.process import check_listener_free, parse_listener
    from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF

    worker = load_config_file(args.worker_config)
    # before the herder exists: it opens Kafka clients that a taken port would leave unclosed
    check_listener_free(parse_listener(DISTRIBUTED_CONFIG_DEF.parse(worker)["listeners"]))
    event_loop.run(run_distributed(worker))
    return 0
