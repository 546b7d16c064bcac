"""Why a MirrorSourceTask cannot go on reading its source partitions.

When the source consumer raises a non-retriable error for some partitions (the topic may not
be read by the task's principal, a record is larger than the fetch size, a CRC mismatch, a
partition without a position under ``auto.offset.reset=none``), the task fails with a
:class:`SourceReadError` whose message names the source topic, the partitions, the offsets the
task was reading at, the cause and what to do. The runtime then marks the task FAILED with
that message in its trace and, with ``restart.on.failure.enable``, restarts it with back-off.
"""

from __future__ import annotations

from mirrorline.api import (ConnectError, NoOffsetForPartitionError, RecordTooLargeError, TopicAuthorizationFailedError,
                            TopicPartition)


class SourceReadError(ConnectError):
    """The task cannot read some of its source partitions; not retried in place.

    ``positions`` maps each affected partition to the offset the task was reading at (None when
    unknown); ``__cause__`` is the consumer's error.
    """

    def __init__(self, message: str, positions: dict[TopicPartition, int | None]):
        super().__init__(message)
        self.positions = dict(positions)


def read_error_message(cause: BaseException, positions: dict[TopicPartition, int | None], *,
                       source_alias: str, principal: str | None) -> str:
    """The text of a :class:`SourceReadError`: where the task was reading, the cause and the remedy.

    No final period and no restart hint: the runtime's log line appends how to restart the task.
    """
    by_topic: dict[str, list[str]] = {}
    for tp in sorted(positions, key=lambda tp: (tp.topic, tp.partition)):
        offset = positions[tp]
        at = f"offset {offset}" if offset is not None else "an offset not known yet"
        by_topic.setdefault(tp.topic, []).append(f"partition {tp.partition} at {at}")
    where = "; ".join(f"source topic {topic} ({', '.join(parts)})" for topic, parts in by_topic.items())
    topics = ", ".join(by_topic)
    reason = str(cause) if type(cause).__name__ in str(cause) else f"{type(cause).__name__}: {cause}"
    who = f"User:{principal}" if principal else "the source consumer's principal"
    if isinstance(cause, TopicAuthorizationFailedError):
        cause_text = (f"the source cluster {source_alias} refused the fetch: {who} is not authorized to read "
                      f"topic {topics} ({reason})")
        remedy = (f"Grant READ on topic {topics} to {who} (the principal in source.cluster.sasl.jaas.config, "
                  f"e.g. kafka-acls.sh --add --allow-principal {who} --operation Read --topic {topics}), "
                  f"or exclude the topic from the connector's topics")
    elif isinstance(cause, RecordTooLargeError):
        cause_text = f"a record is larger than the source consumer's fetch size ({reason})"
        remedy = "Raise source.consumer.max.partition.fetch.bytes above the record's size"
    elif isinstance(cause, NoOffsetForPartitionError):
        cause_text = f"the partition has no stored offset and auto.offset.reset is none ({reason})"
        remedy = "Set source.consumer.auto.offset.reset to earliest or latest"
    else:
        cause_text = reason
        remedy = f"Fix the cause on the source cluster {source_alias}"
    return f"Cannot read {where} on cluster {source_alias}: {cause_text}. {remedy}"
