"""The transform chain a task's records go through: ``transforms=a,b`` applied in order.

One chain per task, built from the connector config when the task starts and closed when it
stops. It knows nothing of sources or sinks: ``apply(record)`` returns the transformed record
or None (dropped), so the source path (between ``poll()`` and the producer, in
:class:`~mirrorline.runtime.worker_task.WorkerSourceTask`) and a future sink path (between the
consumer and ``put()``) share it. A connector without ``transforms`` gets no chain at all
(``build_chain`` returns None), and the task's hot path then runs no transform code.

A transform or predicate that raises is reported as a :class:`TransformError` naming the
alias and the record (topic, partition and source offset), at the ``TRANSFORMATION`` stage; the
task's :class:`~mirrorline.runtime.error_handling.ErrorHandler` then fails the task or, with
``errors.tolerance=all``, skips the record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api.records import SinkRecord, SourceRecord
from mirrorline.api.transforms import Predicate, Transformation
from mirrorline.plugins import PluginRegistry, full_name
from mirrorline.runtime.error_handling import Stage, StageError
from mirrorline.runtime.transform_config import (
    NEGATE,
    PREDICATE,
    TRANSFORMS,
    alias_configs,
    aliases,
    configured,
    raise_errors,
)

log = logging.getLogger(__name__)


class TransformError(StageError):
    """A transform (or its predicate) raised on a record; the message says which and on what record."""


def describe(record: SourceRecord) -> str:
    """Where a record comes from and goes to, for error messages."""
    if isinstance(record, SinkRecord):  # consumed from Kafka: its own position
        return f"the record from topic {record.topic} partition {record.partition} offset {record.offset}"
    bound = f"topic {record.topic} partition {record.partition}"
    partition, offset = record.source_partition or {}, record.source_offset or {}
    if "topic" in partition and "partition" in partition and "offset" in offset:
        return (f"the record from topic {partition['topic']} partition {partition['partition']} offset "
                f"{offset['offset']} (bound for {bound})")
    return f"the record of source partition {record.source_partition} at source offset {record.source_offset} " \
           f"(bound for {bound})"


@dataclass(slots=True)
class TransformStage:
    """One alias of the chain: a transform, applied only where its predicate (if any) says."""

    alias: str
    transformation: Transformation
    predicate: Predicate | None = None
    negate: bool = False

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The transform's result, or the record unchanged when the predicate rules it out."""
        if self.predicate is not None and self.predicate.test(record) is self.negate:
            return record
        return self.transformation.apply(record)


class TransformChain:
    """The stages of ``transforms``, in order; the first that drops a record ends its way."""

    def __init__(self, stages: list[TransformStage]):
        self.stages = stages

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record after every stage, or None if one dropped it; TransformError if one raised."""
        for stage in self.stages:
            try:
                transformed = stage.apply(record)
            except Exception as exc:
                raise TransformError(
                    f"Transform {stage.alias} ({type(stage.transformation).__name__}) failed on "
                    f"{describe(record)}: {exc}", Stage.TRANSFORMATION,
                    full_name(type(stage.transformation))) from exc
            if transformed is None:
                return None
            record = transformed
        return record

    def close(self) -> None:
        """Close every transform and predicate; a failure is logged and the others still close."""
        for stage in self.stages:
            for plugin in (stage.transformation, stage.predicate):
                if plugin is None:
                    continue
                try:
                    plugin.close()
                except Exception:
                    log.exception("Transform %s: close() of %s raised; continuing", stage.alias,
                                  type(plugin).__name__)


def build_chain(config: Mapping[str, Any], plugins: PluginRegistry) -> TransformChain | None:
    """The chain ``config`` (a connector config) asks for, or None when ``transforms`` is empty.

    Raises :class:`~mirrorline.api.errors.ConfigError` listing every problem, as validation
    reports them (an unknown class, a bad setting, a missing predicate ...).
    """
    if not aliases(config, TRANSFORMS):
        return None
    entries = alias_configs(config, plugins)
    raise_errors(entries)
    predicates = {e.alias: e for e in entries if e.kind == "predicate"}
    chain = TransformChain([])
    try:
        for entry in entries:
            if entry.kind != "transformation":
                continue
            stage = TransformStage(entry.alias, configured(entry, config))
            chain.stages.append(stage)
            predicate_alias = entry.value(PREDICATE).value
            if predicate_alias is not None:
                stage.predicate = configured(predicates[predicate_alias], config)
                stage.negate = entry.value(NEGATE).value
    except BaseException:
        chain.close()
        raise
    return chain
