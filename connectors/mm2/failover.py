"""``mirrorline offsets translate`` and ``mirrorline failover``: moving a consumer group to the target.

Both read the group's checkpoints on the target (``<source>.checkpoints.internal``), so they
work when the source cluster is gone. With ``--source-bootstrap`` they also count exactly
how many records the group would read again after switching (see
:func:`mirrorline.connectors.mirror_client.client.reread_count`). With ``--exact`` they place the group at
the copy of its next record, from the offset map ``mirrorline reconcile`` stored on the target
(:mod:`mirrorline.connectors.mm2.reconcile_exact`): 0 re-reads, and the source may be gone.

A partition the group has a position for on the source without a checkpoint (found with
``--source-bootstrap``; without it, a partition of a checkpointed topic that holds records on the
target and has no checkpoint) is listed with what it would lose or re-read, and both commands exit
1 naming it unless ``--allow-partial``.

``failover --group`` commits the translated offsets to the same group on the target
(``failover MM2_PROPERTIES --flow A->B`` and ``failback`` move whole flows: see
:mod:`mirrorline.connectors.mm2.flow_failover`). It refuses while
the group has active members there (the broker would refuse too) and never moves a partition
backwards unless ``--allow-backwards``; ``--dry-run`` shows the change without making it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mirrorline.api import (Command, ConnectError, KafkaClients, KafkaConnectionError, KafkaTimeoutError, TopicPartition,
                            WorkerLauncher)
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.client import MirrorClient, reread_count
from mirrorline.connectors.mirror_client.formats import Checkpoint
from mirrorline.connectors.mm2.flow_failover import add_flow_arguments, run_failback, run_failover
from mirrorline.connectors.mm2.locate import bounds
from mirrorline.connectors.mm2.reconcile_exact import exact_or_fail, load_maps
from mirrorline.connectors.mm2.untranslated import Untranslated, blocking, describe, impact, refuse_partial, report_partial


@dataclass
class PartitionPlan:
    """One partition of a group: where the checkpoint puts it, where it is, what failover would do."""

    tp: TopicPartition
    checkpoint: Checkpoint
    current: int | None
    reread: int | None
    #: with --exact: the position from reconcile's offset map (else the checkpoint's is used)
    exact: int | None = None

    @property
    def position(self) -> int:
        """Where failover puts the group: the exact position if known, else the checkpoint's."""
        return self.checkpoint.downstream_offset if self.exact is None else self.exact

    @property
    def backwards(self) -> bool:
        """True when committing the position would move the group back."""
        return self.current is not None and self.position < self.current


