"""Fault-injection kit: count what a mirror lost or duplicated, generate load, break brokers.

Everything here observes Kafka through confluent-kafka (librdkafka), a client independent of
the aiokafka code under test, so a bug in our client layer cannot hide itself.

- :func:`tally`: the counting, a pure function of "what the source acknowledged" and "what
  the target holds", by partition. Records are identified by their value, which
  :class:`LoadGenerator` makes unique (``b"<tag>:<partition>:<seq>"``).
- :class:`LoadGenerator`: a background thread producing at a steady rate to a source topic,
  remembering every record the source acknowledged (and at which offset).
- :class:`TopicReader`: reads a topic (all its partitions, including ones added later)
  incrementally from the beginning; :class:`ProgressWatch` measures how long it stopped growing.
- :func:`kill_broker`, :func:`kill_and_restart`, :func:`paused_broker`: SIGKILL or SIGSTOP the
  JVM of a :class:`~mirrorline.localkafka.cluster.LocalCluster` and bring it back with the same
  ports and data directory.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from mirrorline.localkafka.cluster import LocalCluster

# -- counting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """What a mirror did to a set of source records, as seen on the target.

    ``lost``: source records absent from their partition on the target (``misplaced`` of them
    are on the target, but in another partition). ``duplicated``: copies beyond the first of a
    source record in its partition. ``out_of_order``: source records whose first copy comes
    before that of a record preceding them at the source (the minimum number of records to
    remove so that the source order is a subsequence of the target's first copies).
    ``foreign``: target records that are not source records of this tally (older runs,
    another topic generation); they are neither lost nor duplicated.
    """

    records: int
    lost: int
    duplicated: int
    out_of_order: int
    misplaced: int
    foreign: int
    lost_by_partition: dict[int, int] = field(default_factory=dict)
    duplicated_by_partition: dict[int, int] = field(default_factory=dict)
    #: up to a few lost records per partition, for failure messages
    lost_samples: dict[int, list[bytes]] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: records, lost, duplicated and the rest, with per-partition losses."""
        text = (f"{self.records} records, {self.lost} lost, {self.duplicated} duplicated, "
                f"{self.out_of_order} out of order, {self.misplaced} misplaced, {self.foreign} foreign")
        if self.lost:
            text += f"; lost by partition {dict(sorted(self.lost_by_partition.items()))}"
            text += f", e.g. {dict(sorted(self.lost_samples.items()))}"
        return text


def _longest_increasing(values: Sequence[int]) -> int:
    tails: list[int] = []
    for value in values:
        i = bisect.bisect_left(tails, value)
        if i == len(tails):
            tails.append(value)
        else:
            tails[i] = value
    return len(tails)


def tally(source: Mapping[int, Sequence[bytes]], target: Mapping[int, Sequence[bytes]],
          samples: int = 3) -> Tally:
    """Count lost, duplicated and reordered records.

    ``source``: partition -> ids of the records the source acknowledged, in offset order (ids
    must be unique). ``target``: partition -> ids of the records on the target's partition of
    the same number, in offset order.
    """
    known = {record: partition for partition, records in source.items() for record in records}
    if len(known) != sum(len(r) for r in source.values()):
        raise ValueError("source record ids must be unique")
    lost = duplicated = out_of_order = misplaced = foreign = 0
    lost_by: dict[int, int] = {}
    dup_by: dict[int, int] = {}
    lost_samples: dict[int, list[bytes]] = {}
    elsewhere: set[bytes] = set()
    for partition, records in target.items():
        for record in records:
            home = known.get(record)
            if home is None:
                foreign += 1
            elif home != partition:
                elsewhere.add(record)
    for partition, records in source.items():
        copies = Counter(target.get(partition, ()))
        position = {record: i for i, record in enumerate(records)}
        missing = [r for r in records if copies[r] == 0]
        if missing:
            lost += len(missing)
            lost_by[partition] = len(missing)
            lost_samples[partition] = missing[:samples]
            misplaced += sum(1 for r in missing if r in elsewhere)
        extra = sum(n - 1 for r, n in copies.items() if r in position and n > 1)
        if extra:
            duplicated += extra
            dup_by[partition] = extra
        firsts: list[int] = []
        seen: set[bytes] = set()
        for record in target.get(partition, ()):
            if record in position and record not in seen:
                seen.add(record)
                firsts.append(position[record])
        out_of_order += len(firsts) - _longest_increasing(firsts)
    return Tally(sum(len(r) for r in source.values()), lost, duplicated, out_of_order, misplaced, foreign,
                 lost_by, dup_by, lost_samples)


# -- load ----------------------------------------------------------------------------------


class LoadGenerator:
    """Produces to ``topic`` at ``rate`` records/s from a background thread, round-robin over partitions.

    Each value is ``b"<tag>:<partition>:<seq>"`` (unique; ``tag`` defaults to a random word), so a
    :func:`tally` can find every record on the target. The producer is idempotent with acks=all and
    librdkafka's default 300 s delivery timeout, so it rides out a source broker restart.
    Only acknowledged records count as sent (:meth:`acknowledged`).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, tag: str | None = None,
                 value_size: int = 0, **producer_config: object):
        from confluent_kafka import Producer

        self.topic = topic
        self._bootstrap = bootstrap
        self.tag = tag or uuid.uuid4().hex[:6]
        self.rate = rate
        self._padding = b"." * value_size
        self._partitions = partitions
        self._seq = [0] * partitions
        self._acked: dict[int, list[tuple[int, bytes]]] = {}
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "client.id": f"fault-load-{self.tag}",
                                   # connection errors are expected here; failed deliveries land in .errors
                                   "log_level": 2, **producer_config})
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{topic}", daemon=True)

    def start(self) -> LoadGenerator:
        """Start producing; returns self."""
        self._thread.start()
        return self

    def pause(self) -> None:
        """Stop producing new records (those in flight are still delivered)."""
        self._running.clear()

    def resume(self) -> None:
        """Produce again after :meth:`pause`."""
        self._idle.clear()
        self._running.set()

    def settle(self, timeout: float = 330.0) -> None:
        """Pause, then wait until every record produced so far is acknowledged (or has failed)."""
        self.pause()
        while self._thread.is_alive() and not self._idle.wait(0.1):
            pass
        remaining = self._producer.flush(timeout)
        if remaining:
            self.errors.append(f"{remaining} records still unacknowledged after {timeout}s")

    def set_partitions(self, count: int, timeout: float = 30.0) -> None:
        """Spread records over ``count`` partitions from now on, once the producer's metadata shows them
        and their leader answers for them.

        The metadata lists a partition just added a few milliseconds before its leader has created its
        log. A first produce request sent then fails (retriable) while the next one, pipelined behind
        it, may land once the log exists; a partition without producer state accepts any first
        sequence number, so that second batch is written at offset 0, and librdkafka, seeing a later
        batch of the partition succeed, reports the first batch delivered too ("implicitly acked",
        without an offset) although it was never written. Waiting until the leader answers a
        ListOffsets for each new partition keeps the load from creating such records (issue 23).
        """
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        while True:
            topic = self._producer.list_topics(self.topic, timeout=5).topics.get(self.topic)
            if topic is not None and topic.error is None and len(topic.partitions) >= count:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the producer never saw {count} partitions of {self.topic}")
            time.sleep(0.2)
        probe = Consumer({"bootstrap.servers": self._bootstrap, "group.id": f"fault-probe-{self.tag}",
                          "enable.auto.commit": False, "log_level": 2})
        try:
            for partition in range(len(self._seq), count):
                while True:
                    try:
                        probe.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)
                        break
                    except KafkaException:
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"partition {partition} of {self.topic} never became writable")
                        time.sleep(0.05)
        finally:
            probe.close()
        with self._lock:
            self._seq.extend([0] * (count - len(self._seq)))
            self._partitions = count

    def _on_delivery(self, error, message) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        with self._lock:
            self._acked.setdefault(message.partition(), []).append((message.offset(), message.value()))

    def _produce_one(self) -> None:
        with self._lock:
            total = sum(self._seq)
            partition = total % self._partitions
            seq = self._seq[partition]
            self._seq[partition] += 1
        value = f"{self.tag}:{partition}:{seq}".encode() + self._padding
        while True:
            try:
                self._producer.produce(self.topic, value=value, partition=partition, on_delivery=self._on_delivery)
                return
            except BufferError:  # local queue full (broker away): wait for room, never drop
                self._producer.poll(0.1)
                if self._stop.is_set():
                    return

    def _run(self) -> None:
        started = time.monotonic()
        produced = 0
        while not self._stop.is_set():
            if not self._running.is_set():
                self._idle.set()
                self._running.wait(0.1)
                started, produced = time.monotonic(), 0
                continue
            self._idle.clear()
            due = int((time.monotonic() - started) * self.rate)
            for _ in range(due - produced):
                self._produce_one()
            produced = max(produced, due)
            self._producer.poll(0.01)

    def stop(self, timeout: float = 330.0) -> None:
        """Stop producing and wait until every record produced so far is acknowledged or has failed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        remaining = self._producer.flush(timeout)
        if remaining:
            self.errors.append(f"{remaining} records still unacknowledged after {timeout}s")

    def acknowledged(self) -> dict[int, list[bytes]]:
        """partition -> values the source acknowledged, in offset order (a :func:`tally`'s ``source``)."""
        with self._lock:
            return {p: [v for _, v in _in_offset_order(records)] for p, records in self._acked.items()}

    def unconfirmed(self) -> set[bytes]:
        """Values acknowledged without an offset (librdkafka's report for a duplicate of a retried send)."""
        with self._lock:
            return {v for records in self._acked.values() for o, v in records if o is None}

    def acknowledged_offsets(self) -> dict[int, list[tuple[int | None, bytes]]]:
        """partition -> ``(offset, value)`` of every acknowledged record, in offset order.

        The offset is None for a record the broker acknowledged as a duplicate of a retried send
        (librdkafka reports no offset then); it keeps its place in delivery order.
        """
        with self._lock:
            return {p: _in_offset_order(records) for p, records in self._acked.items()}

    @property
    def count(self) -> int:
        """Records acknowledged so far."""
        with self._lock:
            return sum(len(r) for r in self._acked.values())


def _in_offset_order(records: list[tuple[int | None, bytes]]) -> list[tuple[int | None, bytes]]:
    """Delivery reports sorted by offset; one without an offset stays right after its predecessor.

    An idempotent producer reports each partition's deliveries in order, so a record whose
    offset is unknown (acknowledged as a duplicate after a retry) belongs where it was reported.
    """
    keyed, last = [], -1
    for offset, value in records:
        last = last if offset is None else offset
        keyed.append((last, offset, value))
    keyed.sort(key=lambda item: item[0])  # stable: equal keys keep delivery order
    return [(offset, value) for _, offset, value in keyed]


# -- reading -------------------------------------------------------------------------------


class TopicReader:
    """Reads every partition of a topic from the beginning, picking up where the last call stopped.

    Partitions that appear later (or the topic itself) are read once they exist.
    """

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.topic = topic
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fault-reader-{uuid.uuid4().hex}",
                                   "enable.auto.commit": False, "enable.partition.eof": False,
                                   "auto.offset.reset": "earliest", "client.id": "fault-reader", "log_level": 2})
        self.records: dict[int, list[tuple[int, bytes]]] = {}
        self._next: dict[int, int] = {}
        #: partition -> records skipped because the target's log start moved past them
        self.truncated: Counter = Counter()

    def partitions(self) -> list[int]:
        """The topic's partitions according to a fresh metadata request (empty if it does not exist)."""
        topic = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        if topic is None or topic.error is not None:
            return []
        return sorted(topic.partitions)

    def catch_up(self, timeout: float = 60.0) -> dict[int, list[bytes]]:
        """Read up to each partition's current end; returns partition -> values in offset order."""
        from confluent_kafka import TopicPartition

        for partition in self.partitions():
            self._next.setdefault(partition, 0)
            self.records.setdefault(partition, [])
        ends = {}
        for partition, position in self._next.items():
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=10)
            if low > position:
                self.truncated[partition] += low - position
                self._next[partition] = low
            ends[partition] = high
        behind = {p for p, end in ends.items() if self._next[p] < end}
        if behind:
            self._consumer.assign([TopicPartition(self.topic, p, self._next[p]) for p in sorted(behind)])
            deadline = time.monotonic() + timeout
            while behind and time.monotonic() < deadline:
                for message in self._consumer.consume(10_000, timeout=0.5):
                    if message.error() is not None:
                        continue
                    partition, offset = message.partition(), message.offset()
                    if offset < self._next[partition]:
                        continue
                    self.records[partition].append((offset, message.value()))
                    self._next[partition] = offset + 1
                    if offset + 1 >= ends[partition]:
                        behind.discard(partition)
            self._consumer.unassign()
            if behind:
                raise TimeoutError(f"{self.topic}: partitions {sorted(behind)} not read to their end in {timeout}s")
        return self.values()

    def end_offsets(self) -> dict[int, int]:
        """partition -> end offset now (empty if the topic does not exist)."""
        from confluent_kafka import TopicPartition

        return {p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                for p in self.partitions()}

    def end_total(self) -> int:
        """Records in the topic now (sum of end minus start offsets; 0 if it does not exist)."""
        from confluent_kafka import TopicPartition

        total = 0
        for partition in self.partitions():
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=10)
            total += high - low
        return total

    def values(self) -> dict[int, list[bytes]]:
        """partition -> values read so far, in offset order."""
        return {p: [v for _, v in records] for p, records in self.records.items()}

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()


