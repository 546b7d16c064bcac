"""Error handling of a task's records: Kafka Connect's ``RetryWithToleranceOperator`` and its reporters.

Every per-record operation the runtime runs for a task beyond the plain mirror path (a
transform chain, a converter, a sink task's ``put`` of one record reported as errant) goes
through :meth:`ErrorHandler.execute`, with the connector's ``errors.*`` settings:

- a **retriable** failure (:class:`~mirrorline.api.errors.RetriableError`, a Kafka client
  error marked retriable) is retried for up to ``errors.retry.timeout`` ms (0: never, -1: without
  end), with exponential back-off from 300 ms capped at ``errors.retry.delay.max.ms``;
- a failure that is not retriable, or still fails when the retry time is up, is an **error**:
  it is reported (logged when ``errors.log.enable``; written to the dead-letter queue of a sink
  connector with ``errors.deadletterqueue.topic.name``) and counted, then
- with ``errors.tolerance=none`` the task fails with a :class:`ToleranceExceededError` whose
  message names the stage, the class (transform alias, converter class), and the record's
  topic, partition and offset; with ``errors.tolerance=all`` ``execute`` returns :data:`SKIP`
  and the caller drops the record as a filter would (its offset still commits, in order).

As in Connect, only the converter and transformation stages tolerate any exception; at the
other stages (``TASK_PUT``, ``TASK_POLL``...) a non-retriable exception propagates unchanged.

Metrics (Connect's ``task-error-metrics`` group, with its names in the help text) are
Prometheus counters labelled ``connector`` and ``task``: see :mod:`mirrorline.runtime.metrics`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import ConfigKey, Importance, OneOf, Range, Type
from mirrorline.api.errors import ConnectError, RetriableError
from mirrorline.api.records import ConnectorTaskId, SinkRecord, SourceRecord
from mirrorline.runtime import metrics

log = logging.getLogger(__name__)

ERRORS_GROUP = "Error Handling"

#: Connect's ``errors.*`` settings every connector has (ConnectorConfig), declared once here and
#: merged into the common connector settings (:mod:`mirrorline.runtime.connector_config`).
ERROR_CONFIG_KEYS = (
    ConfigKey("errors.retry.timeout", Type.LONG, default=0, validator=Range(min=-1), importance=Importance.MEDIUM,
              group=ERRORS_GROUP, order=1, display_name="Retry Timeout for Errors",
              doc="The maximum duration in milliseconds that a failed operation will be reattempted. The default "
                  "is 0, which means no retries will be attempted. Use -1 for infinite retries."),
    ConfigKey("errors.retry.delay.max.ms", Type.LONG, default=60000, validator=Range(min=1),
              importance=Importance.MEDIUM, group=ERRORS_GROUP, order=2,
              display_name="Maximum Delay Between Retries for Errors",
              doc="The maximum duration in milliseconds between consecutive retry attempts."),
    ConfigKey("errors.tolerance", Type.STRING, default="none", validator=OneOf(("none", "all")),
              importance=Importance.MEDIUM, group=ERRORS_GROUP, order=3, display_name="Error Tolerance",
              doc="Behavior for tolerating errors during connector operation. 'none' is the default value and "
                  "signals that any error will result in an immediate connector task failure; 'all' changes "
                  "the behavior to skip over problematic records (counted in the task-error metrics)."),
    ConfigKey("errors.log.enable", Type.BOOLEAN, default="false", importance=Importance.MEDIUM,
              group=ERRORS_GROUP, order=4, display_name="Log Errors",
              doc="If true, write each error and the details of the failed operation and problematic record "
                  "to the application log. This is 'false' by default, so that only errors that are not "
                  "tolerated are reported."),
    ConfigKey("errors.log.include.messages", Type.BOOLEAN, default="false", importance=Importance.MEDIUM,
              group=ERRORS_GROUP, order=5, display_name="Log Error Details",
              doc="Whether to include in the log the record that resulted in a failure. For sink records, the "
                  "topic, partition, offset, and timestamp will be logged; for source records, the key and "
                  "value (and their schemas), all headers, and the timestamp, topic, partition, source "
                  "partition, and source offset. 'false' by default, which keeps record keys, values, and "
                  "headers out of log files."),
)

#: Connect's dead-letter-queue settings of sink connectors (SinkConnectorConfig).
DLQ_CONFIG_KEYS = (
    ConfigKey("errors.deadletterqueue.topic.name", Type.STRING, default="", importance=Importance.MEDIUM,
              group=ERRORS_GROUP, order=6, display_name="Dead Letter Queue Topic Name",
              doc="The name of the topic to be used as the dead letter queue (DLQ) for messages that result in "
                  "an error when processed by this sink connector, or its transformations or converters. The "
                  "topic name is blank by default, which means that no messages are to be recorded in the DLQ."),
    ConfigKey("errors.deadletterqueue.topic.replication.factor", Type.INT, default=3, validator=Range(min=1),
              importance=Importance.MEDIUM, group=ERRORS_GROUP, order=7,
              display_name="Dead Letter Queue Topic Replication Factor",
              doc="Replication factor used to create the dead letter queue topic when it doesn't already exist. "
                  "Capped at the number of brokers of the cluster, with a log line (beyond Connect, where "
                  "creation then fails)."),
    ConfigKey("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, default="false",
              importance=Importance.MEDIUM, group=ERRORS_GROUP, order=8,
              display_name="Enable Error Context Headers",
              doc="If true, add headers containing error context to the messages written to the dead letter "
                  "queue. To avoid clashing with headers from the original record, all error context header "
                  "keys will start with __connect.errors."),
)

#: Connect's DLQ context header names (DeadLetterQueueReporter).
HEADER_PREFIX = "__connect.errors."
ERROR_HEADER_ORIG_TOPIC = HEADER_PREFIX + "topic"
ERROR_HEADER_ORIG_PARTITION = HEADER_PREFIX + "partition"
ERROR_HEADER_ORIG_OFFSET = HEADER_PREFIX + "offset"
ERROR_HEADER_CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
ERROR_HEADER_TASK_ID = HEADER_PREFIX + "task.id"
ERROR_HEADER_STAGE = HEADER_PREFIX + "stage"
ERROR_HEADER_EXECUTING_CLASS = HEADER_PREFIX + "class.name"
ERROR_HEADER_EXCEPTION = HEADER_PREFIX + "exception.class.name"
ERROR_HEADER_EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
ERROR_HEADER_EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"

RETRIES_DELAY_MIN_S = 0.3  # Connect's RETRIES_DELAY_MIN_MS


class Stage(str, enum.Enum):
    """Where in a record's way an operation runs (Connect's ``Stage``)."""

    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"


#: Stages at which any exception is tolerable (Connect's TOLERABLE_EXCEPTIONS); elsewhere only retriable ones.
TOLERABLE_STAGES = frozenset({Stage.KEY_CONVERTER, Stage.VALUE_CONVERTER, Stage.HEADER_CONVERTER,
                              Stage.TRANSFORMATION})


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


#: What :meth:`ErrorHandler.execute` returns for a record that failed and is tolerated.
SKIP: Any = _Skip()


class ToleranceExceededError(ConnectError):
    """A record failed at a stage and ``errors.tolerance`` does not allow skipping it: the task fails."""


class StageError(ConnectError):
    """An operation's failure that says itself at which stage and in which class it happened
    (a converter or transform chain raises it, with the original exception as ``__cause__``);
    :meth:`ErrorHandler.execute` reports that stage and class rather than the ones it was given."""

    def __init__(self, message: str, stage: Stage, executing_class: str):
        super().__init__(message)
        self.stage = stage
        self.executing_class = executing_class


def is_retriable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transient failure worth retrying (RetriableError, or an error marked retriable)."""
    return isinstance(exc, RetriableError) or bool(getattr(exc, "retriable", False))


