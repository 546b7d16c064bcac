"""``mirrorline failover MM2_PROPERTIES --flow A->B`` and ``mirrorline failback``: whole-flow moves.

Failover moves every selected consumer group of a flow from its source A to its target B in one
command. Before acting it prints the plan: the recovery point (per topic, the records and
seconds of data A holds that B does not; "unknown" when A is down), each group's translated
positions and expected re-reads, and the numbered steps. Then it carries the steps out:

1. with ``--stop-flow``: stop the flow's MirrorSource and MirrorCheckpoint connectors (their
   target state in the flow's config topic on B, as ``PUT /connectors/{name}/stop`` would), so
   nothing more is copied into B and no checkpoint sync touches the groups;
2. commit each group's translated offsets on B: from MM2's checkpoints, or with ``--exact`` at
   the copy of each group's next unread record — 0 re-reads — from the offset map
   ``mirrorline reconcile`` stored on B (works with A gone), else found by content (A reachable);
3. with ``--start-reverse-flow``: resume the B->A connectors (for the failback later).

Failback reverses it once A is back: B->A must have copied B's new records to A (it waits up
to ``--wait-seconds`` for the B->A recovery point to reach 0 records, and refuses otherwise
unless ``--force``); then every selected group on B is placed on A exactly, by content: a
position on a remote topic (``A.orders`` on B) goes back to the original (``orders`` on A),
a position on a topic of B's goes to its copy on A (``B.results``). ``--stop-reverse-flow``
and ``--resume-flow`` stop B->A and resume A->B.

Groups active on the destination are refused (nothing is committed) unless ``--force``; a
partition is never moved backwards unless ``--allow-backwards``. A partition a group has a
position for on the origin that cannot be translated (no checkpoint, not placeable) is never
passed over: the plan lists it with what it would lose or re-read at ``auto.offset.reset``, and the
command refuses unless ``--allow-partial`` (:mod:`mirrorline.connectors.mm2.untranslated`). Every step is idempotent, so
a run interrupted midway is finished by running the same command again.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mirrorline.api import ConnectError, TopicPartition, WorkerLauncher, WorkerSpec
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.client import reread_count
from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mm2.locate import bounds
from mirrorline.connectors.mm2.mm2_config import CHECKPOINT_CONNECTOR, SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.mm2.offset_map_store import read_maps

from .flow_clients import FlowEnds, Side, parse_flow
from .flow_connectors import refusal
from .flow_plan import (
    FlowPlan,
    GroupMove,
    PartitionMove,
    checkpoints_by_group,
    committed,
    consumer_groups,
    exact_move,
    format_plan,
    group_pattern,
    measure_rpo,
    mirrored_topics,
    partition_counts,
)
from .reconcile_exact import exact_or_fail, map_position, reconcile_hint
from .untranslated import Untranslated, blocking, impact, refuse_partial, report_partial

#: Connectors a stopped flow no longer runs (its heartbeats keep going).
FLOW_DATA_CONNECTORS = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR)


def add_flow_arguments(parser: argparse.ArgumentParser, *, failback: bool = False) -> None:
    """The options shared by ``failover MM2_PROPERTIES`` and ``failback``."""
    parser.add_argument("--flow", help="the replication flow, SOURCE->TARGET (e.g. A->B)")
    parser.add_argument("--groups", default=".*", help="regex of the consumer groups to move (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    parser.add_argument("--force", action="store_true",
                        help="go on even with groups active on the destination" +
                             (" or records the reverse flow has not copied yet" if failback else ""))
    parser.add_argument("--allow-backwards", action="store_true",
                        help="also move partitions whose current offset on the destination is further ahead")
    parser.add_argument("--allow-partial", action="store_true",
                        help="go on even when some partitions with a position on the origin have no translation "
                             "(the plan lists them; a consumer starts them at auto.offset.reset)")
    if failback:
        parser.add_argument("--wait-seconds", type=float, default=60.0,
                            help="how long to wait for the reverse flow to copy B's records to A (default 60)")
        parser.add_argument("--stop-reverse-flow", action="store_true",
                            help="stop the reverse flow's MirrorSource and MirrorCheckpoint connectors first")
        parser.add_argument("--resume-flow", action="store_true",
                            help="resume the original flow's connectors at the end")
    else:
        parser.add_argument("--exact", action="store_true",
                            help="place groups at the copy of their next unread record: 0 re-reads, where "
                                 "MM2's checkpoints re-read up to offset.lag.max (from the offset map of "
                                 "`mirrorline reconcile`, which works with the source gone; else needs the source)")
        parser.add_argument("--stop-flow", action="store_true",
                            help="stop the flow's MirrorSource and MirrorCheckpoint connectors first")
        parser.add_argument("--start-reverse-flow", action="store_true",
                            help="resume the reverse flow's connectors at the end (it must have run before)")


def load(args: argparse.Namespace) -> tuple[MirrorMakerConfig, str, str]:
    """The mm2.properties and the flow's (source, target) aliases; ConfigError naming the file otherwise."""
    if not args.flow:
        raise ConnectError("--flow SOURCE->TARGET is required with an mm2.properties file (e.g. --flow A->B)")
    group_pattern(args.groups)  # a bad regex is reported before any cluster is contacted
    config = MirrorMakerConfig(load_config_file(args.mm2_properties))
    source, target = parse_flow(config, args.flow)
    return config, source, target


