"""Runtime metrics of connectors and tasks, in Prometheus form (served at ``GET /metrics``).

Connect reports task states through ``connect-worker-metrics`` (``connector-failed-task-count``
and friends) and has no automatic restarts; mirrorline restarts failed connectors and tasks
by itself (:mod:`mirrorline.runtime.supervisor`), so it also counts failures and restarts.
Labels: ``connector`` and, for tasks, ``task`` (the task number).
"""

from __future__ import annotations

import asyncio

import prometheus_client
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, generate_latest

_PREFIX = "kafka_connect_"

CONNECTOR_FAILURES = Counter(_PREFIX + "connector_failures", "Times a connector went to FAILED.", ("connector",))
CONNECTOR_RESTARTS = Counter(_PREFIX + "connector_restarts",
                             "Automatic restarts of a failed connector.", ("connector",))
TASK_FAILURES = Counter(_PREFIX + "task_failures", "Times a task went to FAILED.", ("connector", "task"))
TASK_RESTARTS = Counter(_PREFIX + "task_restarts", "Automatic restarts of a failed task.", ("connector", "task"))
TASK_RUNNING = Gauge(_PREFIX + "task_running",
                     "1 while the task's loops run on this worker (0 once it failed or stopped).",
                     ("connector", "task"))
TASK_STALLED = Gauge(_PREFIX + "task_stalled",
                     "1 while the task reports pending records but has had none acknowledged for "
                     "task.stall.timeout.ms (the stall watchdog).", ("connector", "task"))
TASK_RETRYING = Gauge(_PREFIX + "task_retrying",
                      "1 while the task is retrying a retriable error (broker down, partition not "
                      "available yet...).", ("connector", "task"))

#: Connect's task-error-metrics group (RetryWithToleranceOperator / ErrorHandlingMetrics), by Connect's
#: metric name; counted by :mod:`mirrorline.runtime.error_handling`.
TASK_ERROR_METRICS = {
    name: Counter(_PREFIX + "task_error_metrics_" + name.replace("-", "_"), f"Connect's {name}: {doc}",
                  ("connector", "task"))
    for name, doc in (
        ("total-record-failures", "record processing failures, each attempt counted (retries included)."),
        ("total-record-errors", "records that failed after any retries (tolerated or not)."),
        ("total-records-skipped", "records skipped because of errors (errors.tolerance=all)."),
        ("total-retries", "operations retried after a retriable failure."),
        ("total-errors-logged", "errors written to the log (errors.log.enable=true)."),
        ("deadletterqueue-produce-requests", "records sent to the dead letter queue."),
        ("deadletterqueue-produce-failures", "records that could not be written to the dead letter queue."),
    )
}

#: Connect's source-task transaction metrics under exactly-once (``transaction-size-avg/min/max``),
#: over the transactions this task instance committed; mirrorline also counts commits and aborts.
def _transaction_size(stat: str, doc: str) -> Gauge:
    return Gauge(_PREFIX + f"source_task_metrics_transaction_size_{stat}",
                 f"Connect's transaction-size-{stat}: {doc} records per committed transaction of the task "
                 f"(exactly-once source support).", ("connector", "task"))


TRANSACTION_SIZE_AVG = _transaction_size("avg", "average")
TRANSACTION_SIZE_MIN = _transaction_size("min", "fewest")
TRANSACTION_SIZE_MAX = _transaction_size("max", "most")
TRANSACTION_SIZE = {"avg": TRANSACTION_SIZE_AVG, "min": TRANSACTION_SIZE_MIN, "max": TRANSACTION_SIZE_MAX}
TRANSACTIONS_COMMITTED = Counter(_PREFIX + "source_task_transactions_committed",
                                 "Transactions a source task committed (exactly-once source support).",
                                 ("connector", "task"))
TRANSACTIONS_ABORTED = Counter(_PREFIX + "source_task_transactions_aborted",
                               "Transactions a source task aborted: on the connector's request, on stop or after "
                               "a write failed (exactly-once source support).", ("connector", "task"))


async def exposition() -> tuple[bytes, str]:
    """``(body, content type)`` of ``GET /metrics``: every metric of this process in Prometheus text format.

    Rendered in a thread, so a scrape of tens of thousands of series never holds up the event loop.
    Counters are exported without their ``_created`` series: Prometheus does not read them from the
    text format, and they were over a third of the lines at one series per partition.
    """
    prometheus_client.disable_created_metrics()
    return await asyncio.to_thread(generate_latest, REGISTRY), CONTENT_TYPE_LATEST
