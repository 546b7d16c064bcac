"""Exactly-once checks: a source load with committed and aborted transactions, and independent readers.

Everything observes Kafka through librdkafka (confluent-kafka) or Kafka's own Java console
consumer, never through the aiokafka code under test.

- :class:`MixedLoad`: a background thread writing to a source topic, in turn, plain records (an
  idempotent producer), transactions it commits and transactions it aborts (a transactional
  producer), so a read_committed reader of the source must skip every third block. It knows the
  values it aborted.
- :func:`read_committed`: every record of a topic a read_committed consumer is given, per
  partition in order (the source's committed records are the truth a mirror is checked against).
- :func:`java_committed_counts`: records per partition according to Kafka's ConsoleConsumer with
  ``--isolation-level read_committed``.
- :func:`eos_properties` / :func:`wait_for_committed`: an mm2.properties with exactly-once, and
  waiting until B holds a number of committed records.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
import uuid
from collections import Counter

from mirrorline.localkafka.artifacts import java_executable, resolve_kafka_classpath
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.mm2 import isolated_state

BLOCK = 20  # records per plain block and per transaction


class MixedLoad:
    """Plain records, committed and aborted transactions to ``topic`` at about ``rate`` records/s.

    Values are ``b"<tag>:<kind>:<n>"`` with kind ``p`` (plain), ``c`` (committed) or ``a`` (aborted),
    unique over the run; records go round-robin over ``partitions``.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float):
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.tag = uuid.uuid4().hex[:6]
        self.aborted: set[bytes] = set()
        self.errors: list[str] = []
        self.written = 0
        self._plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                "log_level": 2})
        self._txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"mixed-load-{self.tag}",
                              "linger.ms": 5, "log_level": 2})
        self._txn.init_transactions(30)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mixed-load-{topic}", daemon=True)

    def start(self) -> MixedLoad:
        """Start writing; returns self."""
        self._thread.start()
        return self

    def _values(self, kind: str, count: int) -> list[tuple[int, bytes]]:
        out = []
        for _ in range(count):
            out.append((self.written % self.partitions, f"{self.tag}:{kind}:{self.written}".encode()))
            self.written += 1
        return out

    def _delivered(self, error, _message) -> None:
        if error is not None:
            self.errors.append(str(error))

    def _run(self) -> None:
        started = time.monotonic()
        block = 0
        try:
            while not self._stop.is_set():
                kind = "pca"[block % 3]
                block += 1
                values = self._values(kind, BLOCK)
                if kind == "p":
                    for partition, value in values:
                        self._plain.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                    self._plain.flush(30)
                else:
                    self._txn.begin_transaction()
                    for partition, value in values:
                        self._txn.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                    if kind == "a":
                        self._txn.flush(30)  # the aborted records are written to the log, then aborted
                        self._txn.abort_transaction(30)
                        self.aborted.update(v for _, v in values)
                    else:
                        self._txn.commit_transaction(30)
                ahead = self.written / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(exc))

    def stop(self) -> None:
        """Stop writing; every block begun is finished (committed, aborted or flushed)."""
        self._stop.set()
        self._thread.join(60)
        self._plain.flush(30)


def read_committed(bootstrap: str, topic: str, timeout: float = 60.0, **config: str) -> dict[int, list[bytes]]:
    """partition -> values a read_committed consumer is given, in offset order, up to each partition's end.

    ``config``: more librdkafka settings (``**{"sasl.username": ...}``)."""
    return {p: [value for _, value in records]
            for p, records in read_committed_records(bootstrap, topic, timeout, **config).items()}


def read_committed_records(bootstrap: str, topic: str, timeout: float = 60.0,
                           **config: str) -> dict[int, list[tuple[int, bytes]]]:
    """As :func:`read_committed`, with each record's offset: partition -> ``[(offset, value)]``."""
    return {p: [(offset, value) for offset, _, value in records]
            for p, records in read_committed_messages(bootstrap, topic, timeout, **config).items()}


def read_committed_messages(bootstrap: str, topic: str, timeout: float = 60.0,
                            **config: str) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """As :func:`read_committed`, whole: partition -> ``[(offset, key, value)]`` (a topic written in
    transactions ends with a commit marker, which readers that wait for the end offset never get)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest", "log_level": 2, **config})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return {}
        partitions = sorted(metadata.partitions)
        out: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {p: [] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        open_partitions = set(partitions)
        deadline = time.monotonic() + timeout
        while open_partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(open_partitions)} not read to their end in {timeout}s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(message.partition())
                continue
            out[message.partition()].append((message.offset(), message.key(), message.value()))
        return out
    finally:
        consumer.close()


def java_committed_counts(bootstrap: str, topic: str, timeout_ms: int = 8000) -> dict[int, int]:
    """Records per partition Kafka's own ConsoleConsumer reads with ``--isolation-level read_committed``."""
    command = [java_executable(), "-Xmx256m", "-cp", f"{resolve_kafka_classpath()}/*",
               "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic", topic,
               "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", str(timeout_ms),
               "--formatter-property", "print.partition=true", "--formatter-property", "print.value=false"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    counts: Counter = Counter()
    for line in result.stdout.splitlines():
        if line.startswith("Partition:"):
            counts[int(line.split(":", 1)[1].split()[0])] += 1
    return dict(counts)


def eos_properties(cluster_a, cluster_b, topic: str, state: str, extra: str = "") -> str:
    """An mm2.properties for A->B with exactly-once, as a Java MM2 user writes it."""
    return f"""# MirrorMaker 2 with exactly-once (KIP-618)
clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topic}
A->B.tasks.max = 2
emit.heartbeats.enabled = false
B.exactly.once.source.support = enabled
dedicated.mode.enable.internal.rest = true
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
{extra}{isolated_state(state)}"""


async def wait_for_committed(cluster_b, remote: str, at_least: int, proc, log_path, timeout: float = 60) -> int:
    """Wait until B holds ``at_least`` committed records of ``remote``; returns how many it holds."""
    deadline = time.monotonic() + timeout
    while True:
        held = sum(len(v) for v in (await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers,
                                                            remote)).values())
        if held >= at_least:
            return held
        assert proc.poll() is None, f"mirrorline mm2 exited:\n{log_path.read_text()[-4000:]}"
        assert time.monotonic() < deadline, \
            f"B holds {held} committed records of {remote}, expected {at_least}:\n{log_path.read_text()[-4000:]}"
        await asyncio.sleep(1)
