"""``--exact`` positions from the offset map ``mirrorline reconcile`` stored on the target.

A consumer group that consumed up to offset N of a source partition (its committed offset: the
next record it reads is N) resumes on the target at exactly the copy of record N, read from the
map (:meth:`mirrorline.connectors.mm2.offset_map.PartitionMap.translate`): 0 re-reads and 0 skips,
where MM2's checkpoints make it read again up to ``offset.lag.max`` records. The map lives on the
target, so this works when the source cluster is gone.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorline.api import ConnectError, KafkaClients, TopicPartition

from mirrorline.connectors.mm2.offset_map import PartitionMap, offset_map_topic
from mirrorline.connectors.mm2.offset_map_store import read_maps
from mirrorline.connectors.mirror_client.policies import ReplicationPolicy


def reconcile_hint(source_alias: str) -> str:
    """What to run to build the map."""
    return (f"run `mirrorline reconcile MM2_PROPERTIES --flow {source_alias}->TARGET` while {source_alias} answers "
            f"(it stores the map in {offset_map_topic(source_alias)} on the target)")


def map_position(maps: Mapping[tuple[str, int], PartitionMap], policy: ReplicationPolicy, source_alias: str,
                 remote: TopicPartition, position: int) -> tuple[int | None, str]:
    """(exact target position, "") for a group at source ``position`` on the partition copied to ``remote``,
    or (None, why the map cannot place it)."""
    upstream = policy.upstream_topic(remote.topic) if policy.topic_source(remote.topic) == source_alias else None
    if upstream is None:
        return None, f"{remote.topic} is not a copy of a topic of {source_alias}"
    pmap = maps.get((upstream, remote.partition))
    if pmap is None or pmap.target_topic != remote.topic:
        return None, f"no offset map of {upstream}-{remote.partition}"
    exact = pmap.translate(position)
    if exact is None:
        return None, (f"the offset map of {upstream}-{remote.partition} covers offsets up to {pmap.source_end}, "
                      f"not {position}")
    return exact, ""


def exact_or_fail(maps: Mapping[tuple[str, int], PartitionMap], policy: ReplicationPolicy, source_alias: str,
                  group: str, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The exact target position of every ``remote partition -> source position``; ConnectError naming
    the partitions the map does not cover and saying to run reconcile."""
    out, missing = {}, []
    for remote, position in positions.items():
        exact, why = map_position(maps, policy, source_alias, remote, position)
        if exact is None:
            missing.append(f"{remote.topic}-{remote.partition} at {position} ({why})")
        else:
            out[remote] = exact
    if missing:
        shown = "; ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise ConnectError(f"--exact: no offset map covers group {group}'s position on {len(missing)} partition(s): "
                           f"{shown}; {reconcile_hint(source_alias)}")
    return out


async def load_maps(clients: KafkaClients, target_props: Mapping[str, str],
                    source_alias: str) -> dict[tuple[str, int], PartitionMap]:
    """Every offset map of flows from ``source_alias`` stored on the target ``target_props`` reaches."""
    props = {k: v for k, v in target_props.items() if not k.startswith("replication.policy")}
    admin = clients.admin(props)
    consumer = clients.consumer({**props, "auto.offset.reset": "earliest"})
    try:
        await admin.start()
        await consumer.start()
        return await read_maps(admin, consumer, source_alias)
    finally:
        await consumer.stop()
        await admin.close()
