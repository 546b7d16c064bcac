"""Benchmark: mirrorline and Java MirrorMaker 2 side by side at many topics, partitions and groups.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_scale.py                          # 100 / 1,000 / 8,000 partitions
    .venv/bin/python tests/benchmarks/bench_scale.py --sizes 100 --groups 1 --allow-load   # smoke run
    .venv/bin/python tests/benchmarks/bench_scale.py --sizes 1000x2 --groups 200 --engines mirrorline \\
        --phases copy,idle                                                     # issue 25's idle-CPU set-up

A size is a partition count with a fixed shape (``100`` = 50 topics x 2, ``1000`` = 250 x 4,
``8000`` = 2,000 x 4) or ``TOPICSxPARTITIONS``. Per size, one data set is made on fresh clusters
(Kafka's broker defaults): every partition gets ``--history`` records of ``--record-size`` bytes,
and for each group count G in ``--groups``, G groups commit position 0 on a share of the topics
(together they cover every partition). A trickle (``--trickle`` records/s over all partitions)
runs while the engines copy, and stops for the idle minute. Then, per size, group count and
engine, with a fresh source alias (so no run reuses another's remote topics or offsets), one
``mm2.properties`` that both engines run unchanged (``refresh.topics.interval.seconds=10``,
MM2's defaults otherwise), and these phases (``--phases``):

- ``copy``: from launch until every remote partition holds the history: wall time; the
  engine's peak RSS and CPU-seconds up to then; TCP connections to each cluster.
- ``metrics`` (mirrorline): size and scrape time of ``GET /metrics`` (MM2 has JMX only).
- ``idle``: CPU-seconds over the next ``--idle-seconds`` (60) with no new records: refresh,
  config sync, checkpoints, heartbeats, fetch loops. The first minute after the copy still holds
  work the copy left (the offsets flush of every partition, the first checkpoint cycle over the
  copied positions); with ``--idle-seconds`` of 120 or more the minutes after the first are
  also reported apart ("steady idle").
- ``pickup``: a new topic among the others: from its creation (with records) until its remote
  topic holds them.
- ``checkpoint``: every group commits a new position on the source; from the earliest
  checkpoint record timestamp of the cycle that carries the new positions (both engines stamp a
  checkpoint with the time its group's turn started) to the arrival on B of the last group's:
  one checkpoint cycle over all groups.
- ``recovery`` (separate, once per size): three distributed workers run the MirrorSource
  connector (mirrorline: ``mirrorline distributed``; MM2: Java Connect's ``ConnectDistributed``
  with MirrorSourceConnector, Connect's defaults, so its ``scheduled.rebalance.max.delay.ms`` of
  5 minutes applies); one worker is SIGKILLed, and the time until every task is RUNNING on a
  live worker is measured.

Prints a table per phase and writes ``scale-*.png`` plots (each figure against partition count,
one line per engine) and ``scale-results.json`` into ``--out``. See tests/benchmarks/README.md.
The load average is printed with every run; a run above ``--max-load`` is refused unless
``--allow-load`` (then its figures are flagged).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Brokers get the heap Kafka's own kafka-server-start.sh gives them (-Xmx1G -Xms1G), not the test
# harness's 512 MiB: at 8,000 partitions on top of the smaller sizes' copies (over 12,000 partition
# directories on B), a 512 MiB broker ran out of heap. MIRRORLINE_KAFKA_HEAP still wins.
os.environ.setdefault("MIRRORLINE_KAFKA_HEAP", "-Xms1g -Xmx1g")

import scale_kit  # noqa: E402,F401 - puts tests/ and this directory on sys.path
from scale_kit import (
    DEFAULT_MAX_LOAD,
    Engine,
    LoadWatch,
    ReclaimWatch,
    create_topics,
    end_offsets,
    engine_command,
    load_banner,
    log,
    mirrorline_env,
    read_ahead_note,
    refuse_if_loaded,
    set_read_ahead,
    stop_cleanly_on_sigterm,
    tcp_connections,
    wait_until,
)

warnings.filterwarnings("ignore", category=DeprecationWarning)

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench_mirror import _base_port  # noqa: E402
from mirrorline.connectors.mirror_client.formats import decode_checkpoint_key, decode_checkpoint_value  # noqa: E402
from mirrorline.localkafka.artifacts import KAFKA_VERSION, resolve_kafka_classpath, resolve_mm2_classpath  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402

SHAPES = {"100": (50, 2), "1000": (250, 4), "8000": (2000, 4)}
PHASES = ("copy", "metrics", "idle", "pickup", "checkpoint", "recovery")
REFRESH_S = 10
#: the idle phase's CPU is also read every this many seconds, user and system time apart (the timeline)
IDLE_SAMPLE_S = 5.0
ENGINES = ("mm2", "mirrorline", "mirrorline-before")


@dataclass(frozen=True)
class Size:
    """``topics`` x ``partitions`` partitions."""

    topics: int
    partitions: int

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    @property
    def name(self) -> str:
        return f"{self.total} ({self.topics}x{self.partitions})"

    @classmethod
    def parse(cls, text: str) -> Size:
        if text in SHAPES:
            return cls(*SHAPES[text])
        match = re.fullmatch(r"(\d+)x(\d+)", text)
        if not match:
            raise ValueError(f"size {text!r}: expected one of {', '.join(SHAPES)} or TOPICSxPARTITIONS")
        return cls(int(match.group(1)), int(match.group(2)))


@dataclass
class Run:
    """The figures of one engine at one size and group count (None: not measured)."""

    engine: str
    partitions: int
    topics: int
    groups: int
    tasks: int
    load_peak: float = 0.0
    copy_s: float | None = None
    copy_cpu_s: float | None = None
    peak_rss_mib: float | None = None
    connections: dict[str, int] = field(default_factory=dict)
    metrics_bytes: int | None = None
    metrics_series: int | None = None
    metrics_scrape_s: float | None = None
    idle_cpu_s_per_min: float | None = None
    steady_idle_cpu_s_per_min: float | None = None
    pickup_s: float | None = None
    checkpoint_cycle_s: float | None = None
    recovery_s: float | None = None
    #: which pass over the engines this run belongs to (``--both-orders`` makes a second, reversed)
    round: int = 1
    note: str = ""
    #: (seconds into the idle phase, user CPU-s, system CPU-s) of each IDLE_SAMPLE_S of the idle phase
    idle_timeline: list[tuple[float, float, float]] = field(default_factory=list)
    #: (seconds since the engine started, partitions whose history is complete on B), every ~10 s
    copy_timeline: list[tuple[float, int]] = field(default_factory=list)
    #: page cache the kernel reclaimed during the copy, MiB (a sign of memory pressure on the machine)
    copy_reclaim_mib: float | None = None


# -- the data set --------------------------------------------------------------------------

class DataSet:
    """Topics with history on A and groups with committed positions, for one size."""

    def __init__(self, a: str, size: Size, history: int, record_size: int, tag: str):
        self.a, self.size, self.history, self.record_size = a, size, history, record_size
        self.prefix = f"sc{tag}-"
        self.topics = [f"{self.prefix}t{i:05d}" for i in range(size.topics)]
        self.partitions = [(t, p) for t in self.topics for p in range(size.partitions)]
        self.new_topics = 0

    def create(self) -> None:
        t0 = time.perf_counter()
        create_topics(self.a, self.topics, self.size.partitions)
        producer = Producer({"bootstrap.servers": self.a, "linger.ms": 50, "acks": "1",
                             "queue.buffering.max.messages": 2_000_000, "batch.size": 1_000_000})
        # a topic created a moment ago may not be in the producer's metadata yet: its records would
        # fail (unknown partition) in a delivery report, so wait until every topic is known
        wait_until(lambda: set(self.topics) <= set(producer.list_topics(timeout=30).topics), 120, 1.0,
                   what="the new topics in the producer's metadata")
        errors: list = []

        def delivered(error, _message) -> None:
            if error is not None:
                errors.append(error)

        value = os.urandom(self.record_size)
        for i in range(self.history):
            for topic, partition in self.partitions:
                while True:
                    try:
                        producer.produce(topic, value, b"%08d" % i, partition=partition, on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
        if producer.flush(600):
            raise RuntimeError("history records still undelivered after 600 s")
        if errors:
            raise RuntimeError(f"{len(errors)} history records failed, first: {errors[0]}")
        ends = end_offsets(self.a, self.partitions)
        short = [tp for tp in self.partitions if ends.get(tp, 0) < self.history]
        if short:
            raise RuntimeError(f"{len(short)} partitions hold fewer than {self.history} records, e.g. {short[:3]}")
        log(f"  {self.size.name}: {len(self.topics)} topics, {self.history} records x {self.record_size} B per "
            f"partition, in {time.perf_counter() - t0:.1f} s")

    def group_names(self, count: int) -> list[str]:
        return [f"{self.prefix}g{count}-{i:04d}" for i in range(count)]

    def group_partitions(self, count: int) -> dict[str, list[tuple[str, int]]]:
        """Each group's share: topics dealt round-robin (every partition covered), at least one topic each."""
        names = self.group_names(count)
        share: dict[str, list[tuple[str, int]]] = {g: [] for g in names}
        for i in range(max(count, len(self.topics))):
            topic = self.topics[i % len(self.topics)]
            share[names[i % count]].extend((topic, p) for p in range(self.size.partitions))
        return share

    def commit(self, count: int, offset: int) -> None:
        """Every group of tier ``count`` commits ``offset`` on its share (AlterConsumerGroupOffsets)."""
        admin = AdminClient({"bootstrap.servers": self.a})
        for group, parts in self.group_partitions(count).items():
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, offset) for t, p in parts])
            for attempt in range(30):  # the first commit waits for __consumer_offsets to be created
                try:
                    [future] = admin.alter_consumer_group_offsets([request], request_timeout=60).values()
                    failed = [tp for tp in future.result().topic_partitions if tp.error is not None]
                except Exception as exc:  # noqa: BLE001 - e.g. coordinator not available yet
                    failed = [exc]
                if not failed:
                    break
                time.sleep(1)
            else:
                raise RuntimeError(f"group {group} could not commit offset {offset}: {failed[:3]}")

    def new_topic(self) -> str:
        self.new_topics += 1
        return f"{self.prefix}new{self.new_topics:03d}-{uuid.uuid4().hex[:4]}"


