"""Whether a source topic is still the one a mirror task was reading: its topic ID (KIP-516).

A topic deleted and created again under the same name gets a new topic ID and offsets from 0.
A task whose position (say 332) was in the old topic finds nothing wrong in the offsets once the
new topic holds more than 332 records: fetching there silently skips the new topic's first 332
records. The ID does tell: :class:`TopicIdentities` keeps the ID each assigned topic had when the
task first saw it, and :func:`judge_topic` compares it with the ID the cluster gives now.

The task asks for IDs when there is a sign the topic may have changed (a fetch error for its
partitions, a partition fetched again after a pause, OFFSET_OUT_OF_RANGE) and on a slow timer;
see :mod:`mirrorline.connectors.source_mirror.task`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping


class TopicVerdict(enum.Enum):
    """What a topic ID read means for the positions the task holds in that topic."""

    #: the same topic (or the first ID seen for it): positions stand, today's checks apply
    UNCHANGED = "unchanged"
    #: a new topic under the same name: every position in it belongs to the old one
    RECREATED = "recreated"
    #: the cluster does not know the topic now (deleted, maybe about to be created again): hold its partitions
    MISSING = "missing"
    #: the cluster cannot tell topic IDs (brokers before Kafka 3.1): positions stand, today's checks apply
    UNKNOWN = "unknown"


def judge_topic(known_id: str | None, current_id: str | None, ids_supported: bool = True) -> TopicVerdict:
    """The verdict for a topic the task knew as ``known_id`` (None: not seen yet) that is ``current_id`` now.

    >>> judge_topic("a", "b").value
    'recreated'
    >>> judge_topic(None, "b").value
    'unchanged'
    """
    if not ids_supported:
        return TopicVerdict.UNKNOWN
    if current_id is None:
        return TopicVerdict.MISSING
    if known_id is None or known_id == current_id:
        return TopicVerdict.UNCHANGED
    return TopicVerdict.RECREATED


class TopicIdentities:
    """The topic ID of each topic as the task first saw it; updated once a re-creation has been handled."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def judge(self, topics: Iterable[str], ids: Mapping[str, str] | None) -> dict[str, TopicVerdict]:
        """The verdict of each of ``topics`` given ``ids`` (None: the cluster cannot tell IDs).

        A topic seen for the first time is learnt. A re-created topic keeps its old ID here until
        :meth:`accept` (so a reset that fails is judged again, and retried, at the next check).
        """
        verdicts = {}
        for topic in topics:
            current = None if ids is None else ids.get(topic)
            verdict = judge_topic(self.known.get(topic), current, ids is not None)
            if verdict is TopicVerdict.UNCHANGED and current is not None:
                self.known.setdefault(topic, current)
            verdicts[topic] = verdict
        return verdicts

    def accept(self, topic: str, topic_id: str) -> None:
        """``topic`` is now ``topic_id``: the task's positions in it were moved to the new topic."""
        self.known[topic] = topic_id