def _add_common(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--group", required=required, help="consumer group to translate")
    parser.add_argument("--source", required=required, help="alias of the cluster the group ran on (e.g. A)")
    parser.add_argument("--target-bootstrap", required=required, help="bootstrap.servers of the target cluster")
    parser.add_argument("--target-config", help="client settings for the target (.properties/.yaml): security, "
                                                "replication.policy.* ...")
    parser.add_argument("--source-bootstrap", help="bootstrap.servers of the source, to count re-reads exactly")
    parser.add_argument("--source-config", help="client settings for the source")


def _props(bootstrap: str, path: str | None) -> dict[str, str]:
    return {**(load_config_file(path) if path else {}), "bootstrap.servers": bootstrap}


@contextlib.asynccontextmanager
async def _reaching(side: str, bootstrap: str) -> AsyncIterator[None]:
    """Turn a failure to reach the ``side`` cluster inside the block into one actionable ConnectError."""
    try:
        yield
    except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
        # the client's texts repeat the class name and list resolved addresses; ours say more with less
        detail = exc.__class__.__name__ if not isinstance(exc, OSError) else str(exc) or exc.__class__.__name__
        raise ConnectError(f"cannot reach the {side} cluster at {bootstrap} ({detail}): check that "
                           f"its brokers run and --{side}-bootstrap is right (and --{side}-config's security "
                           f"settings, if any)") from None


async def plan(args: argparse.Namespace,
               clients: KafkaClients) -> tuple[list[PartitionPlan], str, list[Untranslated]]:
    """The group's checkpoints on the target, its current offsets there, its state, re-read counts, and the
    partitions it has a position for on the source that no checkpoint translates."""
    target_props = _props(args.target_bootstrap, args.target_config)
    async with _reaching("target", args.target_bootstrap), MirrorClient(target_props, clients) as client:
        checkpoints = await client.checkpoints(args.group, args.source)
        if not checkpoints:
            raise ConnectError(f"no checkpoints for group {args.group} from {args.source} on "
                               f"{args.target_bootstrap}: is the checkpoint connector running for this flow?")
        state = await client.admin.describe_consumer_group_state(args.group)
        current = {tp: om.offset for tp, om in (await client.admin.list_consumer_group_offsets(args.group)).items()
                   if om.offset >= 0}
        counts = {entry.name: len(entry.partitions) for entry in await client.admin.describe_topics()
                  if entry.error is None}
        policy = client.policy
    exact: dict[TopicPartition, int] = {}
    if getattr(args, "exact", False):  # from the offset map reconcile stored on the target
        maps = await load_maps(clients, target_props, args.source)
        exact = exact_or_fail(maps, policy, args.source, args.group,
                              {tp: c.upstream_offset for tp, c in checkpoints.items()})
    rereads: dict[TopicPartition, int | None] = {}
    untranslated: list[Untranslated] = []
    if not args.source_bootstrap:
        untranslated = await _unknown_untranslated(clients, target_props, args, checkpoints, counts)
    else:
        # earliest: should a position reset ever win over a seek, the scan restarts from the
        # beginning (and still finds the record at its real offset) instead of jumping to the end
        source = clients.consumer({**_props(args.source_bootstrap, args.source_config), "auto.offset.reset": "earliest"})
        target = clients.consumer({**target_props, "auto.offset.reset": "earliest"})
        try:
            async with _reaching("source", args.source_bootstrap):
                await source.start()
            async with _reaching("target", args.target_bootstrap):
                await target.start()
            for tp, checkpoint in checkpoints.items():
                upstream = policy.upstream_topic(tp.topic) if policy.topic_source(tp.topic) == args.source else None
                if upstream:
                    rereads[tp] = await reread_count(source, TopicPartition(upstream, tp.partition),
                                                     checkpoint.upstream_offset, target, tp,
                                                     exact.get(tp, checkpoint.downstream_offset))
            on_source = await _committed_on_source(args, clients)
            for origin, position in sorted(on_source.items()):
                remote = TopicPartition(policy.format_remote_topic(args.source, origin.topic), origin.partition)
                if remote in checkpoints or counts.get(remote.topic, 0) <= remote.partition:
                    continue  # translated, or a topic (partition) not mirrored to the target
                skipped, reread, why = await impact(source, origin, position, target, remote)
                reason = "no checkpoint" + (f" and its exact position is unknown ({why})" if why else "")
                untranslated.append(Untranslated(args.group, remote, position, skipped, reread, reason))
        finally:  # stopped even when start failed: an unstarted consumer still holds a client
            await source.stop()
            await target.stop()
    plans = [PartitionPlan(tp, c, current.get(tp), rereads.get(tp), exact.get(tp)) for tp, c in checkpoints.items()]
    return plans, state, untranslated


async def _committed_on_source(args: argparse.Namespace, clients: KafkaClients) -> dict[TopicPartition, int]:
    admin = clients.admin(_props(args.source_bootstrap, args.source_config))
    try:
        async with _reaching("source", args.source_bootstrap):
            await admin.start()
            offsets = await admin.list_consumer_group_offsets(args.group)
    finally:
        await admin.close()
    return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}


async def _unknown_untranslated(clients: KafkaClients, target_props: dict, args: argparse.Namespace,
                                checkpoints: dict, counts: dict[str, int]) -> list[Untranslated]:
    """Without the source: partitions of the checkpointed topics with records but no checkpoint."""
    candidates = [TopicPartition(topic, partition) for topic in sorted({tp.topic for tp in checkpoints})
                  for partition in range(counts.get(topic, 0)) if TopicPartition(topic, partition) not in checkpoints]
    if not candidates:
        return []
    target = clients.consumer(target_props)
    found = []
    try:
        async with _reaching("target", args.target_bootstrap):
            await target.start()
        for tp in candidates:
            start, end = await bounds(target, tp)
            if start < end:
                found.append(Untranslated(args.group, tp, None, None, None,
                                          f"no checkpoint; without --source-bootstrap whether the group has a "
                                          f"position there on {args.source} is unknown"))
    finally:
        await target.stop()
    return found


def _print(plans: list[PartitionPlan], group: str, state: str, untranslated: list[Untranslated],
           source: str) -> None:
    print(f"group {group} on the target: {state}")
    print(f"{'topic-partition':<50} {'source pos':>10} {'target pos':>10} {'current':>9} {'re-read':>8}")
    for p in plans:
        reread = "n/a" if p.reread is None else str(p.reread)
        current = "-" if p.current is None else str(p.current)
        print(f"{p.tp.topic + '-' + str(p.tp.partition):<50} {p.checkpoint.upstream_offset:>10} "
              f"{p.position:>10} {current:>9} {reread:>8}" + ("  (exact, offset map)" if p.exact is not None else ""))
    for u in untranslated:
        print(describe(u, source))
    known = [p.reread for p in plans if p.reread is not None]
    if known:
        print(f"a consumer switching now would read {sum(known)} record(s) again and skip none"
              + (" on the partitions translated" if blocking(untranslated) else ""))


