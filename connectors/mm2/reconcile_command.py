"""``mirrorline reconcile MM2_PROPERTIES --flow A->B [--topics REGEX] [--json]``: prove a flow's copy.

Runs :class:`mirrorline.connectors.mm2.reconcile.ReconcileJob` on Spark (embedded ``local[*]`` unless
``spark.master`` is set: in the file, ``--spark-master`` or ``--spark-conf``, as for ``backfill``)
and prints, per partition, the records on each side, the missing, duplicated, unexpected and
out-of-order ones, and the runs of the offset map it stored on the target. Exit status: 0 when
every source record has a copy, :data:`EXIT_MISSING` when some are missing, 1 on an error (one
line).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mirrorline.api import Command, ConfigError, WorkerLauncher
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig

from .backfill import spark_settings
from .flow_clients import parse_flow
from .reconcile import FLOW, STORE_MAP, TOPICS, ReconcileJob

#: Exit status when records are missing on the target (1 stays "the command failed").
EXIT_MISSING = 3

_COLUMNS = (("source", "source"), ("target", "target"), ("missing", "missing"), ("tail", "missing_tail"),
            ("dup", "duplicated"), ("unexpected", "unexpected"), ("out of order", "out_of_order"))


def job_settings(props: dict[str, str], args: argparse.Namespace) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The job's settings (the mm2.properties, the command's options, Spark settings as ``backfill`` takes
    them) and the client settings of the flow's ``source`` and ``target`` clusters for Spark's reads."""
    try:
        config = MirrorMakerConfig(props)
        source, target = parse_flow(config, args.flow)
    except ConfigError as exc:
        raise ConfigError(f"{args.mm2_properties}: {exc}") from None
    settings = {**props, **spark_settings(props, args.spark_master, args.spark_conf), FLOW: args.flow,
                STORE_MAP: "false" if args.no_store else "true"}
    if args.topics is not None:
        settings[TOPICS] = args.topics
    originals = config.connector_config(source, target, SOURCE_CONNECTOR)
    clients = {side: client_props(originals, side, "consumer") for side in ("source", "target")}
    return settings, clients


def format_table(summary: dict[str, Any]) -> str:
    """The summary as a table, one row per partition and a total, with the map's fate below."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"reconcile {summary['flow']}", title_justify="left")
    table.add_column("topic-partition")
    table.add_column("copy on target")
    for label, _ in _COLUMNS:
        table.add_column(label, justify="right")
    table.add_column("map runs", justify="right")
    for p in summary["partitions"]:
        table.add_row(f"{p['topic']}-{p['partition']}", f"{p['target_topic']}-{p['partition']}",
                      *[str(p[key]) for _, key in _COLUMNS], str(p["runs"]))
    totals = summary["totals"]
    table.add_row("total", "", *[str(totals[key]) for _, key in _COLUMNS], str(summary["map"]["runs"]),
                  style="bold")
    console = Console(width=160, force_terminal=False, color_system=None, record=True)
    with console.capture() as capture:
        console.print(table)
    lines = [capture.get().rstrip()]
    for p in summary["partitions"]:
        if p["missing"]:
            lines.append(f"{p['topic']}-{p['partition']}: {p['missing']} record(s) missing between offsets "
                         f"{p['first_missing']} and {p['last_missing']}"
                         + (f" ({p['missing_tail']} after the last copy)" if p["missing_tail"] else ""))
    where = summary["map"]
    lines.append(f"offset map: {where['runs']} run(s) stored in {where['topic']} on the target"
                 if where["stored"] else "offset map: not stored (--no-store)")
    missing = totals["missing"]
    lines.append(f"{'every source record has a copy' if not missing else f'{missing} source record(s) missing'}; "
                 f"{totals['duplicated']} duplicated, {totals['unexpected']} unexpected, "
                 f"{totals['out_of_order']} out of order ({summary['seconds']} s)")
    return "\n".join(lines)


class ReconcileCommand(Command):
    """``mirrorline reconcile``: match a flow's source topics with their copies and store the offset map."""

    name = "reconcile"
    help = "prove a flow's copy on Spark: missing, duplicated, out-of-order records, and the exact offset map"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", metavar="MM2_PROPERTIES", help="mm2.properties of the flows")
        parser.add_argument("--flow", required=True, help="the replication flow, SOURCE->TARGET (e.g. A->B)")
        parser.add_argument("--topics", default=None, metavar="REGEX",
                            help="only the flow's source topics whose whole name matches REGEX")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")
        parser.add_argument("--no-store", action="store_true",
                            help="do not store the offset map on the target (failover --exact needs it)")
        parser.add_argument("--spark-master", default=None, metavar="URL",
                            help="spark.master (default: the file's spark.master, else embedded local[*])")
        parser.add_argument("--spark-conf", action="append", default=[], metavar="spark.KEY=VALUE",
                            help="any Spark setting (repeatable)")

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        settings, clients = job_settings(load_config_file(args.mm2_properties), args)
        with launcher.clients.quiet_logs():
            summary = await launcher.run_job(ReconcileJob.name, settings, client_settings=clients)
        print(json.dumps(summary, indent=2) if args.json else format_table(summary))
        return EXIT_MISSING if summary["totals"]["missing"] else 0