class Trickle:
    """A steady trickle of records over all the data set's partitions, paused for idle measurements."""

    def __init__(self, a: str, partitions: list[tuple[str, int]], per_second: float):
        self.partitions, self.per_second = partitions, per_second
        self.producer = Producer({"bootstrap.servers": a, "linger.ms": 5, "acks": "1"})
        self.running = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        if per_second > 0:
            self.thread.start()

    def _run(self) -> None:
        rng = random.Random(25)
        while not self.stopped.is_set():
            if not self.running.wait(0.5):
                continue
            topic, partition = rng.choice(self.partitions)
            self.producer.produce(topic, b"trickle", partition=partition)
            self.producer.poll(0)
            time.sleep(1 / self.per_second)

    def close(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join()
        self.producer.flush(10)
        # librdkafka's client lives until the object is freed: dropped here, before the clusters stop,
        # it does not log a connection refusal a second while the results are printed
        self.producer = None


# -- one engine run --------------------------------------------------------------------------

def properties(alias: str, a: str, b: str, data: DataSet, groups: int, tasks: int, extra: list[str]) -> str:
    """One mm2.properties both engines run unchanged."""
    return "\n".join([
        "# written by tests/benchmarks/bench_scale.py",
        f"clusters = {alias}, B", f"{alias}.bootstrap.servers = {a}", f"B.bootstrap.servers = {b}",
        f"{alias}->B.enabled = true", f"{alias}->B.topics = {re.escape(data.prefix)}.*",
        f"{alias}->B.groups = {re.escape(data.prefix)}g{groups}-.*", f"{alias}->B.tasks.max = {tasks}",
        f"refresh.topics.interval.seconds = {REFRESH_S}", *extra, SINGLE_BROKER_MM2_PROPERTIES])


def remote(alias: str, topic: str) -> str:
    return f"{alias}.{topic}"


def copied(b: str, alias: str, partitions: list[tuple[str, int]], at_least: int) -> bool:
    return copied_count(b, alias, partitions, at_least) == len(partitions)


class CopyProgress:
    """The copy-phase predicate: whether every partition's history is on B, keeping a timeline of
    how many are (logged every ``every_s``), which tells a slow start from a slow tail."""

    def __init__(self, b: str, alias: str, data: DataSet, running: Engine, timeline: list, every_s: float = 10.0):
        self.b, self.alias, self.data, self.running = b, alias, data, running
        self.timeline, self.every_s = timeline, every_s
        self.started = time.perf_counter()

    def __call__(self) -> bool:
        if self.running.peak_rss_kb() is None:
            return False
        done = copied_count(self.b, self.alias, self.data.partitions, self.data.history)
        elapsed = time.perf_counter() - self.started
        total = len(self.data.partitions)
        if not self.timeline or elapsed - self.timeline[-1][0] >= self.every_s or done == total:
            self.timeline.append((round(elapsed, 1), done))
            log(f"      {elapsed:5.0f} s: {done:,} of {total:,} partitions copied")
        return done == total


def copied_count(b: str, alias: str, partitions: list[tuple[str, int]], at_least: int) -> int:
    """How many of ``partitions`` have at least ``at_least`` records in their remote copy on B."""
    wanted = [(remote(alias, t), p) for t, p in partitions]
    ends = end_offsets(b, wanted)
    return sum(1 for tp in wanted if ends.get(tp, -1) >= at_least)


def scrape(url: str) -> tuple[int, int, float]:
    """(bytes, series, seconds) of one GET /metrics."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{url}/metrics", timeout=60) as response:
        body = response.read()
    elapsed = time.perf_counter() - t0
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return len(body), series, elapsed


def checkpoint_cycle(b: str, alias: str, data: DataSet, groups: int, offset: int, timeout: float,
                     engine: Engine) -> float:
    """Commit ``offset`` for every group, then time the checkpoint cycle that carries it to B."""
    topic = f"{alias}.checkpoints.internal"
    consumer = Consumer({"bootstrap.servers": b, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    try:
        ends = end_offsets(b, [(topic, 0)])
        consumer.assign([TopicPartition(topic, 0, ends.get((topic, 0), 0))])
        expected = {g: len(parts) for g, parts in data.group_partitions(groups).items()}
        data.commit(groups, offset)
        seen: dict[str, set] = {g: set() for g in expected}
        first_ts, last_arrival = None, None
        deadline = time.monotonic() + timeout
        while any(len(seen[g]) < n for g, n in expected.items()):
            engine.check_alive()
            if time.monotonic() > deadline:
                done = sum(len(seen[g]) >= n for g, n in expected.items())
                raise TimeoutError(f"{done} of {len(expected)} groups checkpointed at {offset} within {timeout:.0f} s")
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            group, downstream_topic, partition = decode_checkpoint_key(message.key())
            upstream, _, _ = decode_checkpoint_value(message.value())
            if group in seen and upstream == offset:
                seen[group].add((downstream_topic, partition))
                stamp = message.timestamp()[1] / 1000
                first_ts = stamp if first_ts is None else min(first_ts, stamp)
                last_arrival = time.time()
        return last_arrival - first_ts
    finally:
        consumer.close()


def run_engine(engine: str, alias: str, a: str, b: str, ports: dict[str, int], data: DataSet, groups: int,
               args, phases: set[str], trickle: Trickle, tmp: Path) -> Run:
    extra = list(args.prop)
    if engine != "mm2" and args.metrics_level:
        extra.append(f"{alias}->B.replication.metrics.level = {args.metrics_level}")
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, data, groups, args.tasks, extra))
    listeners = None
    if engine != "mm2":
        from support.distributed import free_port
        listeners = f"http://127.0.0.1:{free_port()}"
    # every run starts from the same positions (an earlier run's checkpoint phase moved them)
    data.commit(groups, 0)
    watch = LoadWatch()
    watch.sample()
    result = Run(engine, data.size.total, data.size.topics, groups, args.tasks)
    running = Engine(engine_command(engine, props, listeners), tmp / f"{alias}-{engine}.log",
                     env=build_env(engine, args), name=engine)
    try:
        trickle.running.set()
        reclaim = ReclaimWatch()
        t0 = time.perf_counter()
        try:
            wait_until(CopyProgress(b, alias, data, running, result.copy_timeline),
                       args.timeout, 1.0, running, f"{engine}: history copied to B")
        except TimeoutError:
            # an engine that cannot copy this size (e.g. Java MM2 past 10,000 records of new topics
            # in one refresh, which a KRaft controller refuses: KAFKA-19327) is
            # reported as such, and measured for what it does meanwhile; the phases that need a
            # working mirror are left out for it
            done = copied_count(b, alias, data.partitions, data.history)
            result.note = (f"history NOT copied within {args.timeout:.0f} s: {done} of {len(data.partitions)} "
                           f"partitions complete")
            log(f"    copy: {result.note}")
            phases = phases - {"pickup", "checkpoint"}
        else:
            result.copy_s = time.perf_counter() - t0
        result.copy_cpu_s = running.cpu_s()
        result.copy_reclaim_mib = reclaim.mib()
        result.connections = tcp_connections(running.pids(), ports)
        watch.sample()
        reclaimed = f"; page cache reclaimed meanwhile: {result.copy_reclaim_mib:,.0f} MiB"
        if result.copy_s is not None:
            log(f"    copy: {result.copy_s:.1f} s, {result.copy_cpu_s:.1f} CPU s, connections {result.connections}"
                f"{reclaimed}")
        else:
            log(f"    after {args.timeout:.0f} s: {result.copy_cpu_s:.1f} CPU s, connections {result.connections}"
                f"{reclaimed}")
        if "metrics" in phases and listeners:
            wait_until(lambda: _answers(listeners), 60, 0.5, running, "GET /metrics")
            scrape(listeners)  # warm
            result.metrics_bytes, result.metrics_series, result.metrics_scrape_s = scrape(listeners)
            log(f"    /metrics: {result.metrics_bytes / 1024:.0f} KiB, {result.metrics_series} series, "
                f"{result.metrics_scrape_s * 1000:.0f} ms")
        if "idle" in phases:
            trickle.running.clear()
            time.sleep(5)  # the last trickled records copied
            cpu0, t_idle = running.cpu_s(), time.perf_counter()
            profiler = None
            if args.py_spy and engine != "mm2":
                stacks = args.out / f"idle-{alias}-{engine}.txt"
                profiler = subprocess.Popen(
                    [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(running.proc.pid),
                     "--duration", str(int(args.idle_seconds)), "--format", "raw", "--output", str(stacks),
                     "--rate", "50", "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu1 = t_steady = None
            previous = running.cpu_split()
            while (elapsed := time.perf_counter() - t_idle) < args.idle_seconds:
                time.sleep(min(IDLE_SAMPLE_S, args.idle_seconds - elapsed))
                split = running.cpu_split()
                result.idle_timeline.append((round(time.perf_counter() - t_idle, 1),
                                             round(split[0] - previous[0], 2), round(split[1] - previous[1], 2)))
                previous = split
                if cpu1 is None and args.idle_seconds >= 120 and time.perf_counter() - t_idle >= 60:
                    cpu1, t_steady = running.cpu_s(), time.perf_counter()
            if cpu1 is not None:
                result.steady_idle_cpu_s_per_min = (running.cpu_s() - cpu1) / (time.perf_counter() - t_steady) * 60
            if profiler is not None:
                profiler.wait(60)
                log(f"    idle stacks (py-spy, collapsed): {stacks}")
            result.idle_cpu_s_per_min = (running.cpu_s() - cpu0) / (time.perf_counter() - t_idle) * 60
            watch.sample()
            log(f"    idle: {result.idle_cpu_s_per_min:.2f} CPU s per minute"
                + (f"; after the first minute {result.steady_idle_cpu_s_per_min:.2f}"
                   if result.steady_idle_cpu_s_per_min is not None else ""))
            log(f"    idle CPU-s per {IDLE_SAMPLE_S:g} s, user+system: "
                + " ".join(f"{user:.2f}+{system:.2f}" for _, user, system in result.idle_timeline))
            trickle.running.set()
        if "pickup" in phases:
            topic = data.new_topic()
            create_topics(a, [topic], data.size.partitions)
            producer = Producer({"bootstrap.servers": a, "acks": "1"})
            wait_until(lambda: topic in producer.list_topics(timeout=10).topics, 60, 0.5, what=f"{topic} known")
            for p in range(data.size.partitions):
                producer.produce(topic, b"new", partition=p)
            if producer.flush(30):
                raise RuntimeError(f"records to the new topic {topic} undelivered")
            t_new = time.perf_counter()
            try:
                wait_until(lambda: copied(b, alias, [(topic, p) for p in range(data.size.partitions)], 1),
                           REFRESH_S * 6 + 60, 0.25, running, f"{engine}: new topic {topic} mirrored")
            except TimeoutError as exc:
                result.note = "; ".join(filter(None, [result.note, f"new topic NOT mirrored: {exc}"]))
                log(f"    new topic NOT mirrored: {exc}")
            else:
                result.pickup_s = time.perf_counter() - t_new
                log(f"    new topic mirrored after {result.pickup_s:.1f} s "
                    f"(refresh.topics.interval.seconds={REFRESH_S})")
        if "checkpoint" in phases:
            trickle.running.clear()
            # the translation of the history's end differs from that of 0 (the position each run starts
            # from); a second try (after a cycle cut in two by the commit) goes back to 0 and forth again
            try:
                for attempt in range(2):
                    if attempt:
                        data.commit(groups, 0)
                        time.sleep(65)  # one emit.checkpoints.interval.seconds (60): the groups at 0 again
                    cycle = checkpoint_cycle(b, alias, data, groups, data.history, args.checkpoint_timeout,
                                             running)
                    if cycle < 30:  # a cycle of 60 s intervals cut in two by the commit shows as ~60 s
                        break
            except TimeoutError as exc:  # reported with the engine's other figures, not the end of the run
                result.note = "; ".join(filter(None, [result.note, f"checkpoint cycle NOT complete: {exc}"]))
                log(f"    checkpoint cycle NOT complete: {exc}")
            else:
                result.checkpoint_cycle_s = cycle
                log(f"    checkpoint cycle over {groups} groups: {cycle:.2f} s")
        result.peak_rss_mib = running.peak_rss_kb() / 1024
        log(f"    peak RSS over the phases: {result.peak_rss_mib:.0f} MiB")
        watch.sample()
        result.load_peak = watch.peak
        if result.load_peak > args.max_load:
            result.note = "; ".join(filter(None, [result.note, f"load {result.load_peak:.1f} > {args.max_load}"]))
    finally:
        trickle.running.clear()
        running.stop()
        shutil.copy(running.log_path, args.out / running.log_path.name)  # the state directory goes at the end
    return result


def settle_disk() -> float:
    """Write every dirty page of this machine to disk before an engine starts; returns the seconds it took.

    Both clusters share one disk here, and a broker makes each new partition with a few fsyncs
    (its ``partition.metadata`` and leader-epoch checkpoint), which on ext4 also wait for the data
    the journal orders before them. A 4-KB write and fsync takes 0.9 ms on this idle disk and
    2.3-5.9 ms on average (up to 60 ms) while an engine copies 8,000 partitions, so B's pace of
    making partitions depends on what the disk is writing. The sync makes sure no engine's run
    waits on what the data set or the previous run left to write back. (It found 0.0-0.2 s of
    work before each run on 2026-11-29: the slower partition making during mirrorline's copies
    comes from writes during the run, not before it.)"""
    started = time.monotonic()
    os.sync()
    return time.monotonic() - started


def drop_copies(b: str, alias: str, b_data: Path, timeout: float = 300.0) -> None:
    """Delete a finished run's remote topics on B and wait until B has let go of their files.

    Two engines' copies of 8,000 partitions took B past this machine's 20,000 open files (each
    partition keeps its log and index files open) and it stopped accepting connections; each run
    starts from the same B anyway (a fresh alias). The broker deletes in two steps, both after the
    DeleteTopics answer: it renames each partition's directory ``*-delete`` as it applies the
    deletion, then removes the files ``file.delete.delay.ms`` (60 s) later. So the next engine
    starts only once no directory of ``alias``'s topics is left, renamed or not. (Waiting for
    ``*-delete`` directories alone missed the first step: right after DeleteTopics there were none
    yet, and B then removed 8,000 partitions' files during the next engine's first minute. That
    stalled a copy that starts at once, mirrorline's, more than MM2's, which starts copying after
    about a minute: mirrorline took 97-112 s after MM2 against 45-46 s after itself.)"""
    dropped = scale_kit.delete_topics_with_prefix(b, f"{alias}.")
    started = time.monotonic()
    deadline = started + timeout
    while (pending := sum(1 for _ in b_data.glob(f"{glob.escape(alias)}.*"))) and time.monotonic() < deadline:
        time.sleep(2)
    left = f"; {pending} partition directories still on disk after {timeout:.0f} s" if pending else ""
    log(f"    deleted {alias}'s {dropped} topics on B; their files gone after "
        f"{time.monotonic() - started:.0f} s{left}")


def build_env(engine: str, args) -> dict[str, str] | None:
    """``mirrorline-before`` runs the build at ``--before-pythonpath`` (this worktree's without it), with
    ``--before-env`` set; the others this worktree's."""
    if engine != "mirrorline-before":
        return None
    extra = dict(item.split("=", 1) for item in args.before_env)
    return {**mirrorline_env(args.before_pythonpath), **extra}


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


# -- distributed recovery --------------------------------------------------------------------

def connector_config(alias: str, a: str, b: str, data: DataSet, tasks: int) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": alias, "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": a, "target.cluster.bootstrap.servers": b,
            "topics": f"{re.escape(data.prefix)}t.*", "tasks.max": str(tasks), "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1", "refresh.topics.interval.seconds": str(REFRESH_S)}


