"""``mirrorline backfill MM2_PROPERTIES --flow A->B``: copy a flow's history with Spark, then stream.

Reads the mm2.properties as ``mirrorline mm2`` does, and runs the ``backfill`` job
(:class:`~mirrorline.connectors.mm2.backfill_job.BackfillJob`) with the flow's MirrorSource settings, the
flow worker's offset-store settings and the Spark settings: top-level ``spark.*`` keys of the
file, then ``--spark-master`` and ``--spark-conf KEY=VALUE``. Start ``mirrorline mm2`` on the
same file afterwards: it continues from exactly the record after each copied range.
See docs/backfill.md.
"""

from __future__ import annotations

import argparse
import json

from mirrorline.api import Command, ConfigError, WorkerLauncher
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig

from .backfill_job import ALLOW_GAPS, FROM, TO, TOPICS, WORKER_PREFIX
from .backfill_plan import parse_position
from .flow_clients import parse_flow


def spark_settings(props: dict[str, str], master: str | None, conf: list[str]) -> dict[str, str]:
    """``spark.*`` settings: the file's top-level ones, then ``--spark-master``, then ``--spark-conf``."""
    out = {k: v for k, v in props.items() if k.startswith("spark.")}
    if master:
        out["spark.master"] = master
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise ConfigError(f"--spark-conf {item!r}: expected spark.KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def job_settings(config: MirrorMakerConfig, source: str, target: str, args: argparse.Namespace,
                 spark: dict[str, str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The backfill job's settings and the client settings of its ``source`` and ``target`` clusters."""
    originals = {k: str(v) for k, v in config.connector_config(source, target, SOURCE_CONNECTOR).items()}
    worker = config.worker_config(source, target)
    settings = {**originals, **{f"{WORKER_PREFIX}{k}": str(v) for k, v in worker.items()}, **spark,
                TOPICS: args.topics or "", FROM: args.from_, TO: args.to, ALLOW_GAPS: str(args.allow_gaps).lower()}
    clients = {"source": client_props(originals, "source", "consumer"),
               "target": {**client_props(originals, "target", "producer"),
                          "client.id": f"{source}->{target}|backfill-producer"}}
    return settings, clients


def format_summary(summary: dict) -> str:
    """The job's summary as the lines printed at the end."""
    lines = [f"{'partition':<40} {'remote':<40} {'source range':>21} {'target range':>21}"]
    for r in summary["ranges"]:
        lines.append(f"{r['topic'] + '-' + str(r['partition']):<40} {r['remote']:<40} "
                     f"{str(r['start']) + '..' + str(r['end']):>21} "
                     f"{str(r['target_start']) + '..' + str(r['target_end']):>21}")
    seconds = max(summary["seconds"], 1e-9)
    lines.append(f"backfill {summary['flow']}: {summary['records_written']} record(s), "
                 f"{summary['bytes_written'] / 1e6:.1f} MB written in {summary['seconds']:.1f} s "
                 f"({summary['bytes_written'] / 1e6 / seconds:.1f} MB/s) over {summary['partitions']} partition(s)"
                 + (f"; {summary['already_done']} partition(s) already backfilled" if summary["already_done"] else "")
                 + (f"; {summary['resumed']} resumed" if summary["resumed"] else "")
                 + (f"; {summary['gap_records']} record(s) lost to retention" if summary["gap_records"] else ""))
    lines.append("MirrorSource's offsets are stored: `mirrorline mm2` continues from the next record")
    return "\n".join(lines)


class BackfillCommand(Command):
    """``mirrorline backfill``: bulk-copy a flow's history on Spark with an exact hand-off to streaming."""

    name = "backfill"
    help = "copy the history of an MM2 flow's topics with Spark, then hand over to `mirrorline mm2` exactly"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", metavar="MM2_PROPERTIES", help="mm2.properties of the flows")
        parser.add_argument("--flow", required=True, metavar="A->B", help="the flow to backfill")
        parser.add_argument("--topics", default=None, metavar="REGEX",
                            help="only source topics whose whole name matches (within the flow's topics)")
        parser.add_argument("--from", dest="from_", default="earliest", metavar="POSITION",
                            help="first record per partition: earliest (default), offset:N or timestamp:MS")
        parser.add_argument("--to", default="latest", metavar="POSITION",
                            help="end per partition, exclusive: latest (default: the end now), offset:N or timestamp:MS")
        parser.add_argument("--allow-gaps", action="store_true",
                            help="copy what is left of ranges partly deleted by retention, and count the gap")
        parser.add_argument("--spark-master", default=None, metavar="URL",
                            help="spark.master (default: the file's spark.master, else embedded local[*])")
        parser.add_argument("--spark-conf", action="append", default=[], metavar="spark.KEY=VALUE",
                            help="any Spark setting (repeatable)")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        props = load_config_file(args.mm2_properties)
        try:
            config = MirrorMakerConfig(props)
            source, target = parse_flow(config, args.flow)
        except ConfigError as exc:
            raise ConfigError(f"{args.mm2_properties}: {exc}") from None
        parse_position("--from", args.from_)
        parse_position("--to", args.to)
        settings, clients = job_settings(config, source, target, args,
                                         spark_settings(props, args.spark_master, args.spark_conf))
        with launcher.clients.quiet_logs():
            summary = await launcher.run_job("backfill", settings, client_settings=clients)
        print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
        return 0
