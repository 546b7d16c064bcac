"""What ``mirrorline reconcile`` reads: the flow's topics, their remote copies, and exact offset ranges.

The topics are the ones MirrorSource mirrors for the flow (its ``topics``/``topics.exclude``
filter, internal, heartbeat and cyclic topics left out), optionally narrowed by ``--topics``;
each is paired with its remote topic under the flow's replication policy. For every source
partition the range read is ``[log start, end)`` on both clusters. The target's ends are taken
*before* the source's, so a copy made while reconcile starts is never taken for a record the
source does not hold; records the mirror had not copied yet count as missing (``missing_tail``
tells them apart from gaps).
"""

from __future__ import annotations

import re

from mirrorline.api import ConfigError, ConnectError, TopicPartition

from mirrorline.connectors.mirror_client.filters import TopicFilter

from .flow_clients import FlowEnds
from .offset_map import PartitionRange
from .flow_plan import mirrored_topics, partition_counts


def topics_pattern(text: str | None) -> re.Pattern[str] | None:
    """``--topics``: a regular expression a whole source topic name must match; ConfigError if invalid."""
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--topics {text!r} is not a valid regular expression: {exc}") from None


async def plan_ranges(ends: FlowEnds, topics: re.Pattern[str] | None,
                      topic_filter: TopicFilter | None = None) -> list[PartitionRange]:
    """Every partition to reconcile, with its ranges; ConnectError with one line when there is nothing to read.

    ``topic_filter``: the flow's topics (default: its ``topics``/``topics.exclude`` settings).
    """
    source, target = ends.source, ends.target
    assert source is not None and target is not None
    target_topics = await partition_counts(target)
    source_topics = await partition_counts(source)
    pairs = mirrored_topics(ends.policy, topic_filter or TopicFilter(ends.originals), ends.source_alias, ends.target_alias,
                            source_topics, target_topics)
    flow = f"{ends.source_alias}->{ends.target_alias}"
    if topics is not None:
        chosen = [(t, r) for t, r in pairs if topics.fullmatch(t)]
        if not chosen:
            unknown = "no topic" if not any(topics.fullmatch(t) for t in source_topics) else "no mirrored topic"
            raise ConnectError(f"--topics {topics.pattern!r}: {unknown} of cluster {ends.source_alias} matches "
                               f"(flow {flow} mirrors {', '.join(t for t, _ in pairs) or 'none'})")
        pairs = chosen
    if not pairs:
        raise ConnectError(f"flow {flow} mirrors no topic of cluster {ends.source_alias}: nothing to reconcile")
    target_tps = [TopicPartition(remote, p) for topic, remote in pairs
                  for p in range(min(source_topics[topic], target_topics.get(remote, 0)))]
    target_start = await target.consumer.beginning_offsets(target_tps) if target_tps else {}
    target_end = await target.consumer.end_offsets(target_tps) if target_tps else {}
    source_tps = [TopicPartition(topic, p) for topic, _ in pairs for p in range(source_topics[topic])]
    source_start = await source.consumer.beginning_offsets(source_tps)
    source_end = await source.consumer.end_offsets(source_tps)
    out = []
    for topic, remote in pairs:
        for p in range(source_topics[topic]):
            stp, ttp = TopicPartition(topic, p), TopicPartition(remote, p)
            t_start, t_end = target_start.get(ttp, 0), target_end.get(ttp, 0)
            out.append(PartitionRange(topic, p, remote, source_start[stp], source_end[stp], t_start, t_end))
    if all(r.source_start >= r.source_end for r in out):
        names = ", ".join(sorted({r.source_topic for r in out}))
        raise ConnectError(f"nothing to reconcile: topic(s) {names} of cluster {ends.source_alias} hold no records")
    return out