class ProgressWatch:
    """Samples a topic's end offsets in a background thread: how long copying stalled, how fast it ran.

    :meth:`longest_stall` is, over the partitions, the longest time a partition did not grow
    before growing again, so a quiet period at the very end (nothing left to copy) does not
    count, and one stuck partition shows even while the others flow. Samples failing (the broker is
    away) are skipped, which is what a stall looks like. :meth:`peak_rate` is the fastest growth
    of the whole topic between two consecutive samples (e.g. catching up after a fault).
    """

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.5):
        self._reader = TopicReader(bootstrap, topic)
        self._interval = interval
        self._samples: list[tuple[float, dict[int, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{topic}", daemon=True)

    def start(self) -> ProgressWatch:
        """Take a first sample now (so a fault right after is measured from here), then sample in the background."""
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        try:
            ends = self._reader.end_offsets()
        except Exception:  # broker away: no sample
            return
        self._samples.append((time.monotonic(), ends))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def stop(self) -> None:
        """Stop sampling and close the consumer (idempotent)."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._reader.close()

    @property
    def samples(self) -> list[tuple[float, dict[int, int]]]:
        """``(monotonic time, {partition: end offset})`` of every successful sample so far."""
        return list(self._samples)

    def longest_stall(self) -> float:
        """Longest time in seconds a partition did not grow until it grew again (see :func:`longest_stall`)."""
        return longest_stall(self._samples)

    def peak_rate(self) -> float:
        """Highest growth rate of the whole topic between two consecutive samples, in records per second."""
        return peak_rate(self._samples)


def longest_stall(samples: Sequence[tuple[float, Mapping[int, int]]]) -> float:
    """From ``(time, {partition: end offset})`` samples: the longest time a partition did not grow.

    Measured from the first sample showing the partition (or its previous growth) to its next
    growth; the time after a partition's last growth does not count.
    """
    growth: dict[int, list[float]] = {}
    previous: dict[int, int] = {}
    for t, ends in samples:
        for partition, end in ends.items():
            if partition not in previous or end > previous[partition]:
                growth.setdefault(partition, []).append(t)
            previous[partition] = end
    return max((b - a for times in growth.values() for a, b in zip(times, times[1:])), default=0.0)


def peak_rate(samples: Sequence[tuple[float, Mapping[int, int]]]) -> float:
    """From ``(time, {partition: end offset})`` samples: the fastest growth of the sum, in records/s."""
    totals = [(t, sum(ends.values())) for t, ends in samples]
    return max(((n2 - n1) / (t2 - t1) for (t1, n1), (t2, n2) in zip(totals, totals[1:]) if t2 > t1), default=0.0)


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> dict[int, list[bytes]]:
    """Every record value of ``topic`` by partition, from the beginning to its current end."""
    reader = TopicReader(bootstrap, topic)
    try:
        return reader.catch_up(timeout)
    finally:
        reader.close()


# -- broker faults ---------------------------------------------------------------------------


def _broker_pid(cluster: LocalCluster) -> int:
    pid = cluster.pid()
    if pid is None:
        raise RuntimeError(f"cluster {cluster.spec.name} is not running")
    return pid


def kill_broker(cluster: LocalCluster, timeout: float = 30.0) -> None:
    """SIGKILL the cluster's JVM (no shutdown, no flush) and wait until it is gone."""
    pid = _broker_pid(cluster)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while cluster.is_running():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # the JVM is our child when a fixture started it: reap it
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker of {cluster.spec.name} survived SIGKILL for {timeout}s")
        time.sleep(0.05)


def restart_broker(cluster: LocalCluster, timeout: float = 120.0) -> None:
    """Start a killed cluster again: same ports and data directory; returns once it answers."""
    cluster.start(timeout)


def kill_and_restart(cluster: LocalCluster, down_s: float, timeout: float = 120.0) -> float:
    """SIGKILL the broker, keep it down for ``down_s`` seconds, then restart it (blocking).

    Returns how long the broker was unavailable in seconds: ``down_s`` plus the time the new
    JVM took to recover its logs and answer requests (tens of seconds on a busy machine).
    """
    killed = time.monotonic()
    kill_broker(cluster)
    time.sleep(down_s)
    restart_broker(cluster, timeout)
    return time.monotonic() - killed


@contextlib.contextmanager
def paused_broker(cluster: LocalCluster) -> Iterator[int]:
    """SIGSTOP the broker's JVM for the duration of the block, SIGCONT it on exit (even on error).

    To its clients a stopped broker looks like a network partition: connections stay open and
    requests go unanswered until they time out. Yields the JVM's PID.
    """
    pid = _broker_pid(cluster)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def pause_broker(cluster: LocalCluster, seconds: float) -> float:
    """SIGSTOP the broker for ``seconds`` seconds, then SIGCONT it (blocking); returns ``seconds``."""
    with paused_broker(cluster):
        time.sleep(seconds)
    return seconds
