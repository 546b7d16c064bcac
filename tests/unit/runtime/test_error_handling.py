"""ErrorHandler without Kafka: retries with back-off, tolerance, reporting, Connect's metrics and DLQ headers."""

from __future__ import annotations

import itertools
import logging

import pytest

from mirrorline.api.errors import DataError, RetriableError
from mirrorline.api.records import ConnectorTaskId, SinkRecord, SourceRecord
from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF
from mirrorline.runtime.error_handling import (
    SKIP,
    DeadLetterQueueReporter,
    ErrorContext,
    ErrorHandler,
    ErrorSettings,
    Stage,
    StageError,
    ToleranceExceededError,
)

_ids = itertools.count()


def handler_for(**config) -> ErrorHandler:
    """A handler of a fresh task id (metrics are process-wide counters), sleeping in no time."""
    task_id = ConnectorTaskId(f"errors-{next(_ids)}", 0)
    handler = ErrorHandler.from_config(task_id, CONNECTOR_CONFIG_DEF.parse({"name": task_id.connector,
                                                                             "connector.class": "X", **config}))
    handler.delays = []

    async def no_sleep(delay):
        handler.delays.append(delay)

    handler._sleep = no_sleep
    return handler


def counts(handler: ErrorHandler) -> dict[str, float]:
    names = ("total-record-failures", "total-record-errors", "total-records-skipped", "total-retries",
             "total-errors-logged")
    return {name: handler.counters.value(name) for name in names}


CONSUMED = SinkRecord("orders", 3, 41, key=b"k", value=b"{bad", headers=[("h", b"1")])


def failing(*errors):
    """An operation raising each of ``errors`` in turn, then returning "ok"."""
    pending = list(errors)

    def operation():
        if pending:
            raise pending.pop(0)
        return "ok"
    return operation


async def test_success_runs_once_and_counts_nothing():
    handler = handler_for()
    assert await handler.execute(Stage.TRANSFORMATION, lambda: "done", CONSUMED) == "done"
    assert set(counts(handler).values()) == {0}


async def test_tolerance_none_fails_with_stage_class_topic_partition_and_offset():
    handler = handler_for()
    with pytest.raises(ToleranceExceededError) as failure:
        await handler.execute(Stage.VALUE_CONVERTER, failing(DataError("not JSON")), CONSUMED,
                              "org.example.MyConverter")
    message = str(failure.value)
    assert "stage VALUE_CONVERTER (org.example.MyConverter)" in message
    assert "topic orders partition 3 offset 41" in message
    assert "DataError: not JSON" in message
    assert isinstance(failure.value.__cause__, DataError)
    assert counts(handler) == {"total-record-failures": 1, "total-record-errors": 1, "total-records-skipped": 0,
                               "total-retries": 0, "total-errors-logged": 0}


async def test_tolerance_all_skips_logs_and_counts(caplog):
    handler = handler_for(**{"errors.tolerance": "all", "errors.log.enable": "true"})
    source = SourceRecord({"cluster": "A", "topic": "t", "partition": 1}, {"offset": 9}, "A.t", 1, value=b"secret")
    caplog.set_level(logging.ERROR, logger="mirrorline.runtime.error_handling")
    assert await handler.execute(Stage.TRANSFORMATION, failing(DataError("bad")), source, "x.Mask") is SKIP
    assert await handler.execute(Stage.TRANSFORMATION, failing(DataError("bad")), source, "x.Mask") is SKIP
    assert counts(handler) == {"total-record-failures": 2, "total-record-errors": 2, "total-records-skipped": 2,
                               "total-retries": 0, "total-errors-logged": 2}
    logged = [r for r in caplog.records if "Error encountered in task" in r.getMessage()]
    assert len(logged) == 2
    text = logged[0].getMessage()
    assert "Executing stage 'TRANSFORMATION' with class 'x.Mask'" in text and "topic t partition 1 offset 9" in text
    assert "secret" not in text  # errors.log.include.messages=false keeps the record out of the log


async def test_log_include_messages_puts_the_record_in_the_log(caplog):
    handler = handler_for(**{"errors.tolerance": "all", "errors.log.enable": "true",
                             "errors.log.include.messages": "true"})
    caplog.set_level(logging.ERROR, logger="mirrorline.runtime.error_handling")
    await handler.execute(Stage.TRANSFORMATION, failing(DataError("bad")), CONSUMED, "x.Mask")
    assert "b'{bad'" in caplog.text


async def test_retriable_failures_are_retried_with_exponential_backoff_capped():
    handler = handler_for(**{"errors.retry.timeout": "60000", "errors.retry.delay.max.ms": "1000"})
    operation = failing(*[RetriableError("busy")] * 4)
    assert await handler.execute(Stage.TASK_PUT, operation, CONSUMED) == "ok"
    assert handler.delays == [0.3, 0.6, 1.0, 1.0]
    assert counts(handler)["total-retries"] == 4 and counts(handler)["total-record-failures"] == 4
    assert counts(handler)["total-record-errors"] == 0


