"""What a whole-flow failover or failback would do: recovery point, group moves, and the steps.

A plan is computed (read-only) before anything changes, printed, and then carried out step by
step by :mod:`mirrorline.connectors.mm2.flow_failover`. Every step is idempotent: a group already at its
planned position is reported "unchanged", a connector already stopped stays stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirrorline.api import ConfigError, TopicPartition

from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.formats import Checkpoint, SchemaError
from mirrorline.connectors.mm2.locate import translate_position
from mirrorline.connectors.mirror_client.policies import ReplicationPolicy, is_cycle
from mirrorline.connectors.mm2.rpo import TopicRpo, topic_rpo

from .flow_clients import Side
from .untranslated import Untranslated, blocking, describe, summary_line

#: Group states in which offsets may be committed for a group from outside it.
INACTIVE_STATES = ("Empty", "Dead")


def group_pattern(text: str) -> re.Pattern[str]:
    """``--groups``: a regular expression a whole group id must match; ConfigError if invalid."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--groups {text!r} is not a valid regular expression: {exc}") from None


@dataclass
class PartitionMove:
    """One partition of a group: where it is on the origin, and where it goes on the destination."""

    destination: TopicPartition
    origin: TopicPartition | None
    origin_position: int | None
    position: int | None
    current: int | None
    metadata: str = ""
    how: str = "checkpoint"
    rereads: int | None = None
    missing: int = 0
    note: str = ""

    @property
    def backwards(self) -> bool:
        """True when the planned position is behind the group's current one on the destination."""
        return self.position is not None and self.current is not None and self.position < self.current


@dataclass
class GroupMove:
    """A consumer group's move to the destination cluster."""

    group: str
    state: str
    partitions: list[PartitionMove] = field(default_factory=list)
    #: partitions it has a position for on the origin that the move cannot translate
    untranslated: list[Untranslated] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """True while the group has members on the destination (its offsets cannot be set from outside)."""
        return self.state not in INACTIVE_STATES

    def changes(self, allow_backwards: bool) -> dict[TopicPartition, tuple[int, str]]:
        """The offsets to commit: known positions that differ from the current ones (and go forward)."""
        return {p.destination: (p.position, p.metadata) for p in self.partitions
                if p.position is not None and p.position != p.current and (allow_backwards or not p.backwards)}


@dataclass
class FlowPlan:
    """Everything a failover or failback will do, computed before it does any of it."""

    kind: str
    origin: str
    destination: str
    rpo: list[TopicRpo] | None
    rpo_note: str
    groups: list[GroupMove]
    steps: list[str] = field(default_factory=list)

    @property
    def untranslated(self) -> list[Untranslated]:
        """Every partition of every group left without translation (harmless ones included)."""
        return [u for move in self.groups for u in move.untranslated]

    @property
    def missing(self) -> int | None:
        """Records the destination lacks, over every topic (None when unknown)."""
        if self.rpo is None:
            return None
        counts = [t.missing for t in self.rpo]
        return None if any(c is None for c in counts) else sum(counts)


# --------------------------------------------------------------------------- topics


def mirrored_topics(policy: ReplicationPolicy, topic_filter: TopicFilter, source_alias: str, target_alias: str,
                    source_topics: dict[str, int], target_topics: dict[str, int]) -> list[tuple[str, str]]:
    """(source topic, remote topic) for every data topic the flow's filter selects on the source.

    Internal, heartbeat and cyclic topics are left out, as MirrorSource leaves them out.
    ``target_topics`` is accepted for symmetry with the callers and not needed here.
    """
    chosen: dict[str, str] = {}
    for topic in source_topics:
        if (topic_filter.should_replicate_topic(topic) and not policy.is_internal_topic(topic)
                and not policy.is_heartbeats_topic(topic) and not is_cycle(policy, target_alias, topic)):
            chosen[topic] = policy.format_remote_topic(source_alias, topic)
    return sorted(chosen.items())


async def measure_rpo(source: Side, target: Side, pairs: list[tuple[str, str]],
                      source_topics: dict[str, int], target_topics: dict[str, int]) -> list[TopicRpo]:
    """The recovery point of every (source topic, remote topic) pair."""
    return [await topic_rpo(source.consumer, topic, source_topics[topic], target.consumer, remote,
                            target_topics.get(remote, 0)) for topic, remote in pairs]


async def partition_counts(side: Side) -> dict[str, int]:
    """Every topic of a cluster with its partition count."""
    metadata = await side.admin.describe_topics(await side.admin.list_topics())
    return {entry.name: len(entry.partitions) for entry in metadata if entry.error is None}