class TranslateCommand(Command):
    """``mirrorline offsets translate``: print a group's translated positions and re-read counts."""

    name = "offsets"
    help = "consumer-group offset tools for mirrored clusters (offsets translate ...)"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="offsets_action", metavar="ACTION", required=True)
        translate = actions.add_parser("translate", help="print a group's positions translated for the target")
        _add_common(translate)
        translate.add_argument("--allow-partial", action="store_true",
                               help="exit 0 even when partitions with a position on the source have no translation")
        translate.add_argument("--exact", action="store_true",
                               help="translate with the offset map `mirrorline reconcile` stored on the target: "
                                    "the copy of the group's next record (0 re-reads), even with the source gone")

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        with launcher.clients.quiet_logs():
            plans, state, untranslated = await plan(args, launcher.clients)
        _print(plans, args.group, state, untranslated, args.source)
        refuse_partial(untranslated, args.source, "the target", args.allow_partial)
        return 0


class FailoverCommand(Command):
    """``mirrorline failover``: move consumer groups to the target cluster.

    ``mirrorline failover MM2_PROPERTIES --flow A->B`` moves every selected group of a flow
    (:mod:`mirrorline.connectors.mm2.flow_failover`); ``mirrorline failover --group G --source A
    --target-bootstrap ...`` moves one group without an mm2.properties.
    """

    name = "failover"
    help = "move consumer groups to the target cluster: a whole flow (MM2_PROPERTIES --flow A->B) or one --group"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", nargs="?", metavar="MM2_PROPERTIES",
                            help="mm2.properties of the flows: fail over a whole flow (with --flow)")
        add_flow_arguments(parser)
        group = parser.add_argument_group("one group, without an mm2.properties")
        _add_common(group, required=False)

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        with launcher.clients.quiet_logs():
            if args.mm2_properties:
                return await run_failover(args, launcher)
            missing = [option for option, value in (("--group", args.group), ("--source", args.source),
                                                    ("--target-bootstrap", args.target_bootstrap)) if not value]
            if missing:
                raise ConnectError(f"give an mm2.properties and --flow A->B to fail over a whole flow, or "
                                   f"{', '.join(missing)} to fail over one group")
            return await self._failover(args, launcher.clients)


    async def _failover(self, args: argparse.Namespace, clients: KafkaClients) -> int:
        plans, state, untranslated = await plan(args, clients)
        _print(plans, args.group, state, untranslated, args.source)
        if state not in ("Empty", "Dead") and not args.force:
            raise ConnectError(f"group {args.group} is {state} on the target: stop its consumers there first "
                               f"(or pass --force)")
        refuse_partial(untranslated, args.source, "the target", args.allow_partial)
        changes = {p.tp: (p.position, p.checkpoint.metadata) for p in plans
                   if args.allow_backwards or not p.backwards}
        kept = [p for p in plans if p.backwards and not args.allow_backwards]
        for p in kept:
            print(f"kept {p.tp.topic}-{p.tp.partition} at {p.current}: the new position ({p.position}) "
                  f"is behind it (--allow-backwards to move it)")
        if args.dry_run:
            print(f"dry run: would commit {len(changes)} offset(s) for group {args.group}; nothing changed")
            return 0
        if changes:
            admin = clients.admin(_props(args.target_bootstrap, args.target_config))
            try:
                async with _reaching("target", args.target_bootstrap):
                    await admin.start()
                await admin.alter_consumer_group_offsets(args.group, changes)
            finally:
                await admin.close()
        print(f"committed {len(changes)} offset(s) for group {args.group} on the target")
        report_partial(untranslated, "the target")
        return 0


class FailbackCommand(Command):
    """``mirrorline failback MM2_PROPERTIES --flow A->B``: move a failed-over flow's groups back to A."""

    name = "failback"
    help = "after a failover of A->B, move the groups back to A once B->A has copied B's new records"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("mm2_properties", metavar="MM2_PROPERTIES", help="mm2.properties of the flows")
        add_flow_arguments(parser, failback=True)

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        with launcher.clients.quiet_logs():
            return await run_failback(args, launcher)