def _rest(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def recovery(engine: str, alias: str, a: str, b: str, data: DataSet, args, tmp: Path) -> float:
    """Seconds from SIGKILL of one of three workers until every task is RUNNING on a live worker."""
    from support.distributed import free_port

    group = f"bench-{alias}-{engine}"
    workers: list[tuple[Engine, str]] = []
    try:
        for i in range(3):
            port = free_port()
            props = tmp / f"{group}-{i}.properties"
            props.write_text("\n".join(f"{k}={v}" for k, v in {
                "bootstrap.servers": b, "group.id": group, "listeners": f"http://127.0.0.1:{port}",
                "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
                "status.storage.topic": f"{group}-status", "config.storage.replication.factor": "1",
                "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
                "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
                "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}.items()) + "\n")
            if engine == "mm2":
                command = [scale_kit.java_executable(), "-Xms256M", "-Xmx1G", "-cp", f"{resolve_mm2_classpath()}/*",
                           "org.apache.kafka.connect.cli.ConnectDistributed", str(props)]
            else:
                command = [scale_kit.sys.executable, "-m", "mirrorline.cli.main", "distributed", str(props)]
            workers.append((Engine(command, tmp / f"{group}-{i}.log", name=f"{engine} worker {i}",
                                   env=build_env(engine, args)),
                            f"http://127.0.0.1:{port}"))
        url = workers[0][1]
        wait_until(lambda: _rest(f"{url}/connectors")[0] == 200, 180, 1.0, workers[0][0], f"{engine} worker REST")
        name = f"{alias}-source"
        wait_until(lambda: _rest(f"{url}/connectors", "POST", {"name": name, "config": connector_config(
            alias, a, b, data, args.recovery_tasks)})[0] in (201, 409), 120, 2.0, None, "connector created")

        def status() -> dict | None:
            code, body = _rest(f"{url}/connectors/{name}/status")
            return body if code == 200 and isinstance(body, dict) else None

        def all_running(exclude: str | None = None):
            body = status()
            tasks = (body or {}).get("tasks", [])
            return body if len(tasks) == args.recovery_tasks and all(
                t["state"] == "RUNNING" and t["worker_id"] != exclude for t in tasks) else None

        body = wait_until(all_running, args.timeout, 1.0, None, f"{engine}: all tasks RUNNING")
        # kill a worker that runs tasks, other than the one asked for statuses
        by_port = {u.rsplit(":", 1)[1]: w for w, u in workers[1:]}
        victim_id = next((t["worker_id"] for t in body["tasks"] if t["worker_id"].rsplit(":", 1)[1] in by_port), None)
        if victim_id is None:
            raise RuntimeError(f"{engine}: every task runs on the first worker; nothing to kill")
        victim = (by_port[victim_id.rsplit(":", 1)[1]], None)
        t0 = time.perf_counter()
        victim[0].kill()
        wait_until(lambda: all_running(exclude=victim_id), args.timeout, 0.5, None,
                   f"{engine}: tasks RUNNING again after SIGKILL")
        return time.perf_counter() - t0
    finally:
        for worker, _ in workers:
            worker.stop()


# -- report --------------------------------------------------------------------------------

COLUMNS = [  # (heading, attribute, format)
    ("copy s", "copy_s", "{:.1f}"), ("CPU s", "copy_cpu_s", "{:.1f}"), ("RSS MiB", "peak_rss_mib", "{:.0f}"),
    ("idle CPU s/min", "idle_cpu_s_per_min", "{:.2f}"), ("steady idle", "steady_idle_cpu_s_per_min", "{:.2f}"),
    ("conn A", None, None), ("conn B", None, None),
    ("new topic s", "pickup_s", "{:.1f}"), ("ckpt cycle s", "checkpoint_cycle_s", "{:.2f}"),
    ("/metrics KiB", "metrics_bytes", None), ("series", "metrics_series", "{}"),
    ("scrape ms", "metrics_scrape_s", None), ("recovery s", "recovery_s", "{:.1f}"), ("load", "load_peak", "{:.1f}"),
]


def cell(run: Run, heading: str, attribute: str | None, fmt: str | None) -> str:
    if heading.startswith("conn "):
        value = run.connections.get(heading[-1])
        return "-" if value is None else str(value)
    value = getattr(run, attribute)
    if value is None:
        return "-"
    if attribute == "metrics_bytes":
        return f"{value / 1024:.0f}"
    if attribute == "metrics_scrape_s":
        return f"{value * 1000:.0f}"
    return fmt.format(value)


def print_table(runs: list[Run]) -> None:
    head = f"{'partitions':>10} {'groups':>6} {'engine':<17} " + " ".join(f"{h:>{max(len(h), 6)}}" for h, _, _ in COLUMNS)
    log(head)
    log("-" * len(head))
    for run in runs:
        log(f"{run.partitions:>10} {run.groups:>6} {run.engine:<17} "
            + " ".join(f"{cell(run, h, a, f):>{max(len(h), 6)}}" for h, a, f in COLUMNS)
            + (f"  ({run.note})" if run.note else ""))
    ratios = []
    rounds = max((run.round for run in runs), default=1)
    for run in runs:
        base = next((r for r in runs if r.engine == "mm2" and r.partitions == run.partitions
                     and r.groups == run.groups and r.round == run.round), None)
        if run.engine == "mm2" or base is None:
            continue
        parts = ratio_parts([run], [base])
        where = f" (round {run.round})" if rounds > 1 else ""
        ratios.append(f"  {run.partitions:>6} partitions, {run.groups:>3} groups{where}: {run.engine} / MM2: "
                      f"{', '.join(parts)}")
    if rounds > 1:  # the engines ran in both orders: the ratio of the means over both
        for key in sorted({(r.partitions, r.groups, r.engine) for r in runs if r.engine != "mm2"}):
            mine = [r for r in runs if (r.partitions, r.groups, r.engine) == key]
            theirs = [r for r in runs if (r.partitions, r.groups, r.engine) == (key[0], key[1], "mm2")]
            if theirs:
                ratios.append(f"  {key[0]:>6} partitions, {key[1]:>3} groups (both orders): {key[2]} / MM2: "
                              f"{', '.join(ratio_parts(mine, theirs))}")
    if ratios:
        log("")
        log("ratios (mirrorline / MM2, lower is better; targets at 8,000 partitions and 500 groups: copy time "
            "<= 0.5x, RSS <= 0.2x, idle CPU <= 0.3x):")
        for line in ratios:
            log(line)


def ratio_parts(mine: list[Run], theirs: list[Run]) -> list[str]:
    """"copy 0.50x"-style ratios of the means of ``mine`` to those of ``theirs``, for each figure both have."""
    parts = []
    for label, attribute in (("copy", "copy_s"), ("RSS", "peak_rss_mib"), ("idle CPU", "idle_cpu_s_per_min"),
                             ("steady idle CPU", "steady_idle_cpu_s_per_min"), ("CPU", "copy_cpu_s")):
        ours = [getattr(r, attribute) for r in mine if getattr(r, attribute)]
        others = [getattr(r, attribute) for r in theirs if getattr(r, attribute)]
        if ours and others:
            parts.append(f"{label} {(sum(ours) / len(ours)) / (sum(others) / len(others)):.2f}x")
    return parts


PLOTS = [  # (file, title, attribute, y label)
    ("scale-copy-seconds.png", "Time to copy all history", "copy_s", "seconds"),
    ("scale-copy-cpu.png", "CPU-seconds until history copied", "copy_cpu_s", "CPU-seconds"),
    ("scale-peak-rss.png", "Peak RSS", "peak_rss_mib", "MiB"),
    ("scale-idle-cpu.png", "CPU per idle minute", "idle_cpu_s_per_min", "CPU-seconds per minute"),
    ("scale-connections.png", "TCP connections (A + B)", "connections", "connections"),
    ("scale-new-topic.png", "Time to mirror a new topic (refresh every 10 s)", "pickup_s", "seconds"),
    ("scale-checkpoint-cycle.png", "One checkpoint cycle over all groups", "checkpoint_cycle_s", "seconds"),
    ("scale-metrics-bytes.png", "/metrics size", "metrics_bytes", "KiB"),
    ("scale-metrics-scrape.png", "/metrics scrape time", "metrics_scrape_s", "ms"),
    ("scale-recovery.png", "Distributed: SIGKILL of 1 of 3 workers until every task runs", "recovery_s", "seconds"),
]


def plot(runs: list[Run], out: Path) -> list[Path]:
    """One PNG per figure: the figure against partition count, one line per engine (and group count)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    # one group count per engine and size (--paired, or a single count): one line per engine
    one_count = all(len({r.groups for r in runs if (r.engine, r.partitions) == (run.engine, run.partitions)}) == 1
                    for run in runs)
    for filename, title, attribute, unit in PLOTS:
        lines: dict[str, list[tuple[int, float]]] = {}
        for run in runs:
            value = getattr(run, attribute)
            if attribute == "connections":
                value = sum(value.values()) if value else None
            elif attribute == "metrics_bytes" and value is not None:
                value = value / 1024
            elif attribute == "metrics_scrape_s" and value is not None:
                value = value * 1000
            if value is None:
                continue
            label = run.engine if one_count or (attribute != "checkpoint_cycle_s" and len({r.groups for r in runs}) == 1) \
                else f"{run.engine}, {run.groups} groups"
            if attribute == "recovery_s":
                label = run.engine
            lines.setdefault(label, []).append((run.partitions, value))
        if not lines:
            continue
        figure, axes = plt.subplots(figsize=(6.4, 4.2))
        for label, points in sorted(lines.items()):
            by_size: dict[int, list[float]] = {}
            for partitions, value in points:  # both orders (--both-orders): their mean
                by_size.setdefault(partitions, []).append(value)
            points = sorted((p, sum(vs) / len(vs)) for p, vs in by_size.items())
            axes.plot([p for p, _ in points], [v for _, v in points], marker="o",
                      linestyle="--" if label.startswith("mm2") else "-", label=label)
        axes.set_xscale("log")
        axes.set_xlabel("partitions (log scale)")
        axes.set_ylabel(unit)
        axes.set_title(title)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
        figure.tight_layout()
        path = out / filename
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


# -- main ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,8000", help="comma list: 100, 1000, 8000 or TOPICSxPARTITIONS")
    parser.add_argument("--groups", default="1,50,500", help="comma list of consumer group counts")
    parser.add_argument("--engines", default="mm2,mirrorline", help=f"comma list of {', '.join(ENGINES)}")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max of the flow (both engines)")
    parser.add_argument("--recovery-tasks", type=int, default=6, help="tasks.max of the distributed connector")
    parser.add_argument("--history", type=int, default=100, help="records per partition before the engines start")
    parser.add_argument("--record-size", type=int, default=300)
    parser.add_argument("--trickle", type=float, default=10.0, help="records per second over all partitions")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up one phase after this many seconds")
    parser.add_argument("--checkpoint-timeout", type=float, default=240.0)
    parser.add_argument("--metrics-level", default=None, choices=("partition", "topic"),
                        help="mirrorline's replication.metrics.level (default: the flow's default, partition)")
    parser.add_argument("--prop", action="append", default=[], help="extra mm2.properties line (both engines)")
    parser.add_argument("--before-pythonpath", default=None,
                        help="the engine mirrorline-before runs the build found here (a directory holding a "
                             "`mirrorline` package, see the README): before/after comparisons in one sitting")
    parser.add_argument("--before-env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment variable for the mirrorline-before engine only (repeatable), e.g. "
                             "MIRRORLINE_HEAP_TRIM_INTERVAL_MS=0 to compare one setting on the same build")
    parser.add_argument("--py-spy", action="store_true",
                        help="record mirrorline's stacks during the idle phase with py-spy (pip install py-spy)")
    parser.add_argument("--both-orders", action="store_true",
                        help="run the engines a second time in reverse order (each size and group count), so "
                             "neither gains from going second on warm clusters; ratios per round and over both")
    parser.add_argument("--paired", action="store_true",
                        help="the i-th size runs with the i-th group count only (e.g. --sizes 100,1000,8000 "
                             "--groups 1,50,500), instead of every size with every count")
    parser.add_argument("--read-ahead-kb", type=int, default=None,
                        help="set the read-ahead of the block device holding the clusters' data to this many KiB "
                             "for the run and restore it after (needs root; a machine setting, the brokers keep "
                             "Kafka's defaults); 128 is Linux's default, see the README")
    parser.add_argument("--max-load", type=float, default=DEFAULT_MAX_LOAD)
    parser.add_argument("--allow-load", action="store_true", help="measure even above --max-load (flagged)")
    parser.add_argument("--out", type=Path, default=Path("bench-scale-out"), help="where plots and JSON go")
    args = parser.parse_args(argv)
    sizes = [Size.parse(s) for s in args.sizes.split(",") if s]
    groups_list = [int(g) for g in args.groups.split(",") if g]
    engines = [e for e in args.engines.split(",") if e]
    phases = {p for p in args.phases.split(",") if p}
    unknown = [e for e in engines if e not in ENGINES] + sorted(phases - set(PHASES))
    if "mirrorline-before" in engines and not (args.before_pythonpath or args.before_env):
        parser.error("engine mirrorline-before needs --before-pythonpath or --before-env")
    malformed = [item for item in args.before_env if "=" not in item or not item.split("=", 1)[0]]
    if malformed:
        parser.error(f"--before-env takes NAME=VALUE, not {', '.join(map(repr, malformed))}")
    if unknown:
        parser.error(f"unknown engine or phase: {', '.join(unknown)}")
    if args.paired and len(groups_list) != len(sizes):
        parser.error(f"--paired needs as many group counts as sizes ({len(sizes)}), not {len(groups_list)}")
    phases.add("copy")
    refuse_if_loaded(args.max_load, args.allow_load)
    stop_cleanly_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)

    restore_read_ahead = None
    if args.read_ahead_kb is not None:
        if args.read_ahead_kb <= 0:
            parser.error(f"--read-ahead-kb must be positive, not {args.read_ahead_kb}")
        # before the state directory exists, so a refusal leaves nothing behind (it lives under the temp dir)
        restore_read_ahead = set_read_ahead(Path(tempfile.gettempdir()), args.read_ahead_kb)
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-scale-"))
    manager = LocalKafka(tmp / "kafka", _base_port())
    runs: list[Run] = []
    count = 0
    try:
        log(f"Apache Kafka {KAFKA_VERSION}, broker heap '{os.environ['MIRRORLINE_KAFKA_HEAP']}'; "
            f"{load_banner(args.max_load)}; state under {tmp}")
        set_for_run = (f"; set for this run by --read-ahead-kb, {restore_read_ahead[1]} KiB before"
                       if restore_read_ahead is not None else "")
        log(read_ahead_note(tmp, max(size.total for size in sizes)) + set_for_run)
        resolve_kafka_classpath()
        if "mm2" in engines:
            resolve_mm2_classpath()
        clusters = manager.start(["A", "B"])
        a, b = (c.spec.bootstrap_servers for c in clusters)
        ports = {"A": int(a.rsplit(":", 1)[1]), "B": int(b.rsplit(":", 1)[1])}
        log(f"clusters A ({a}) and B ({b}) started")
        for index, size in enumerate(sizes):
            data = DataSet(a, size, args.history, args.record_size, f"{index}{uuid.uuid4().hex[:3]}")
            data.create()
            size_groups = [groups_list[index]] if args.paired else groups_list
            for groups in size_groups:
                data.commit(groups, 0)
            trickle = Trickle(a, data.partitions, args.trickle)
            try:
                for groups in size_groups:
                    orders = [engines, engines[::-1]] if args.both_orders else [engines]
                    for round_number, order in enumerate(orders, 1):
                        for engine in order:
                            count += 1
                            alias = f"S{count}"
                            synced_s = settle_disk()
                            log(f"[{size.name}, {groups} groups, round {round_number}] {engine} as {alias}; "
                                f"{load_banner(args.max_load)}; dirty pages written back in {synced_s:.1f} s")
                            run = run_engine(engine, alias, a, b, ports, data, groups, args, phases, trickle, tmp)
                            run.round = round_number
                            runs.append(run)
                            drop_copies(b, alias, clusters[1].data_dir)
                if "recovery" in phases:
                    for engine in engines:
                        count += 1
                        settle_disk()
                        seconds = recovery(engine, f"S{count}", a, b, data, args, tmp)
                        drop_copies(b, f"S{count}", clusters[1].data_dir)
                        log(f"[{size.name}] {engine} distributed, 3 workers: tasks RUNNING again {seconds:.1f} s "
                            f"after SIGKILL of one")
                        for run in runs:
                            if run.engine == engine and run.partitions == size.total:
                                run.recovery_s = seconds
            finally:
                trickle.close()
    finally:
        manager.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if restore_read_ahead is not None:
            restore_read_ahead[0].write_text(str(restore_read_ahead[1]))
        (args.out / "scale-results.json").write_text(json.dumps([asdict(r) for r in runs], indent=2))

    log("")
    log(f"=== mirrorline vs Java MirrorMaker 2 {KAFKA_VERSION} at scale: {args.history} records x "
        f"{args.record_size} B per partition, tasks.max={args.tasks} ===")
    log(load_banner(args.max_load))
    print_table(runs)
    for path in plot(runs, args.out):
        log(f"plot: {path}")
    flagged = [r for r in runs if "load " in r.note]
    if flagged:
        log(f"{len(flagged)} run(s) were taken above load {args.max_load}: re-run them on a quiet machine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