# --------------------------------------------------------------------------- failover


async def plan_failover(args: argparse.Namespace, config: MirrorMakerConfig, ends: FlowEnds) -> FlowPlan:
    """The failover plan of flow ``ends.source_alias -> ends.target_alias``."""
    pattern = group_pattern(args.groups)
    source, target = ends.source, ends.target
    assert target is not None
    policy = ends.policy
    target_topics = await partition_counts(target)
    pairs: list[tuple[str, str]] = []
    if source is None:
        rpo, note = None, f"cluster {ends.source_alias} is unreachable ({ends.unreachable.get('source')})"
    else:
        source_topics = await partition_counts(source)
        pairs = mirrored_topics(policy, TopicFilter(ends.originals), ends.source_alias, ends.target_alias,
                                source_topics, target_topics)
        rpo, note = await measure_rpo(source, target, pairs, source_topics, target_topics), ""
    # --exact: reconcile's offset map first (it needs only the target), else content lookup on both clusters
    maps = await read_maps(target.admin, target.consumer, ends.source_alias) if args.exact else {}
    if args.exact and source is None and not maps:
        raise ConnectError(f"--exact needs cluster {ends.source_alias} to answer, or an offset map on "
                           f"{ends.target_alias}: {note}; {reconcile_hint(ends.source_alias)}, or run without "
                           f"--exact to move the groups with MM2's checkpoints")
    checkpoints_topic = policy.checkpoints_topic(ends.source_alias)
    all_checkpoints = (await checkpoints_by_group(target, checkpoints_topic)
                       if checkpoints_topic in target_topics else {})
    remote_of = dict(pairs) if source is not None else {}
    names = {g for g in all_checkpoints if pattern.fullmatch(g)}
    if source is not None:  # groups with positions on the flow's topics but no checkpoint at all count too
        for group in await consumer_groups(source):
            if pattern.fullmatch(group) and group not in names and \
                    any(tp.topic in remote_of for tp in await committed(source, group)):
                names.add(group)
    groups = []
    for group in sorted(names):
        move = GroupMove(group, await target.admin.describe_consumer_group_state(group))
        current = await committed(target, group)
        on_source = await committed(source, group) if source is not None else {}
        checkpoints = all_checkpoints.get(group, {})
        for tp, checkpoint in checkpoints.items():
            upstream = policy.upstream_topic(tp.topic) if policy.topic_source(tp.topic) == ends.source_alias else None
            origin = TopicPartition(upstream, tp.partition) if upstream else None
            part = PartitionMove(tp, origin, checkpoint.upstream_offset, checkpoint.downstream_offset,
                                 current.get(tp), checkpoint.metadata)
            if args.exact and source is None:  # the map alone; a position it does not cover is an error
                exact = exact_or_fail(maps, policy, ends.source_alias, group, {tp: checkpoint.upstream_offset})[tp]
                part.position, part.how, part.rereads = exact, "map", 0
            elif source is not None and origin is not None:
                position = on_source.get(origin, checkpoint.upstream_offset)
                by_map = map_position(maps, policy, ends.source_alias, tp, position)[0] if args.exact else None
                if by_map is not None:
                    part.origin_position, part.position, part.how, part.rereads = position, by_map, "map", 0
                else:
                    await _place_exactly(part, source, target, position, use=args.exact)
            move.partitions.append(part)
        if source is not None:
            await _without_checkpoint(move, args, ends, on_source, remote_of, checkpoints, current, target_topics,
                                      maps)
        else:
            await _unknown_without_checkpoint(move, ends, checkpoints, target_topics)
        groups.append(move)
    plan = FlowPlan("Failover", ends.source_alias, ends.target_alias, rpo, note, groups)
    if args.stop_flow:
        plan.steps.append(f"stop connectors {', '.join(FLOW_DATA_CONNECTORS)} of flow "
                          f"{ends.source_alias}->{ends.target_alias}")
    plan.steps.extend(_commit_steps(groups, ends.target_alias, args.allow_backwards))
    if args.start_reverse_flow:
        plan.steps.append(f"resume connectors {', '.join(FLOW_DATA_CONNECTORS)} of flow "
                          f"{ends.target_alias}->{ends.source_alias}")
    return plan


