"""CheckpointStore: the last checkpoint per (group, downstream partition), for monotonic emission.

Loaded at task start from the checkpoints topic on the target (only this task's groups);
undecodable records are skipped. If loading fails the store starts empty and reports it,
so the offset-sync store keeps only syncs read from now on (MM2's KAFKA-15905 rule).
"""

from __future__ import annotations

import asyncio
import logging

from mirrorline.api import Consumer, TopicPartition

from mirrorline.connectors.mirror_client.clients import read_to_end
from mirrorline.connectors.mirror_client.formats import Checkpoint, SchemaError

log = logging.getLogger(__name__)

LOAD_ATTEMPTS = 20


class CheckpointStore:
    """Checkpoints already emitted (or found at start) by this task."""

    def __init__(self, groups: set[str]):
        self.groups = groups
        self.checkpoints: dict[tuple[str, str, int], Checkpoint] = {}
        self.loaded = False

    async def load(self, consumer: Consumer, topic: str) -> bool:
        """Read the checkpoints topic; True when it was read completely."""
        def keep(record) -> None:
            try:
                checkpoint = Checkpoint.decode(record.key, record.value)
            except (SchemaError, TypeError, ValueError):
                return
            if checkpoint.group in self.groups:
                self.checkpoints[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint

        # A checkpoints topic created moments ago may not be in the broker's metadata yet: retry briefly
        # rather than fall back to keeping only the newest sync of each partition.
        for attempt in range(LOAD_ATTEMPTS):
            try:
                await read_to_end(consumer, TopicPartition(topic, 0), keep)
                self.loaded = True
                return True
            except Exception as exc:
                self.checkpoints.clear()
                if attempt == LOAD_ATTEMPTS - 1:
                    log.warning("Could not load previous checkpoints from %s (%s); only offset syncs read from now "
                                "on will be used for translation", topic, exc)
                else:
                    await asyncio.sleep(0.5)
        self.loaded = False
        return False

    def should_emit(self, checkpoint: Checkpoint) -> bool:
        """MM2's rule: emit if new, if the group was rewound upstream, or if downstream moved forward."""
        previous = self.checkpoints.get((checkpoint.group, checkpoint.topic, checkpoint.partition))
        return (previous is None or checkpoint.upstream_offset < previous.upstream_offset
                or checkpoint.downstream_offset > previous.downstream_offset)

    def update(self, checkpoint: Checkpoint) -> None:
        """Remember an emitted checkpoint."""
        self.checkpoints[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint

    def of_group(self, group: str) -> list[Checkpoint]:
        """Every checkpoint of one group."""
        return [c for (g, _, _), c in self.checkpoints.items() if g == group]