def describe(record: Any) -> str:
    """The record's topic, partition and offset, for messages: a consumed record's own, or for a
    source record the mirror position in its source partition/offset when it has one."""
    if isinstance(record, SinkRecord) or hasattr(record, "offset") and not isinstance(record, SourceRecord):
        return f"topic {record.topic} partition {record.partition} offset {record.offset}"
    if isinstance(record, SourceRecord):
        partition, offset = record.source_partition or {}, record.source_offset or {}
        bound = f"topic {record.topic} partition {record.partition}"
        if "topic" in partition and "partition" in partition and "offset" in offset:
            return (f"topic {partition['topic']} partition {partition['partition']} offset {offset['offset']} "
                    f"(bound for {bound})")
        return f"source partition {record.source_partition} source offset {record.source_offset} (bound for {bound})"
    return repr(record)


@dataclass(frozen=True)
class ErrorSettings:
    """The ``errors.*`` settings of one connector, parsed."""

    tolerance: str = "none"
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60000
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str = ""
    dlq_replication_factor: int = 3
    dlq_context_headers: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ErrorSettings:
        """Read the settings from a parsed connector config; a missing key takes Connect's default."""
        def get(name: str, default: Any) -> Any:
            return config[name] if name in config else default
        return cls(
            tolerance=str(get("errors.tolerance", "none")).lower(),
            retry_timeout_ms=int(get("errors.retry.timeout", 0)),
            retry_delay_max_ms=int(get("errors.retry.delay.max.ms", 60000)),
            log_enable=bool(get("errors.log.enable", False)),
            log_include_messages=bool(get("errors.log.include.messages", False)),
            dlq_topic=str(get("errors.deadletterqueue.topic.name", "") or ""),
            dlq_replication_factor=int(get("errors.deadletterqueue.topic.replication.factor", 3)),
            dlq_context_headers=bool(get("errors.deadletterqueue.context.headers.enable", False)),
        )