async def _without_checkpoint(move: GroupMove, args: argparse.Namespace, ends: FlowEnds, on_source: dict,
                              remote_of: dict[str, str], checkpoints: dict, current: dict, target_topics: dict,
                              maps) -> None:
    """The group's positions on the source's mirrored topics that no checkpoint translates.

    With ``--exact`` they are placed like the others (offset map, else by content); otherwise, or
    where that fails, they are listed as untranslated, with what they would lose or re-read.
    """
    source, target = ends.source, ends.target
    assert source is not None and target is not None
    for origin, position in sorted(on_source.items()):
        remote = remote_of.get(origin.topic)
        if remote is None:
            continue  # a topic this flow does not mirror: nothing of it is on the target
        tp = TopicPartition(remote, origin.partition)
        if tp in checkpoints:
            continue
        if target_topics.get(remote, 0) <= origin.partition:
            move.untranslated.append(Untranslated(move.group, tp, position, None, None,
                                                  f"{ends.target_alias} has no partition {origin.partition} of {remote}"))
            continue
        if args.exact:
            part = PartitionMove(tp, origin, position, None, current.get(tp))
            by_map = map_position(maps, ends.policy, ends.source_alias, tp, position)[0]
            if by_map is not None:
                part.position, part.how, part.rereads = by_map, "map", 0
            else:
                exact, part.missing, _ = await exact_move(source, origin, position, target, tp)
                part.position, part.how, part.rereads = exact, "exact", 0
            if part.position is not None:
                move.partitions.append(part)
                continue
        skipped, reread, why = await impact(source.consumer, origin, position, target.consumer, tp)
        reason = "no checkpoint" + (f" and its exact position is unknown ({why})" if why else "")
        move.untranslated.append(Untranslated(move.group, tp, position, skipped, reread, reason))


async def _unknown_without_checkpoint(move: GroupMove, ends: FlowEnds, checkpoints: dict, target_topics: dict) -> None:
    """Source gone: partitions of the group's checkpointed topics without a checkpoint and with records on the target.

    Whether the group had a position there cannot be known without the source, so they are listed.
    """
    target = ends.target
    assert target is not None
    for topic in sorted({tp.topic for tp in checkpoints}):
        for partition in range(target_topics.get(topic, 0)):
            tp = TopicPartition(topic, partition)
            if tp in checkpoints:
                continue
            start, end = await bounds(target.consumer, tp)
            if start == end:
                continue  # nothing there: no position can lose or re-read anything
            move.untranslated.append(Untranslated(
                move.group, tp, None, None, None,
                f"no checkpoint, and cluster {ends.source_alias} does not answer: whether the group has a position "
                f"there is unknown"))


