"""``SequenceSourceConnector``: writes independent numbered sequences to one Kafka topic.

Each *stream* ``s`` is a source partition ``{"stream": s}`` producing records numbered
0, 1, 2 ... (source offset ``{"seq": n}``). A restarted task resumes after the last committed
number, so the records a topic holds show exactly what the runtime's offset handling did:
gaps mean lost records, repeats mean at-least-once redelivery after a crash.

Record layout: key ``b"<stream>-<seq>"``, value JSON ``{"stream": s, "seq": n}``, one header
``("stream", b"<stream>")``, partition and timestamp left to the producer.

``fail.on.seq`` makes a task raise when it reaches a given number, so tests can check that a
failed task is FAILED with its trace while the others keep running.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from mirrorline.api import (
    BadRequestError,
    Config,
    ConfigError,
    ConfigDef,
    ConfigKey,
    ConfigValue,
    Importance,
    NonEmptyString,
    Range,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Type,
)

from mirrorline_example import __version__

GROUP = "Sequence"

TOPIC = "topic"
STREAMS = "streams"
RECORDS_PER_POLL = "records.per.poll"
MAX_RECORDS = "max.records"
POLL_INTERVAL_MS = "poll.interval.ms"
FAIL_ON_SEQ = "fail.on.seq"
FAIL_ON_STREAM = "fail.on.stream"
#: Task-only setting: the streams one task produces, comma-separated.
TASK_STREAMS = "task.streams"

#: The settings copied verbatim (as strings) from the connector config into every task config.
_SHARED = (TOPIC, RECORDS_PER_POLL, MAX_RECORDS, POLL_INTERVAL_MS, FAIL_ON_SEQ, FAIL_ON_STREAM)

CONFIG_DEF = ConfigDef([
    ConfigKey(TOPIC, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              group=GROUP, order=1, display_name="Topic",
              doc="The Kafka topic every record is written to."),
    ConfigKey(STREAMS, Type.INT, default=1, importance=Importance.HIGH, validator=Range(min=1),
              group=GROUP, order=2, display_name="Streams",
              doc="Number of independent numbered sequences (source partitions {\"stream\": 0..N-1}). "
                  "They are split round-robin across min(tasks.max, streams) tasks."),
    ConfigKey(RECORDS_PER_POLL, Type.INT, default=100, importance=Importance.MEDIUM,
              validator=Range(1, 100000), group=GROUP, order=3, display_name="Records per poll",
              doc="Most records one task returns from one poll, taken round-robin across its streams."),
    ConfigKey(MAX_RECORDS, Type.LONG, default=-1, importance=Importance.MEDIUM, validator=Range(min=-1),
              group=GROUP, order=4, display_name="Max records per stream",
              doc="Per stream, stop producing new records once sequence numbers 0 to max.records-1 "
                  "have been produced. -1 means unlimited."),
    ConfigKey(POLL_INTERVAL_MS, Type.INT, default=50, importance=Importance.LOW, validator=Range(min=0),
              group=GROUP, order=5, display_name="Poll interval (ms)",
              doc="Pause at the start of every poll, also once every stream is finished, "
                  "so an idle task does not spin."),
    ConfigKey(FAIL_ON_SEQ, Type.LONG, default=-1, importance=Importance.LOW, validator=Range(min=-1),
              group=GROUP, order=6, display_name="Fail on sequence number",
              doc="For tests: when a task reaches this sequence number it raises a RuntimeError, which "
                  "fails the task. Records before it are still returned. -1 disables."),
    ConfigKey(FAIL_ON_STREAM, Type.INT, default=-1, importance=Importance.LOW, validator=Range(min=-1),
              group=GROUP, order=7, display_name="Fail on stream",
              doc="For tests: restrict fail.on.seq to this one stream, so only the task owning it "
                  "fails and the connector's other tasks keep running. -1 means any stream."),
])

#: What a task parses its config with: the connector's settings plus its share of the streams.
TASK_CONFIG_DEF = CONFIG_DEF.merged(ConfigDef([
    ConfigKey(TASK_STREAMS, Type.LIST, importance=Importance.HIGH, group=GROUP,
              doc="Comma-separated stream numbers this task produces (set by the connector)."),
]))


class SequenceSourceConnector(SourceConnector):
    """Plans numbered sequences: ``streams`` source partitions, split round-robin across tasks."""

    config_def = CONFIG_DEF
    aliases = ("com.example.SequenceSource",)

    def __init__(self) -> None:
        self._config: Config | None = None

    def version(self) -> str:
        """The plugin's version, ``0.1.0``."""
        return __version__

    async def start(self, config: Config) -> None:
        """Check the cross-field rule and keep the parsed config; there is nothing to connect to."""
        problem = _fail_stream_problem(config[STREAMS], config[FAIL_ON_STREAM])
        if problem:
            raise ConfigError(problem)
        self._config = config

    def task_class(self) -> type[SourceTask]:
        """:class:`SequenceSourceTask`."""
        return SequenceSourceTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One config per task for ``min(max_tasks, streams)`` tasks; task ``i`` gets streams i, i+n, i+2n ..."""
        if self._config is None:
            raise RuntimeError("task_configs called before start")
        streams = self._config[STREAMS]
        count = min(max_tasks, streams)
        shared = {name: str(self._config[name]) for name in _SHARED}
        return [{**shared, TASK_STREAMS: ",".join(str(s) for s in range(i, streams, count))}
                for i in range(count)]

    async def stop(self) -> None:
        """Forget the config."""
        self._config = None

    def validate(self, config: Mapping[str, Any]) -> list[ConfigValue]:
        """The per-key checks, plus: ``fail.on.stream`` must name one of the ``streams``."""
        values = super().validate(config)
        by_name = {v.name: v for v in values}
        streams, fail_stream = by_name[STREAMS], by_name[FAIL_ON_STREAM]
        if not streams.errors and not fail_stream.errors:
            problem = _fail_stream_problem(streams.value, fail_stream.value)
            if problem:
                fail_stream.errors.append(problem)
        return values

    async def alter_offsets(self, config: Mapping[str, Any],
                            offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        """Accept only partitions ``{"stream": s}`` (s >= 0) with offsets ``{"seq": n}`` (n >= 0) or None."""
        for partition, offset in offsets:
            if set(partition) != {"stream"} or not _is_count(partition["stream"]):
                raise BadRequestError(f"source partition {partition} is not {{\"stream\": <integer >= 0>}}")
            if offset is not None and (set(offset) != {"seq"} or not _is_count(offset["seq"])):
                raise BadRequestError(f"offset {offset} of {partition} is not {{\"seq\": <integer >= 0>}}")


class SequenceSourceTask(SourceTask):
    """Produces the numbered records of some streams, resuming after the last committed number."""

    def __init__(self) -> None:
        self._topic = ""
        self._streams: list[int] = []
        self._next: dict[int, int] = {}
        self._cursor = 0
        self._per_poll = 100
        self._max = -1
        self._interval = 0.05
        self._fail_seq = -1
        self._fail_stream = -1
        self._failure: str | None = None

    def version(self) -> str:
        """The plugin's version, ``0.1.0``."""
        return __version__

    async def start(self, config: dict[str, str]) -> None:
        """Parse the task config and read each stream's committed offset: resume at seq + 1, or 0."""
        parsed = TASK_CONFIG_DEF.parse(config)
        self._topic = parsed[TOPIC]
        self._streams = [int(s) for s in parsed[TASK_STREAMS]]
        self._per_poll = parsed[RECORDS_PER_POLL]
        self._max = parsed[MAX_RECORDS]
        self._interval = parsed[POLL_INTERVAL_MS] / 1000
        self._fail_seq = parsed[FAIL_ON_SEQ]
        self._fail_stream = parsed[FAIL_ON_STREAM]
        committed = await self.context.offsets.offsets([{"stream": s} for s in self._streams])
        self._next = {s: 0 if offset is None else int(offset["seq"]) + 1
                      for s, offset in zip(self._streams, committed, strict=True)}
        self._cursor = 0
        self._failure = None

    async def poll(self) -> list[SourceRecord]:
        """Sleep ``poll.interval.ms``, then up to ``records.per.poll`` records round-robin across the streams.

        Returns ``[]`` once every stream has produced ``max.records``. Reaching ``fail.on.seq``
        ends the batch there; the poll after it raises RuntimeError (at once if the batch is empty).
        """
        await asyncio.sleep(self._interval)
        if self._failure is not None:
            raise RuntimeError(self._failure)
        records: list[SourceRecord] = []
        while len(records) < self._per_poll:
            stream = self._next_active_stream()
            if stream is None:
                break
            seq = self._next[stream]
            if seq == self._fail_seq and self._fail_stream in (-1, stream):
                self._failure = f"fail.on.seq: stream {stream} reached sequence number {seq}"
                if not records:
                    raise RuntimeError(self._failure)
                break
            records.append(self._record(stream, seq))
            self._next[stream] = seq + 1
        return records

    async def stop(self) -> None:
        """Nothing to release."""

    def _next_active_stream(self) -> int | None:
        """The next stream in round-robin order that has records left, or None when all are done."""
        for _ in range(len(self._streams)):
            stream = self._streams[self._cursor]
            self._cursor = (self._cursor + 1) % len(self._streams)
            if self._max < 0 or self._next[stream] < self._max:
                return stream
        return None

    def _record(self, stream: int, seq: int) -> SourceRecord:
        """The record numbered ``seq`` of ``stream``."""
        return SourceRecord(
            source_partition={"stream": stream},
            source_offset={"seq": seq},
            topic=self._topic,
            partition=None,
            key=f"{stream}-{seq}".encode(),
            value=json.dumps({"stream": stream, "seq": seq}).encode(),
            headers=[("stream", str(stream).encode())],
            timestamp=None,
        )


def _fail_stream_problem(streams: int | None, fail_stream: int | None) -> str | None:
    """What is wrong with ``fail.on.stream`` given ``streams`` (it must name an existing stream), or None."""
    if streams is not None and fail_stream is not None and fail_stream >= streams:
        return f"{FAIL_ON_STREAM} must be -1 or a stream number below streams ({streams}), not {fail_stream}"
    return None


def _is_count(value: Any) -> bool:
    """True for an int (not a bool) that is 0 or more."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
