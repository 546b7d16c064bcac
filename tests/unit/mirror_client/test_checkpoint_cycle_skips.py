"""A checkpoint cycle passes over groups whose committed offsets and offset syncs did not move.

The skip must never hide a checkpoint: a sync arriving for a group's partition, a committed offset
moving, or a cycle that could not read a group all make the group translate again.
"""

from types import SimpleNamespace

from mirrorline.api import OffsetAndMetadata, TopicPartition
from mirrorline.connectors.checkpoint.checkpoint_store import CheckpointStore
from mirrorline.connectors.checkpoint.task import MirrorCheckpointTask
from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.formats import Checkpoint, OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_store import OffsetSyncStore
from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy

TP = TopicPartition("orders", 0)


class CountingSyncStore(OffsetSyncStore):
    """An OffsetSyncStore that counts translations."""

    translations = 0

    def translate_downstream(self, topic, partition, upstream_offset):
        self.translations += 1
        return super().translate_downstream(topic, partition, upstream_offset)


class CommittedOffsets:
    """Stands in for the source admin: answers every group with ``self.answer``."""

    def __init__(self):
        self.answer: dict = {}

    async def list_consumer_groups_offsets(self, groups):
        return {group: (self.answer[group] if isinstance(self.answer[group], Exception)
                        else dict(self.answer[group])) for group in groups}


def checkpoint_task(groups: list[str]) -> tuple[MirrorCheckpointTask, CountingSyncStore, CommittedOffsets]:
    task = MirrorCheckpointTask()
    task.source, task.target = "A", "B"
    task.policy = DefaultReplicationPolicy()
    task.topic_filter = TopicFilter({})
    task.groups = groups
    task.interval_s = 60
    task.checkpoints_topic = "A.checkpoints.internal"
    task.store = CheckpointStore(set(groups))
    task.syncs = CountingSyncStore(initialization_must_read_to_end=False)
    task.source_admin = CommittedOffsets()
    task.context = SimpleNamespace(task_id="ckpt-0")
    task._last_emit, task._checkpointed_at = {}, {}
    return task, task.syncs, task.source_admin


def emitted(cycle: list[list]) -> list[tuple[int, int]]:
    out = []
    for records in cycle:
        for record in records:
            checkpoint = Checkpoint.decode(record.key, record.value)
            out.append((checkpoint.upstream_offset, checkpoint.downstream_offset))
    return out


async def test_an_unchanged_group_is_not_translated_again():
    task, syncs, admin = checkpoint_task(["g1", "g2"])
    syncs.update(OffsetSync("orders", 0, 0, 100), 0)
    syncs.finish_initial_read()
    admin.answer = {"g1": {TP: OffsetAndMetadata(0)}, "g2": {TP: OffsetAndMetadata(0)}}
    assert emitted(await task._checkpoint_groups()) == [(0, 100), (0, 100)]
    assert syncs.translations == 2

    assert emitted(await task._checkpoint_groups()) == []
    assert syncs.translations == 2, "two idle groups were translated again"


async def test_a_sync_for_the_groups_partition_translates_it_again():
    task, syncs, admin = checkpoint_task(["g1"])
    syncs.finish_initial_read()
    admin.answer = {"g1": {TP: OffsetAndMetadata(5)}}
    assert emitted(await task._checkpoint_groups()) == []  # no sync yet: nothing to translate with
    syncs.update(OffsetSync("orders", 0, 5, 205), 0)
    assert emitted(await task._checkpoint_groups()) == [(5, 205)]
    syncs.update(OffsetSync("other", 0, 5, 9), 1)  # another partition: g1 stays passed over
    before = syncs.translations
    assert emitted(await task._checkpoint_groups()) == []
    assert syncs.translations == before


async def test_a_moved_commit_translates_the_group_again():
    task, syncs, admin = checkpoint_task(["g1"])
    syncs.update(OffsetSync("orders", 0, 0, 100), 0)
    syncs.finish_initial_read()
    admin.answer = {"g1": {TP: OffsetAndMetadata(0)}}
    assert emitted(await task._checkpoint_groups()) == [(0, 100)]
    admin.answer = {"g1": {TP: OffsetAndMetadata(0, "new metadata")}}
    await task._checkpoint_groups()
    assert syncs.translations == 2
    syncs.update(OffsetSync("orders", 0, 10, 110), 1)
    admin.answer = {"g1": {TP: OffsetAndMetadata(10)}}
    assert emitted(await task._checkpoint_groups()) == [(10, 110)]


async def test_syncs_that_arrive_while_a_group_cannot_be_read_are_not_lost():
    task, syncs, admin = checkpoint_task(["g1"])
    syncs.finish_initial_read()
    admin.answer = {"g1": {TP: OffsetAndMetadata(7)}}
    assert emitted(await task._checkpoint_groups()) == []
    syncs.update(OffsetSync("orders", 0, 7, 300), 0)
    admin.answer = {"g1": RuntimeError("coordinator loading")}
    assert emitted(await task._checkpoint_groups()) == []  # the cycle that took the sync could not read g1
    admin.answer = {"g1": {TP: OffsetAndMetadata(7)}}
    assert emitted(await task._checkpoint_groups()) == [(7, 300)]


async def test_the_end_of_the_initial_read_translates_every_group():
    task, syncs, admin = checkpoint_task(["g1"])
    admin.answer = {"g1": {TP: OffsetAndMetadata(3)}}
    syncs.update(OffsetSync("orders", 0, 3, 33), 0)
    assert emitted(await task._checkpoint_groups()) == []  # translation waits for the read to the end
    syncs.finish_initial_read()
    assert emitted(await task._checkpoint_groups()) == [(3, 33)]


def test_take_changed_names_the_partitions_synced_since_the_last_call():
    store = OffsetSyncStore()
    assert store.take_changed() is None
    store.update(OffsetSync("a", 0, 1, 1), 0)
    store.update(OffsetSync("a", 1, 1, 1), 1)
    assert store.take_changed() == {("a", 0), ("a", 1)}
    assert store.take_changed() == set()
    store.finish_initial_read()
    assert store.take_changed() is None
