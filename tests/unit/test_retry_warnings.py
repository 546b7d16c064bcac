"""aiokafka's per-batch retry warnings are thinned to 1, 10, 100, ... per burst, each with its count."""

from __future__ import annotations

import logging

from mirrorline.clients.retry_warnings import RETRY_WARNING_PREFIX, RepeatedWarnings

FORMAT = RETRY_WARNING_PREFIX + " %s, retrying. Error: %s"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def emit(logger: logging.Logger, count: int) -> None:
    for i in range(count):
        logger.warning(FORMAT, f"TopicPartition(topic='t', partition={i})", "NotLeaderForPartitionError")


def test_a_burst_logs_the_first_the_tenth_and_the_hundredth_with_counts(caplog):
    clock = Clock()
    logger = logging.getLogger("test.retry_warnings.burst")
    thinning = RepeatedWarnings(RETRY_WARNING_PREFIX, quiet_s=60.0, clock=clock)
    logger.addFilter(thinning)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            emit(logger, 250)
            logger.warning("something else entirely")
            clock.now = 61.0  # a minute without one: the burst is over
            emit(logger, 1)
    finally:
        logger.removeFilter(thinning)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5, lines
    assert "partition=0)" in lines[0] and "first of a burst" in lines[0]
    assert "partition=9)" in lines[1] and "10 such lines" in lines[1]
    assert "partition=99)" in lines[2] and "100 such lines" in lines[2]
    assert lines[3] == "something else entirely"
    assert "the previous burst had 250" in lines[4]


def test_a_percent_sign_in_the_message_survives_formatting(caplog):
    logger = logging.getLogger("test.retry_warnings.percent")
    thinning = RepeatedWarnings(RETRY_WARNING_PREFIX)
    logger.addFilter(thinning)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            logger.warning(FORMAT, "TopicPartition(topic='100%', partition=0)", "KafkaTimeoutError")
    finally:
        logger.removeFilter(thinning)
    assert "topic='100%'" in caplog.records[0].getMessage()


def test_aiokafkas_unknown_topic_errors_are_thinned_once_installed(caplog):
    from mirrorline.clients.retry_warnings import thin_retry_warnings

    for thinning in thin_retry_warnings():
        thinning.reset()  # another test's producer may have logged such lines in this process
    thin_retry_warnings()  # once per process, whatever the number of producers
    cluster = logging.getLogger("aiokafka.cluster")
    assert sum(isinstance(f, RepeatedWarnings) for f in cluster.filters) == 1
    with caplog.at_level(logging.ERROR, logger="aiokafka.cluster"):
        for i in range(30):
            cluster.error("Topic %s not found in cluster metadata", f"S1.t{i:05d}")
    lines = [r.getMessage() for r in caplog.records if r.name == "aiokafka.cluster"]
    assert len(lines) == 2 and "S1.t00009" in lines[1] and "10 such lines" in lines[1]


def test_a_cluster_that_is_down_logs_counts_not_floods(caplog):
    from mirrorline.clients.retry_warnings import thin_retry_warnings

    for thinning in thin_retry_warnings():
        thinning.reset()
    client = logging.getLogger("aiokafka")
    with caplog.at_level(logging.ERROR, logger="aiokafka"):
        for _ in range(150):
            client.error("Unable connect to node with id %s: %s", 1, "[Errno 111] Connect call failed")
            client.error("Unable to update metadata from %s", [1])
    lines = [r.getMessage() for r in caplog.records if r.name == "aiokafka"]
    assert len(lines) == 6  # 1st, 10th and 100th of each
    assert "100 such lines" in lines[-1] and "brokers are up and reachable" in lines[-1]


def test_coordinator_lookups_of_a_group_member_are_thinned(caplog):
    from mirrorline.clients.retry_warnings import thin_retry_warnings

    for thinning in thin_retry_warnings():
        thinning.reset()
    coordinator = logging.getLogger("aiokafka.consumer.group_coordinator")
    with caplog.at_level(logging.ERROR, logger="aiokafka.consumer.group_coordinator"):
        for _ in range(150):
            coordinator.error("Group Coordinator Request failed: %s", "NodeNotReadyError")
    lines = [r.getMessage() for r in caplog.records if r.name == "aiokafka.consumer.group_coordinator"]
    assert len(lines) == 3 and "100 such lines" in lines[-1]


def test_mirrorlines_fetch_loop_repeats_are_thinned(caplog):
    from mirrorline.clients.retry_warnings import thin_retry_warnings

    for thinning in thin_retry_warnings():
        thinning.reset()
    fetcher = logging.getLogger("mirrorline.clients.batch_fetcher")
    with caplog.at_level(logging.WARNING, logger="mirrorline.clients.batch_fetcher"):
        for _ in range(150):  # a broker down, then a partition whose log directory failed
            fetcher.error("Failed fetch messages from %s: %s", 1, "NodeNotReadyError")
            fetcher.warning("Unexpected error while fetching data: %s", "KafkaStorageError")
    lines = [r.getMessage() for r in caplog.records if r.name == "mirrorline.clients.batch_fetcher"]
    assert len(lines) == 6 and "100 such lines" in lines[-1]
