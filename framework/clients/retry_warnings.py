"""aiokafka's repeated warnings, thinned: the 1st, 10th, 100th, ... of a burst, each saying how many.

aiokafka's producer logs one WARNING per batch a broker answers with a retriable error ("Got
error produce response on topic-partition ..., retrying. Error: NotLeaderForPartitionError"),
as Kafka's Java producer does. While a target cluster elects leaders for thousands of new
partitions (a mirror's first minutes at scale, a broker restart) that is thousands of lines
saying one thing: 8,705 of them in the first 80 s of an 8,000-partition mirror. The batches are
retried either way; the log should still show that it happened, how often, and when it stopped.
The same mirror's producers logged 7,598 ERROR lines "Topic ... not found in cluster metadata"
(aiokafka's metadata refresh, one per topic per refresh) while the target still created the
remote topics they were about to write to; those are thinned the same way, and so are the
connection, metadata, fetch and produce errors every client repeats while a cluster is down
(:data:`THINNED`).

:class:`RepeatedWarnings` lets through the warnings numbered 1, 10, 100, 1,000, ... of a burst,
each with the count so far, and ends a burst after ``quiet_s`` without one (the next is number 1
again, saying how many the last burst had). Nothing else is filtered.
"""

from __future__ import annotations

import logging
import time

__all__ = ["RepeatedWarnings", "thin_retry_warnings"]

#: the logger aiokafka's producer sender writes its per-batch retry warnings to
PRODUCER_SENDER_LOGGER = "aiokafka.producer.sender"
#: the start of those warnings' format string
RETRY_WARNING_PREFIX = "Got error produce response on topic-partition"
#: the logger of aiokafka's metadata, and the start of its per-topic "unknown topic" error
CLUSTER_LOGGER = "aiokafka.cluster"
UNKNOWN_TOPIC_PREFIX = "Topic %s not found in cluster metadata"
_BROKER_DOWN = "the client keeps retrying; check that the cluster's brokers are up and reachable"
#: (logger, format-string prefix, what a thinned line adds) of each repeated warning thinned. The
#: last five are what every client of a worker logs, several times a second each, while a cluster
#: is down: 135,524 "Unable connect" lines in 18 minutes from one worker whose brokers had stopped,
#: and each group member's coordinator lookup (every 100 ms: 570 ERROR lines in 20 s from one
#: ``mirrorline mm2`` worker).
THINNED = ((PRODUCER_SENDER_LOGGER, RETRY_WARNING_PREFIX, "the batches are retried"),
           (CLUSTER_LOGGER, UNKNOWN_TOPIC_PREFIX, "a topic just created is usually known a moment later"),
           ("aiokafka", "Unable connect to node with id", _BROKER_DOWN),
           ("aiokafka", "Unable to update metadata from", _BROKER_DOWN),
           ("aiokafka.consumer.fetcher", "Failed fetch messages from", _BROKER_DOWN),
           # mirrorline's own fetch loop (batch_fetcher) says the same, and holds a partition whose
           # fetch keeps failing with another retriable error for retry.backoff.ms between tries
           ("mirrorline.clients.batch_fetcher", "Failed fetch messages from", _BROKER_DOWN),
           ("mirrorline.clients.batch_fetcher", "Unexpected error while fetching data",
            "the partition is fetched again after retry.backoff.ms"),
           (PRODUCER_SENDER_LOGGER, "Got error produce response: %s", _BROKER_DOWN),
           ("aiokafka.consumer.group_coordinator", "Group Coordinator Request failed", _BROKER_DOWN))


class RepeatedWarnings(logging.Filter):
    """A logging filter that thins records whose format string starts with ``prefix`` (see module)."""

    def __init__(self, prefix: str, quiet_s: float = 60.0, clock=time.monotonic,
                 meaning: str = "the batches are retried"):
        super().__init__()
        self._prefix = prefix
        self._meaning = meaning
        self._quiet_s = quiet_s
        self._clock = clock
        self._count = 0
        self._last = 0.0
        self._previous_burst = 0

    def reset(self) -> None:
        """Forget the current burst (the next matching line is number 1)."""
        self._count, self._previous_burst = 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or not record.msg.startswith(self._prefix):
            return True
        now = self._clock()
        if self._count and now - self._last > self._quiet_s:
            self._previous_burst, self._count = self._count, 0
        self._last = now
        self._count += 1
        count = self._count
        if str(count).rstrip("0") != "1":  # only 1, 10, 100, ... are logged
            return False
        if count == 1:
            note = " (first of a burst; repeats are counted, not each logged"
            note += f"; the previous burst had {self._previous_burst})" if self._previous_burst else ")"
        else:
            note = f" ({count} such lines in this burst so far; {self._meaning})"
        record.msg = record.msg + note.replace("%", "%%")
        return True


_installed: list[RepeatedWarnings] = []


def thin_retry_warnings() -> list[RepeatedWarnings]:
    """Install a filter for each of :data:`THINNED` on its logger (once per process); returns them."""
    if not _installed:
        for logger, prefix, meaning in THINNED:
            thinning = RepeatedWarnings(prefix, meaning=meaning)
            logging.getLogger(logger).addFilter(thinning)
            _installed.append(thinning)
    return _installed