async def test_retries_stop_at_the_retry_timeout_then_tolerance_decides():
    handler = handler_for(**{"errors.tolerance": "all"})  # errors.retry.timeout=0: no retry at all
    assert await handler.execute(Stage.KEY_CONVERTER, failing(RetriableError("busy"), RetriableError("x")),
                                 CONSUMED) is SKIP
    assert handler.delays == [] and counts(handler)["total-records-skipped"] == 1


async def test_non_retriable_failures_are_not_retried():
    handler = handler_for(**{"errors.retry.timeout": "-1", "errors.tolerance": "all"})
    assert await handler.execute(Stage.TRANSFORMATION, failing(DataError("bad"), DataError("bad")),
                                 CONSUMED) is SKIP
    assert handler.delays == []


async def test_other_stages_let_non_retriable_exceptions_through_as_connect():
    handler = handler_for(**{"errors.tolerance": "all"})
    with pytest.raises(KeyError):
        await handler.execute(Stage.TASK_PUT, failing(KeyError("boom")), CONSUMED)
    assert counts(handler)["total-record-errors"] == 1 and counts(handler)["total-records-skipped"] == 0


async def test_a_stage_error_names_its_own_stage_and_class():
    handler = handler_for()
    error = StageError("header failed", Stage.HEADER_CONVERTER, "x.Headers")
    error.__cause__ = DataError("bad header")
    with pytest.raises(ToleranceExceededError, match=r"stage HEADER_CONVERTER \(x.Headers\)"):
        await handler.execute(Stage.VALUE_CONVERTER, failing(error), CONSUMED, "x.Values")


async def test_execute_failed_reports_an_errant_record():
    handler = handler_for(**{"errors.tolerance": "all"})
    await handler.execute_failed(Stage.TASK_PUT, "x.Sink", CONSUMED, ValueError("rejected"))
    assert counts(handler)["total-record-errors"] == 1 and counts(handler)["total-records-skipped"] == 1
    strict = handler_for()
    with pytest.raises(ToleranceExceededError, match="stage TASK_PUT"):
        await strict.execute_failed(Stage.TASK_PUT, "x.Sink", CONSUMED, ValueError("rejected"))


def test_errors_settings_are_validated_on_their_fields():
    values = {v.name: v for v in CONNECTOR_CONFIG_DEF.validate({"errors.tolerance": "some",
                                                                 "errors.retry.timeout": "-2"})}
    assert values["errors.tolerance"].errors == ["Invalid value some for configuration errors.tolerance: "
                                                 "must be one of none, all"]
    assert values["errors.retry.timeout"].errors
    assert values["errors.log.enable"].value is False and values["errors.retry.delay.max.ms"].value == 60000


def test_a_sink_handler_gets_a_dlq_reporter_and_a_source_one_does_not():
    config = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}
    sink = ErrorHandler.from_config(ConnectorTaskId("s", 0), config, sink=True, client_props={"bootstrap.servers": "x"})
    assert [type(r) for r in sink.reporters] == [DeadLetterQueueReporter]
    assert ErrorHandler.from_config(ConnectorTaskId("s", 0), config).reporters == []


def test_dlq_context_headers_are_connects():
    settings = ErrorSettings(tolerance="all", dlq_topic="dlq", dlq_context_headers=True)
    reporter = DeadLetterQueueReporter(settings, ConnectorTaskId("sinky", 2), {}, None)
    try:
        raise DataError("no JSON here")
    except DataError as exc:
        error = exc
    context = ErrorContext(ConnectorTaskId("sinky", 2), Stage.VALUE_CONVERTER,
                           "org.apache.kafka.connect.json.JsonConverter", CONSUMED, error)
    headers = reporter.headers(context, CONSUMED.headers)
    assert headers[0] == ("h", b"1")  # the original headers first
    named = dict(headers[1:])
    assert list(named) == ["__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
                           "__connect.errors.connector.name", "__connect.errors.task.id", "__connect.errors.stage",
                           "__connect.errors.class.name", "__connect.errors.exception.class.name",
                           "__connect.errors.exception.message", "__connect.errors.exception.stacktrace"]
    assert named["__connect.errors.topic"] == b"orders" and named["__connect.errors.partition"] == b"3"
    assert named["__connect.errors.offset"] == b"41" and named["__connect.errors.task.id"] == b"2"
    assert named["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert named["__connect.errors.exception.class.name"] == b"mirrorline.api.errors.DataError"
    assert named["__connect.errors.exception.message"] == b"no JSON here"
    assert b"raise DataError" in named["__connect.errors.exception.stacktrace"]
    plain = DeadLetterQueueReporter(ErrorSettings(dlq_topic="dlq"), ConnectorTaskId("sinky", 2), {}, None)
    assert plain.headers(context, CONSUMED.headers) == [("h", b"1")]