async def _place_exactly(part: PartitionMove, origin: Side, destination: Side, origin_position: int,
                         *, use: bool) -> None:
    """Fill in the exact position (and the checkpoint's re-reads against it); commit it when ``use``."""
    exact, missing, reason = await exact_move(origin, part.origin, origin_position, destination, part.destination)
    part.missing = missing
    if exact is None:
        if use:
            part.note = f"exact position unknown ({reason}); MM2 checkpoint used"
        part.rereads = await _checkpoint_rereads(part, origin, destination)
        return
    if use:
        part.origin_position, part.position, part.how, part.rereads = origin_position, exact, "exact", 0
    else:
        part.rereads = max(0, exact - part.position) if part.position is not None else None
        if part.position is not None and part.position > exact:
            part.note = f"skips {part.position - exact} record(s)"


async def _checkpoint_rereads(part: PartitionMove, origin: Side, destination: Side) -> int | None:
    if part.origin is None or part.position is None or part.origin_position is None:
        return None
    return await reread_count(origin.consumer, part.origin, part.origin_position, destination.consumer,
                              part.destination, part.position)


def _commit_steps(groups: list[GroupMove], destination: str, allow_backwards: bool) -> list[str]:
    steps = []
    for move in groups:
        changes = move.changes(allow_backwards)
        kept = [p for p in move.partitions if p.backwards and not allow_backwards]
        text = f"commit {len(changes)} offset(s) of group {move.group} on {destination}"
        if not changes:
            text = (f"group {move.group}: nothing to commit on {destination}"
                    + (" (already in place)" if move.partitions else ""))
        left = blocking(move.untranslated)
        if left:
            text += f"; {len(left)} partition(s) without translation stay at auto.offset.reset"
        if kept:
            text += f"; keep {len(kept)} partition(s) that are further ahead (--allow-backwards moves them)"
        steps.append(text)
    return steps


# --------------------------------------------------------------------------- failback


async def plan_failback(args: argparse.Namespace, config: MirrorMakerConfig, ends: FlowEnds,
                        reverse: FlowEnds) -> FlowPlan:
    """The failback plan: groups on the flow's target go back to its source.

    ``ends`` is the original flow A->B and ``reverse`` is B->A (its source is B).
    """
    pattern = group_pattern(args.groups)
    a, b = ends.source, ends.target
    assert a is not None and b is not None
    policy = ends.policy
    a_topics, b_topics = await partition_counts(a), await partition_counts(b)
    reverse_policy = reverse.policy
    pairs = mirrored_topics(reverse_policy, TopicFilter(reverse.originals), reverse.source_alias,
                            reverse.target_alias, b_topics, a_topics)
    rpo = await _wait_for_reverse_copy(b, a, pairs, b_topics, args.wait_seconds)
    groups = []
    for group in [g for g in await consumer_groups(b) if pattern.fullmatch(g)]:
        on_b = await committed(b, group)
        if not on_b:
            continue
        move = GroupMove(group, await a.admin.describe_consumer_group_state(group))
        on_a = await committed(a, group)
        for tp, position in sorted(on_b.items()):
            if policy.topic_source(tp.topic) == ends.source_alias:
                destination = TopicPartition(policy.upstream_topic(tp.topic), tp.partition)
            elif any(topic == tp.topic for topic, _ in pairs):
                destination = TopicPartition(reverse_policy.format_remote_topic(reverse.source_alias, tp.topic),
                                             tp.partition)
            else:
                continue  # a topic B does not copy to A: nothing to place there
            if a_topics.get(destination.topic, 0) <= destination.partition:
                move.untranslated.append(Untranslated(
                    group, destination, position, None, None,
                    f"{ends.source_alias} has no partition {destination.partition} of {destination.topic}"))
                continue
            part = PartitionMove(destination, tp, position, None, on_a.get(destination), how="exact")
            exact, missing, reason = await exact_move(b, tp, position, a, destination)
            if exact is None:
                skipped, reread, _ = await impact(b.consumer, tp, position, a.consumer, destination)
                move.untranslated.append(Untranslated(group, destination, position, skipped, reread,
                                                      f"cannot be placed: {reason}"))
                continue
            part.position, part.missing, part.rereads = exact, missing, 0
            move.partitions.append(part)
        if move.partitions or move.untranslated:
            groups.append(move)
    plan = FlowPlan("Failback", ends.target_alias, ends.source_alias, rpo, "", groups)
    if args.stop_reverse_flow:
        plan.steps.append(f"stop connectors {', '.join(FLOW_DATA_CONNECTORS)} of flow "
                          f"{reverse.source_alias}->{reverse.target_alias}")
    plan.steps.extend(_commit_steps(groups, ends.source_alias, args.allow_backwards))
    if args.resume_flow:
        plan.steps.append(f"resume connectors {', '.join(FLOW_DATA_CONNECTORS)} of flow "
                          f"{ends.source_alias}->{ends.target_alias}")
    return plan