@dataclass
class ErrorContext:
    """One failed operation: what the reporters report (Connect's ``ProcessingContext``)."""

    task_id: ConnectorTaskId
    stage: Stage
    executing_class: str
    original: Any
    error: BaseException
    attempts: int = 1

    def message(self, include_record: bool = False) -> str:
        """Connect's log text: the stage, the class, and the record (its content only if asked)."""
        where = "consumed record" if isinstance(self.original, SinkRecord) else "source record"
        text = (f"Executing stage '{self.stage.value}' with class '{self.executing_class}', where {where} is "
                f"{describe(self.original)}.")
        if include_record:
            text += f" Record: {self.original!r}."
        return text


class ErrorReporter:
    """Something told about every failed record (Connect's ``ErrorReporter``)."""

    async def start(self) -> None:
        """Acquire what reporting needs (producer, topic). Optional."""

    async def report(self, context: ErrorContext) -> None:
        """Report one failure; must not raise (a reporter's own failure is logged and counted)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release what ``start`` acquired. Optional."""


class LogReporter(ErrorReporter):
    """Logs each failure at ERROR with its context (``errors.log.enable``)."""

    def __init__(self, settings: ErrorSettings, counters: ErrorMetrics):
        self._settings = settings
        self._counters = counters

    async def report(self, context: ErrorContext) -> None:
        """Log the failure: stage, class, record position (and content with ``errors.log.include.messages``)."""
        log.error("Error encountered in task %s. %s", context.task_id,
                  context.message(self._settings.log_include_messages), exc_info=context.error)
        self._counters.inc("total-errors-logged")


