"""``JobContext.run_spark``: blocking Spark work off the event loop, with the progress of its Spark tasks."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from mirrorline.api.jobs import Job
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.spark.runner import SparkJobContext, SparkTaskTracker

pytestmark = pytest.mark.integration


class _Count(Job):
    name = "count"

    async def run(self, context):
        raise AssertionError("the test drives the context itself")


def test_run_spark_reports_the_tasks_of_the_stages_it_starts(spark, caplog):
    context = SparkJobContext(_Count(), {}, {}, KAFKA_CLIENTS)
    context._session = spark  # the test session's Spark, not a new one
    loop_thread = threading.get_ident()
    threads = []

    def work():
        threads.append(threading.get_ident())
        frame = spark.range(0, 200_000, numPartitions=6)
        return frame.groupBy((frame.id % 7).alias("k")).count().count()

    with caplog.at_level(logging.INFO, logger="mirrorline.job.count"):
        result = asyncio.run(context.run_spark(work, "count A->B"))
    assert result == 7
    assert threads and threads[0] != loop_thread  # the work ran off the event loop
    final = [r.getMessage() for r in caplog.records if r.getMessage().startswith("count A->B:")][-1]
    done, total = final.split(": ", 1)[1].split(" ")[0].split("/")
    assert done == total and int(total) >= 6  # at least the six tasks of the first stage, all done


def test_tracker_sees_only_its_own_group(spark):
    context = spark.sparkContext
    context.setJobGroup("mirrorline-test-group", "counted")
    try:
        spark.range(0, 1000, numPartitions=3).count()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    spark.range(0, 1000, numPartitions=5).count()  # another group's (none's) work
    completed, total = SparkTaskTracker(spark, "mirrorline-test-group").tasks()
    assert completed == total and total >= 3
    assert SparkTaskTracker(spark, "mirrorline-no-such-group").tasks() == (0, 0)