async def _wait_for_reverse_copy(b: Side, a: Side, pairs, b_topics, wait_seconds: float):
    deadline = time.monotonic() + wait_seconds
    while True:
        a_topics = await partition_counts(a)
        rpo = await measure_rpo(b, a, pairs, b_topics, a_topics)
        missing = [t.missing for t in rpo]
        if all(m == 0 for m in missing) or time.monotonic() >= deadline:
            return rpo
        await asyncio.sleep(2.0)


# --------------------------------------------------------------------------- carrying it out


async def commit_groups(plan: FlowPlan, destination: Side, allow_backwards: bool) -> None:
    """Commit every group's planned offsets on the destination, printing what each step did."""
    for move in plan.groups:
        changes = move.changes(allow_backwards)
        if not changes:
            print(f"group {move.group}: unchanged on {plan.destination}")
            continue
        await destination.admin.alter_consumer_group_offsets(move.group, changes)
        print(f"committed {len(changes)} offset(s) for group {move.group} on {plan.destination}")


def refuse_active(plan: FlowPlan, force: bool) -> None:
    """ConnectError listing the groups active on the destination, unless ``force``."""
    active = [f"{m.group} ({m.state})" for m in plan.groups if m.active]
    if active and not force:
        raise ConnectError(f"group(s) active on {plan.destination}: {', '.join(active)}; stop their consumers "
                           f"there first (or pass --force); nothing was changed")


async def set_flow_state(launcher: WorkerLauncher, config: MirrorMakerConfig, source: str, target: str,
                         state: str) -> None:
    """Stop or resume the data connectors of flow ``source->target`` through its config topic."""
    spec = WorkerSpec(f"{source}->{target}", config.worker_config(source, target), [], distributed=True)
    for name in FLOW_DATA_CONNECTORS:
        connector_config = config.connector_config(source, target, name)
        connector = connector_config.get("name", name)
        why = refusal(name, connector_config)
        if why is not None:  # `mirrorline mm2` never created it (flow_connectors)
            print(f"connector {connector} of flow {source}->{target}: not run by this flow ({why})")
            continue
        changed = await launcher.set_connector_state(spec, connector, state)
        verb = "stopped" if state == "STOPPED" else "resumed"
        print(f"connector {connector} of flow {source}->{target}: {verb if changed else 'already ' + verb}")


