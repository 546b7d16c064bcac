"""``mirrorline local-kafka start|status|stop``: real Apache Kafka clusters on loopback for people."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mirrorline.localkafka.manager import DEFAULT_BASE_PORT, LocalKafka


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``local-kafka`` subcommand and its three actions."""
    parser = sub.add_parser("local-kafka", help="run local Apache Kafka clusters (KRaft) for demos and tests")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where clusters keep data and logs (default ~/.local/state/mirrorline/local-kafka)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    start = actions.add_parser("start", help="start clusters (harmless if they already run)")
    start.add_argument("--clusters", default="A,B", help="comma-separated cluster names (default A,B)")
    start.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                       help=f"first broker port; each new cluster takes the next +10 (default {DEFAULT_BASE_PORT})")
    start.set_defaults(func=_start)

    status = actions.add_parser("status", help="list clusters and whether they run")
    status.set_defaults(func=_status)

    stop = actions.add_parser("stop", help="stop clusters (all by default)")
    stop.add_argument("--clusters", default=None, help="comma-separated names (default: all)")
    stop.set_defaults(func=_stop)


def _names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


def _start(args: argparse.Namespace) -> int:
    began = time.monotonic()
    clusters = LocalKafka(args.state_dir, args.base_port).start(_names(args.clusters) or ["A", "B"])
    for cluster in clusters:
        print(f"cluster {cluster.spec.name}: bootstrap.servers={cluster.spec.bootstrap_servers} "
              f"cluster.id={cluster.cluster_id()} pid={cluster.pid()}")
    print(f"{len(clusters)} cluster(s) answering after {time.monotonic() - began:.1f}s")
    return 0


def _status(args: argparse.Namespace) -> int:
    clusters = LocalKafka(args.state_dir).known()
    if not clusters:
        print("no local clusters")
    for name, cluster in clusters.items():
        state = f"running pid={cluster.pid()}" if cluster.is_running() else "stopped"
        print(f"cluster {name}: bootstrap.servers={cluster.spec.bootstrap_servers} "
              f"cluster.id={cluster.cluster_id()} {state}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    stopped = LocalKafka(args.state_dir).stop(_names(args.clusters))
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0