# --------------------------------------------------------------------------- groups


async def checkpoints_by_group(side: Side, topic: str) -> dict[str, dict[TopicPartition, Checkpoint]]:
    """The last checkpoint of every group and partition in checkpoints topic ``topic`` on ``side``."""
    from mirrorline.connectors.mm2.locate import bounds, scan

    out: dict[str, dict[TopicPartition, Checkpoint]] = {}
    tp = TopicPartition(topic, 0)
    start, end = await bounds(side.consumer, tp)
    async for record in scan(side.consumer, tp, start, end):
        try:
            checkpoint = Checkpoint.decode(record.key, record.value)
        except (SchemaError, TypeError, ValueError):
            continue
        out.setdefault(checkpoint.group, {})[TopicPartition(checkpoint.topic, checkpoint.partition)] = checkpoint
    return out


async def committed(side: Side, group: str) -> dict[TopicPartition, int]:
    """The committed offsets of ``group`` on ``side`` (partitions without one left out)."""
    offsets = await side.admin.list_consumer_group_offsets(group)
    return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}


async def consumer_groups(side: Side) -> list[str]:
    """Every consumer group on ``side`` (Connect worker groups and other protocols left out)."""
    listed = await side.admin.list_consumer_groups()
    return sorted({entry.group_id for entry in listed if entry.protocol_type in ("consumer", "")})


async def exact_move(origin: Side, origin_tp: TopicPartition, position: int,
                     destination: Side, destination_tp: TopicPartition) -> tuple[int | None, int, str]:
    """(exact destination position or None, records not on the destination, why unknown)."""
    translation = await translate_position(origin.consumer, origin_tp, position, destination.consumer, destination_tp)
    return translation.position, translation.missing, translation.reason


def format_plan(plan: FlowPlan) -> str:
    """The plan as the text printed before anything runs."""
    lines = [f"{plan.kind} plan: consumer groups move from {plan.origin} to {plan.destination}", ""]
    lines.append(f"Recovery point: records {plan.origin} holds that {plan.destination} does not")
    if plan.rpo is None:
        lines.append(f"  unknown: {plan.rpo_note}")
    else:
        lines.append(f"  {'topic':<40} {'remote':<40} {'records':>8} {'seconds':>8}")
        for topic in plan.rpo:
            missing = "?" if topic.missing is None else f"{topic.missing}{'' if topic.exact else '~'}"
            lines.append(f"  {topic.topic:<40} {topic.remote:<40} {missing:>8} {topic.seconds:>8.1f}")
        total = plan.missing
        worst = max((t.seconds for t in plan.rpo), default=0.0)
        lines.append(f"  total: {'unknown' if total is None else total} record(s), up to {worst:.1f} s of data")
        if plan.rpo_note:
            lines.append(f"  {plan.rpo_note}")
    untranslated_line = summary_line(plan.untranslated, plan.origin)
    if untranslated_line:
        lines.append(f"  {untranslated_line}")
    lines.append("")
    lines.append(f"Consumer groups ({len(plan.groups)}):")
    for move in plan.groups:
        rereads = [p.rereads for p in move.partitions]
        known = [r for r in rereads if r is not None]
        summary = ("nothing to commit" if not rereads else f"{sum(known)} re-read(s)" if len(known) == len(rereads)
                   else f"re-reads unknown for {len(rereads) - len(known)} partition(s)")
        left = blocking(move.untranslated)
        lines.append(f"  group {move.group} ({move.state} on {plan.destination}): {len(move.partitions)} "
                     f"partition(s), {summary}" + (f", {len(left)} WITHOUT TRANSLATION" if left else ""))
        if move.partitions:
            lines.append(f"    {'topic-partition':<44} {'from':>9} {'to':>9} {'current':>9} {'re-read':>8} {'via':>10}")
        for p in move.partitions:
            origin = "-" if p.origin_position is None else str(p.origin_position)
            to = "?" if p.position is None else str(p.position)
            current = "-" if p.current is None else str(p.current)
            reread = "?" if p.rereads is None else str(p.rereads)
            name = f"{p.destination.topic}-{p.destination.partition}"
            lines.append(f"    {name:<44} {origin:>9} {to:>9} {current:>9} {reread:>8} {p.how:>10}"
                         + (f"  ({p.note})" if p.note else ""))
        for u in move.untranslated:
            lines.append(f"    {describe(u, plan.origin)}")
    lines.append("")
    lines.append("Steps:")
    lines.extend(f"  {i}. {step}" for i, step in enumerate(plan.steps, 1))
    return "\n".join(lines)