@dataclass(frozen=True)
class _Move:
    """What tells a failover from a failback; :func:`_run_move` is the one script both follow.

    A failover moves the groups of flow ``A->B`` from A to B, a failback from B back to A. Each
    plans, prints the plan, refuses what must not happen, commits the groups on the destination
    and stops or starts flows around that commit; only the details below differ.
    """

    required: tuple[str, ...]
    plan: Callable[[argparse.Namespace, MirrorMakerConfig, FlowEnds], Awaitable[FlowPlan]]
    refuse: Callable[[FlowPlan, argparse.Namespace, FlowEnds], None]
    #: ``(args, source, target)`` -> the flows (source, target) to stop before the commit / start after it
    stop_before: Callable[[argparse.Namespace, str, str], list[tuple[str, str]]]
    start_after: Callable[[argparse.Namespace, str, str], list[tuple[str, str]]]
    done: str


def _refuse_failover(plan: FlowPlan, args: argparse.Namespace, ends: FlowEnds) -> None:
    refuse_active(plan, args.force)
    hint = "" if args.exact or ends.source is None else \
        f"; --exact places them by content while {plan.origin} answers"
    refuse_partial(plan.untranslated, plan.origin, plan.destination, args.allow_partial, hint)


def _refuse_failback(plan: FlowPlan, args: argparse.Namespace, ends: FlowEnds) -> None:
    missing = plan.missing
    if missing != 0 and not args.force:
        what = "an unknown number of" if missing is None else str(missing)
        raise ConnectError(f"{plan.destination} still lacks {what} record(s) of {plan.origin}'s after "
                           f"{args.wait_seconds:.0f} s: let flow {plan.origin}->{plan.destination} copy them (is it "
                           f"enabled and running?), or pass --force; nothing was changed")
    refuse_active(plan, args.force)
    refuse_partial(plan.untranslated, plan.origin, plan.destination, args.allow_partial)


FAILOVER = _Move(
    required=("target",), plan=plan_failover, refuse=_refuse_failover,
    stop_before=lambda args, source, target: [(source, target)] if args.stop_flow else [],
    start_after=lambda args, source, target: [(target, source)] if args.start_reverse_flow else [],
    done="failover of {source}->{target} done")

FAILBACK = _Move(
    required=("source", "target"),
    plan=lambda args, config, ends: plan_failback(args, config, ends, FlowEnds(config, ends.target_alias,
                                                                               ends.source_alias)),
    refuse=_refuse_failback,
    stop_before=lambda args, source, target: [(target, source)] if args.stop_reverse_flow else [],
    start_after=lambda args, source, target: [(source, target)] if args.resume_flow else [],
    done="failback of {source}->{target} done: groups are back on {source}")


async def _run_move(args: argparse.Namespace, launcher: WorkerLauncher, move: _Move) -> int:
    """Plan, print, refuse or carry out one move of flow ``--flow`` (see :class:`_Move`)."""
    config, source, target = load(args)
    async with FlowEnds(config, source, target, required=move.required, clients=launcher.clients) as ends:
        plan = await move.plan(args, config, ends)
        print(format_plan(plan))
        move.refuse(plan, args, ends)
        if args.dry_run:
            print("\ndry run: nothing changed")
            return 0
        print()
        for flow in move.stop_before(args, source, target):
            await set_flow_state(launcher, config, *flow, "STOPPED")
        destination = ends.target if plan.destination == target else ends.source
        assert destination is not None
        await commit_groups(plan, destination, args.allow_backwards)
        for flow in move.start_after(args, source, target):
            await set_flow_state(launcher, config, *flow, "STARTED")
        report_partial(plan.untranslated, plan.destination)
    print(move.done.format(source=source, target=target))
    return 0


async def run_failover(args: argparse.Namespace, launcher: WorkerLauncher) -> int:
    """``mirrorline failover MM2_PROPERTIES --flow A->B``: plan, print, then carry out."""
    return await _run_move(args, launcher, FAILOVER)


async def run_failback(args: argparse.Namespace, launcher: WorkerLauncher) -> int:
    """``mirrorline failback MM2_PROPERTIES --flow A->B``: groups back from B to A, plan first."""
    return await _run_move(args, launcher, FAILBACK)