class DeadLetterQueueReporter(ErrorReporter):
    """Writes each failed consumed record, as its original bytes, to the connector's DLQ topic.

    Sink connectors only (``errors.deadletterqueue.topic.name``), as in Connect. The topic is
    created on start if missing (1 partition, ``errors.deadletterqueue.topic.replication.factor``
    capped at the cluster's broker count). ``original_bytes(record)`` gives the key, value and
    headers as consumed (before converters); with ``errors.deadletterqueue.context.headers.enable``
    Connect's ``__connect.errors.*`` headers follow the original headers.
    """

    def __init__(self, settings: ErrorSettings, task_id: ConnectorTaskId, client_props: Mapping[str, Any],
                 counters: ErrorMetrics,
                 original_bytes: Callable[[Any], tuple[bytes | None, bytes | None, list]] | None = None):
        self._settings = settings
        self._task_id = task_id
        self._client_props = dict(client_props)
        self._counters = counters
        self._original_bytes = original_bytes or _consumed_bytes
        self._producer = None

    async def start(self) -> None:
        """Create the DLQ topic if missing and start the producer."""
        from mirrorline.api.errors import KafkaError, TopicAlreadyExistsError
        from mirrorline.api.kafka import NewTopic
        from mirrorline.clients.admin import KafkaAdmin
        from mirrorline.clients.producer import KafkaProducer

        topic = self._settings.dlq_topic
        admin = KafkaAdmin.from_settings(self._client_props)
        await admin.start()
        try:
            brokers = len((await admin.describe_cluster()).brokers) or 1
            replication = self._settings.dlq_replication_factor
            if replication > brokers:
                log.info("Task %s: the dead letter queue topic %s is created with replication factor %d, "
                         "the cluster's broker count (errors.deadletterqueue.topic.replication.factor=%d)",
                         self._task_id, topic, brokers, replication)
                replication = brokers
            response = await admin.create_topics([NewTopic(topic, 1, replication)])
            for error in response.values():
                if error is not None and not isinstance(error, TopicAlreadyExistsError):
                    raise KafkaError(f"creating the dead letter queue topic {topic!r} failed: {error}",
                                     code=error.code, retriable=error.retriable) from error
                if error is None:
                    log.info("Task %s: created the dead letter queue topic %s", self._task_id, topic)
        finally:
            await admin.close()
        props = {k: v for k, v in self._client_props.items() if k != "transactional.id"}
        producer = KafkaProducer.from_settings({**props, "acks": "all", "enable.idempotence": "true"})
        await producer.start()
        self._producer = producer

    def headers(self, context: ErrorContext, original_headers: list) -> list[tuple[str, bytes]]:
        """The DLQ record's headers: the original ones, then Connect's context headers when enabled."""
        headers = [(name, value) for name, value in original_headers]
        if not self._settings.dlq_context_headers:
            return headers
        record, error = context.original, context.error
        add = headers.append
        add((ERROR_HEADER_ORIG_TOPIC, str(record.topic).encode()))
        add((ERROR_HEADER_ORIG_PARTITION, str(record.partition).encode()))
        add((ERROR_HEADER_ORIG_OFFSET, str(record.offset).encode()))
        add((ERROR_HEADER_CONNECTOR_NAME, context.task_id.connector.encode()))
        add((ERROR_HEADER_TASK_ID, str(context.task_id.task).encode()))
        add((ERROR_HEADER_STAGE, context.stage.value.encode()))
        add((ERROR_HEADER_EXECUTING_CLASS, context.executing_class.encode()))
        add((ERROR_HEADER_EXCEPTION, _class_name(type(error)).encode()))
        if str(error):
            add((ERROR_HEADER_EXCEPTION_MESSAGE, str(error).encode()))
        add((ERROR_HEADER_EXCEPTION_STACK_TRACE,
             "".join(traceback.format_exception(type(error), error, error.__traceback__)).encode()))
        return headers

    async def report(self, context: ErrorContext) -> None:
        """Write the record's original bytes to the DLQ and wait for the acknowledgement."""
        if self._producer is None or not hasattr(context.original, "offset"):
            return  # source records have no DLQ, as in Connect
        key, value, original_headers = self._original_bytes(context.original)
        self._counters.inc("deadletterqueue-produce-requests")
        try:
            future = await self._producer.send(self._settings.dlq_topic, key=key, value=value,
                                               headers=self.headers(context, original_headers) or None)
            await future
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._counters.inc("deadletterqueue-produce-failures")
            log.error("Task %s could not write to the dead letter queue topic %s the record from %s: %r",
                      self._task_id, self._settings.dlq_topic, describe(context.original), exc)

    async def close(self) -> None:
        """Flush and stop the producer."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                await producer.stop()
            except Exception as exc:
                log.warning("Task %s: the dead letter queue producer did not stop cleanly: %r", self._task_id, exc)


def _consumed_bytes(record: Any) -> tuple[bytes | None, bytes | None, list]:
    """The key, value and headers of a consumed record, as it carries them (bytes before converters)."""
    return record.key, record.value, list(record.headers or ())


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


class ErrorMetrics:
    """The task-error-metrics counters of one task (Connect's names; Prometheus counters)."""

    def __init__(self, task_id: ConnectorTaskId):
        self._labels = (task_id.connector, str(task_id.task))
        for counter in metrics.TASK_ERROR_METRICS.values():  # exist at 0 from the start
            counter.labels(*self._labels)

    def inc(self, name: str, amount: int = 1) -> None:
        """Add to the counter Connect calls ``name`` (``total-record-errors``...)."""
        metrics.TASK_ERROR_METRICS[name].labels(*self._labels).inc(amount)

    def value(self, name: str) -> float:
        """The counter's current value (for tests and status)."""
        return metrics.TASK_ERROR_METRICS[name].labels(*self._labels)._value.get()


class ErrorHandler:
    """Runs a task's per-record operations with retries, tolerance, reporting and counting.

    Built per task from the connector's parsed config (:meth:`from_config`); ``start`` and
    ``close`` bracket the task's life (the DLQ reporter's producer lives in between).
    """

    def __init__(self, task_id: ConnectorTaskId, settings: ErrorSettings,
                 reporters: list[ErrorReporter] | None = None, counters: ErrorMetrics | None = None):
        self.task_id = task_id
        self.settings = settings
        self.counters = counters or ErrorMetrics(task_id)
        self.reporters = list(reporters or ())
        self._sleep = asyncio.sleep

    @classmethod
    def from_config(cls, task_id: ConnectorTaskId, config: Mapping[str, Any], *, sink: bool = False,
                    client_props: Mapping[str, Any] | None = None,
                    original_bytes: Callable[[Any], tuple] | None = None) -> ErrorHandler:
        """The handler ``config`` asks for: a log reporter when ``errors.log.enable``, and for a sink
        connector with ``errors.deadletterqueue.topic.name`` a DLQ reporter writing with
        ``client_props`` (Java-style client settings: ``bootstrap.servers``, security...)."""
        settings = ErrorSettings.from_config(config)
        handler = cls(task_id, settings)
        if settings.log_enable:
            handler.reporters.append(LogReporter(settings, handler.counters))
        if sink and settings.dlq_topic:
            if client_props is None:
                raise ValueError("a dead letter queue needs client settings to reach the cluster")
            handler.reporters.append(DeadLetterQueueReporter(settings, task_id, client_props, handler.counters,
                                                             original_bytes))
        return handler

    @property
    def tolerates_all(self) -> bool:
        """Whether failed records are skipped (``errors.tolerance=all``) rather than failing the task."""
        return self.settings.tolerance == "all"

    async def start(self) -> None:
        """Start the reporters (the DLQ creates its topic and producer); close them all on failure."""
        try:
            for reporter in self.reporters:
                await reporter.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close every reporter; a failure is logged and the others still close."""
        for reporter in self.reporters:
            try:
                await reporter.close()
            except Exception:
                log.exception("Task %s: closing the error reporter %s raised", self.task_id, type(reporter).__name__)

    async def execute(self, stage: Stage, operation: Callable[[], Any], original: Any,
                      executing_class: str | type | None = None) -> Any:
        """``operation()``'s result, after retrying retriable failures; :data:`SKIP` for a failed
        record tolerated; ToleranceExceededError when not tolerated. ``original`` is the record as
        polled or consumed (it names topic, partition and offset in messages and the DLQ)."""
        try:
            return operation()
        except Exception as exc:
            first = exc
        return await self._handle(stage, operation, original, executing_class, first)

    async def execute_failed(self, stage: Stage, executing_class: str | type, original: Any,
                             error: BaseException) -> None:
        """Report a failure that already happened (a sink task's errant record): reported, counted,
        and ToleranceExceededError unless ``errors.tolerance=all``."""
        context = ErrorContext(self.task_id, stage, _name_of(executing_class), original, error)
        self.counters.inc("total-record-failures")
        await self._record_error(context)

    async def _handle(self, stage: Stage, operation: Callable[[], Any], original: Any,
                      executing_class: str | type | None, exc: Exception) -> Any:
        attempts = 1
        start = time.monotonic()
        timeout_ms = self.settings.retry_timeout_ms
        deadline = float("inf") if timeout_ms < 0 else start + timeout_ms / 1000
        while True:
            self.counters.inc("total-record-failures")
            cause = exc.__cause__ if isinstance(exc, StageError) and exc.__cause__ is not None else exc
            if not is_retriable(cause) or time.monotonic() >= deadline:
                break
            delay = min(RETRIES_DELAY_MIN_S * 2 ** (attempts - 1), self.settings.retry_delay_max_ms / 1000,
                        max(deadline - time.monotonic(), 0))
            await self._sleep(delay)
            self.counters.inc("total-retries")
            attempts += 1
            try:
                return operation()
            except Exception as again:
                exc = again
        if isinstance(exc, StageError):
            stage, executing_class = exc.stage, exc.executing_class
        context = ErrorContext(self.task_id, stage, _name_of(executing_class), original, exc, attempts)
        if stage not in TOLERABLE_STAGES and not is_retriable(cause):
            await self._report(context)
            self.counters.inc("total-record-errors")
            raise exc
        await self._record_error(context)
        return SKIP

    async def _record_error(self, context: ErrorContext) -> None:
        self.counters.inc("total-record-errors")
        await self._report(context)
        if not self.tolerates_all:
            raise ToleranceExceededError(
                f"Tolerance exceeded in error handler: stage {context.stage.value} ({context.executing_class}) "
                f"failed on the record from {describe(context.original)} after {context.attempts} attempt(s): "
                f"{_error_text(context.error)}") from context.error
        self.counters.inc("total-records-skipped")

    async def _report(self, context: ErrorContext) -> None:
        for reporter in self.reporters:
            try:
                await reporter.report(context)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Task %s: the error reporter %s failed", self.task_id, type(reporter).__name__)


def _name_of(executing_class: str | type | None) -> str:
    if executing_class is None:
        return "unknown"
    return executing_class if isinstance(executing_class, str) else _class_name(executing_class)


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, StageError):  # its message already says what failed
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def config_keys(sink: bool = False) -> tuple[ConfigKey, ...]:
    """The ``errors.*`` keys of a source (common) or sink connector."""
    return ERROR_CONFIG_KEYS + (DLQ_CONFIG_KEYS if sink else ())


__all__ = ["SKIP", "DeadLetterQueueReporter", "ErrorContext", "ErrorHandler", "ErrorMetrics",
           "ErrorReporter", "ErrorSettings", "LogReporter", "Stage", "StageError", "ToleranceExceededError",
           "config_keys"]
