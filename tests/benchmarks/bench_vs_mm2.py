"""Benchmark: mirrorline side by side with Java MirrorMaker 2 and the brokers' own ceiling, in one run.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_vs_mm2.py --quick          # a few minutes
    .venv/bin/python tests/benchmarks/bench_vs_mm2.py                  # issue #13's sizes (~20-30 min on 2 cores)
    .venv/bin/python tests/benchmarks/bench_vs_mm2.py --workloads 1k --tasks 2 --engines mm2,mirrorline

What one run does:

1. Starts two fresh local clusters A and B (Kafka's defaults, temporary state, random ports).
2. For each workload (``1k``: 1M x 1000 B; ``100b``: 10M x 100 B; ``zstd``: 1M x 1000 B of
   compressible text written with ``compression.type=zstd``; 12 partitions each; ``--quick``
   divides the record counts by 10), fills a topic on A with Kafka's ``ProducerPerformance``.
3. Measures the brokers' ceiling on that data: Kafka's ``ConsumerPerformance`` reading the
   topic from A while ``ProducerPerformance`` writes the same count and size to B, at the
   same time; the ceiling is bytes / the slower of the two.
4. For each ``tasks.max`` and each engine, mirrors the topic to B with the *same*
   ``mm2.properties``: Java MM2 in dedicated mode (``connect-mirror`` at the brokers' Kafka
   version, fetched from Maven Central and cached) and ``mirrorline mm2``. Each run uses a
   fresh source alias (``S1``, ``S2``, ...), so every run writes its own remote topic and
   internal topics and none starts from another's offsets. The wall time runs from launch
   until B's copy holds every record. CPU-seconds (utime + stime) and peak RSS (``VmHWM``)
   of the engine process and its children come from ``/proc``.
5. Latency (``--latency``, default on): for each engine, an empty topic is mirrored while a
   producer writes 1000 B records at a fixed 10 MB/s for ``--latency-seconds``; a consumer
   on B computes arrival time - record timestamp (CreateTime, which both engines keep).
6. Prints one table with MB/s (1e6 bytes of record values), records/s, CPU-s, CPU-s per GB,
   peak RSS, latency p50/p99, and the ratios to MM2 and to the ceiling.

Figures depend on the machine and what else runs on it; the summary prints the core count
and load average. Compare runs only on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT / "tests", Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

warnings.filterwarnings("ignore", category=DeprecationWarning)

from confluent_kafka import Consumer, Producer  # noqa: E402

from bench_mirror import (  # noqa: E402
    Offsets,
    _base_port,
    log,
    proc_children,
    proc_cpu_seconds,
    proc_peak_rss_kb,
    proc_rss_kb,
    wait_for_leaders,
)
from mirrorline.localkafka.artifacts import (  # noqa: E402
    KAFKA_VERSION,
    java_executable,
    resolve_kafka_classpath,
    resolve_mm2_classpath,
)
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from support.kafka import create_topic  # noqa: E402

PARTITIONS = 12
POLL_INTERVAL = 0.25
#: bin/connect-mirror-maker.sh's heap.
MM2_HEAP = ["-Xms256M", "-Xmx2G"]


@dataclass(frozen=True)
class Workload:
    """One data set to mirror: how many records, how big, and the source's compression."""

    records: int
    size: int
    compression: str = "none"
    #: the source producer's batch.size: large by default (fast fills); Kafka's own 16384 shows the
    #: batch-forwarding path with the small batches most producers write
    producer_batch_size: int = 1_000_000

    @property
    def name(self) -> str:
        count = f"{self.records / 1e6:g}M" if self.records >= 1_000_000 else f"{self.records / 1e3:g}k"
        return (f"{count} x {self.size} B" + (f" {self.compression} text" if self.compression != "none" else "")
                + (f" {self.producer_batch_size // 1024}K batches" if self.producer_batch_size < 1_000_000 else ""))

    def scaled(self, factor: float) -> Workload:
        return Workload(max(PARTITIONS, int(self.records * factor)), self.size, self.compression,
                        self.producer_batch_size)

    @property
    def value_bytes(self) -> int:
        return self.records * self.size


WORKLOADS = {
    "1k": Workload(1_000_000, 1000),
    "100b": Workload(10_000_000, 100),
    "zstd": Workload(1_000_000, 1000, "zstd"),
    "1k-16k": Workload(1_000_000, 1000, producer_batch_size=16384),
}


@dataclass
class Result:
    """The figures of one engine on one workload."""

    engine: str
    workload: Workload
    tasks: int | None
    wall_s: float
    cpu_s: float | None = None
    peak_rss_kb: int | None = None
    note: str = ""
    latency_ms: dict[str, float] = field(default_factory=dict)
    #: seconds from launch until the first record reached B (start-up: processes, topics, tasks)
    first_s: float | None = None

    @property
    def steady_mb_s(self) -> float | None:
        """MB/s from the first record on B to the last (the copy alone, start-up excluded)."""
        if self.first_s is None or self.wall_s <= self.first_s:
            return None
        return self.workload.value_bytes / 1e6 / (self.wall_s - self.first_s)

    @property
    def mb_s(self) -> float:
        return self.workload.value_bytes / 1e6 / self.wall_s

    @property
    def records_s(self) -> float:
        return self.workload.records / self.wall_s


# -- Kafka tools ---------------------------------------------------------------------------

def kafka_tool(main_class: str, *args: str, heap: str = "-Xmx512m") -> list[str]:
    """The command line of one of Kafka's tools from the cached broker jars."""
    return [java_executable(), heap, "-cp", f"{resolve_kafka_classpath()}/*", main_class, *args]


def payload_file(tmp: Path, size: int) -> Path:
    """Lines of compressible text, each ``size`` bytes, for ProducerPerformance's ``--payload-file``."""
    import random
    rng = random.Random(13)
    words = ["mirror", "kafka", "offset", "partition", "record", "broker", "topic", "replica", "cluster",
             "consumer", "producer", "checkpoint", "heartbeat", "latency", "throughput", "order"]
    path = tmp / f"payload-{size}.txt"
    lines = []
    for _ in range(1000):
        text = ""
        while len(text) < size:
            text += rng.choice(words) + (" " if rng.random() < 0.8 else f" {rng.randrange(10 ** 6)} ")
        lines.append(text[:size])
    path.write_text("\n".join(lines))
    return path


def fill(bootstrap: str, topic: str, workload: Workload, tmp: Path) -> float:
    """Write the workload's records to ``topic`` with ProducerPerformance; returns seconds taken."""
    payload = (["--payload-file", str(payload_file(tmp, workload.size))] if workload.compression != "none"
               else ["--record-size", str(workload.size)])
    cmd = kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", bootstrap,
                     "--topic", topic, "--num-records", str(workload.records), *payload,
                     "--throughput", "-1", "--reporting-interval", "60000", "--command-property",
                     "acks=1", "linger.ms=20", f"batch.size={workload.producer_batch_size}",
                     f"compression.type={workload.compression}",
                     "buffer.memory=268435456")
    t = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ProducerPerformance failed ({result.returncode}): {result.stderr[-2000:]}")
    return time.perf_counter() - t


def ceiling(a: str, b: str, topic: str, workload: Workload, tmp: Path) -> Result:
    """Kafka's consumer perf tool on A and producer perf tool to B, concurrently, on the same volume."""
    sink = f"ceiling-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topic(b, sink, PARTITIONS))
    consume = kafka_tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", a, "--topic", topic,
                         "--messages", str(workload.records), "--timeout", "60000")
    payload = (["--payload-file", str(payload_file(tmp, workload.size))] if workload.compression != "none"
               else ["--record-size", str(workload.size)])
    produce = kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", b, "--topic", sink,
                         "--num-records", str(workload.records), *payload, "--throughput", "-1",
                         "--reporting-interval", "60000", "--command-property", "acks=all",
                         f"compression.type={workload.compression}", "linger.ms=5", "batch.size=262144")
    walls: dict[str, float] = {}

    def run(name: str, cmd: list[str]) -> None:
        t = time.perf_counter()
        result = subprocess.run(cmd, capture_output=True, text=True)
        walls[name] = time.perf_counter() - t
        if result.returncode != 0:
            walls[name + "-error"] = 1
            log(f"  {name} perf tool failed: {result.stderr[-1000:]}")

    threads = [threading.Thread(target=run, args=("consumer", consume)),
               threading.Thread(target=run, args=("producer", produce))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # JVM start-up (~1 s each) is inside both walls, as it is inside the engines' walls.
    return Result("brokers' ceiling", workload, None, max(walls["consumer"], walls["producer"]),
                  note=f"consumer {walls['consumer']:.1f} s, producer {walls['producer']:.1f} s")


# -- engines -------------------------------------------------------------------------------

def properties(alias: str, a: str, b: str, topic: str, tasks: int) -> str:
    """One mm2.properties both engines run unchanged."""
    return f"""# written by tests/benchmarks/bench_vs_mm2.py
clusters = {alias}, B
{alias}.bootstrap.servers = {a}
B.bootstrap.servers = {b}
{alias}->B.enabled = true
{alias}->B.topics = {topic}
{alias}->B.tasks.max = {tasks}
{SINGLE_BROKER_MM2_PROPERTIES}"""


#: ``mirrorline mm2 --processes N`` for the mirrorline runs (``--mirrorline-processes``).
MIRRORLINE_PROCESSES = 1


def engine_command(engine: str, props: Path) -> list[str]:
    """How to launch an engine on a properties file."""
    if engine == "mm2":
        return [java_executable(), *MM2_HEAP, "-cp", f"{resolve_mm2_classpath()}/*",
                "org.apache.kafka.connect.mirror.MirrorMaker", str(props)]
    extra = ["--processes", str(MIRRORLINE_PROCESSES)] if MIRRORLINE_PROCESSES > 1 else []
    return [sys.executable, "-m", "mirrorline.cli.main", "mm2", str(props), *extra]


class Engine:
    """One running engine process; its CPU and peak RSS include its children's."""

    def __init__(self, engine: str, props: Path, log_path: Path):
        self.engine, self.log_path = engine, log_path
        with open(log_path, "w") as out:
            self.proc = subprocess.Popen(engine_command(engine, props), cwd=REPO_ROOT, stdout=out,
                                         stderr=subprocess.STDOUT)

    def pids(self) -> list[int]:
        return [self.proc.pid, *proc_children(self.proc.pid)]

    def cpu_s(self) -> float:
        return sum(proc_cpu_seconds(p) for p in self.pids())

    def peak_rss_kb(self) -> int:
        return sum(proc_peak_rss_kb(p) for p in self.pids())

    def rss_kb(self) -> int:
        return sum(proc_rss_kb(p) for p in self.pids())

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.engine} exited with {self.proc.returncode}:\n"
                               f"{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Runs:
    """Hands out fresh source aliases, so that no run reuses another's remote topic or offsets."""

    def __init__(self):
        self.count = 0

    def alias(self) -> str:
        self.count += 1
        return f"S{self.count}"


def mirror(engine: str, a: str, b: str, topic: str, workload: Workload, tasks: int, runs: Runs,
           tmp: Path, timeout: float) -> Result:
    """Mirror a filled topic with one engine; the wall ends when B's copy holds every record."""
    alias = runs.alias()
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, topic, tasks))
    offsets = Offsets(b)
    t0 = time.perf_counter()
    first = None
    running = Engine(engine, props, tmp / f"{alias}-{engine}.log")
    try:
        remote = f"{alias}.{topic}"
        while (copied := sum(offsets.ends(remote, PARTITIONS).values())) < workload.records:
            if first is None and copied:
                first = time.perf_counter() - t0
            running.check_alive()
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{engine}: B holds {sum(offsets.ends(remote, PARTITIONS).values())} of "
                                   f"{workload.records} records after {timeout:.0f} s")
            time.sleep(POLL_INTERVAL)
        wall = time.perf_counter() - t0
        return Result(engine, workload, tasks, wall, running.cpu_s(), running.peak_rss_kb(), first_s=first)
    finally:
        running.stop()
        offsets.close()


def latency(engine: str, a: str, b: str, runs: Runs, tmp: Path, seconds: float, mb_per_s: float,
            tasks: int) -> dict[str, float]:
    """p50/p99 of arrival on B minus CreateTime, producing 1000 B records to A at a fixed rate."""
    alias = runs.alias()
    topic = f"lat-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topic(a, topic, PARTITIONS))
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, topic, tasks))
    running = Engine(engine, props, tmp / f"{alias}-{engine}-latency.log")
    consumer = Consumer({"bootstrap.servers": b, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    producer = Producer({"bootstrap.servers": a, "linger.ms": 0, "acks": "1"})
    try:
        remote = f"{alias}.{topic}"
        # Warm up: the engine has started and created the remote topic once a first record arrives.
        consumer.subscribe([remote])
        deadline = time.monotonic() + 120
        warm = False
        while not warm:
            running.check_alive()
            producer.produce(topic, b"warm-up", partition=0)
            producer.flush(5)
            end = time.monotonic() + 2
            while time.monotonic() < end and not warm:
                message = consumer.poll(0.2)
                warm = message is not None and message.error() is None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{engine}: nothing mirrored within 120 s")
        time.sleep(2)
        while consumer.poll(0.1) is not None:  # drain the warm-up records
            pass
        value = os.urandom(1000)
        interval = 1000 / (mb_per_s * 1e6)
        total = int(seconds / interval)
        samples: list[float] = []
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set() or len(samples) < total:
                message = consumer.poll(0.2)
                if message is None:
                    if stop.is_set() and time.monotonic() > drain_deadline:
                        return
                    continue
                if message.error() is None and message.value() == value:
                    samples.append(time.time() * 1000 - message.timestamp()[1])

        drain_deadline = float("inf")
        reader = threading.Thread(target=consume)
        reader.start()
        start = time.perf_counter()
        for i in range(total):
            due = start + i * interval
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            producer.produce(topic, value, partition=i % PARTITIONS)
            producer.poll(0)
        producer.flush(30)
        drain_deadline = time.monotonic() + 30
        stop.set()
        reader.join()
        if len(samples) < total * 0.99:
            log(f"  warning: {engine} latency run saw {len(samples)} of {total} records")
        samples.sort()
        return {"p50": samples[len(samples) // 2], "p99": samples[int(len(samples) * 0.99) - 1],
                "n": len(samples)} if samples else {}
    finally:
        consumer.close()
        running.stop()


#: Topic configs of the soak topic (copied to its remote topic by both engines). Not a broker setting:
#: a 10-minute run at 50 MB/s writes 30 GB per cluster, and Kafka's 7-day retention would keep it all on
#: this machine's disk; 64 MB segments and 256 MB per partition let retention delete old data (the
#: brokers check every log.retention.check.interval.ms, 5 minutes by default).
SOAK_TOPIC_CONFIG = {"retention.bytes": str(256 * 1024 * 1024), "segment.bytes": str(64 * 1024 * 1024)}


def soak(engine: str, a: str, b: str, runs: Runs, tmp: Path, seconds: float, tasks: int,
         mb_per_s: float) -> dict[str, float]:
    """RSS of an engine over a long run: ProducerPerformance writes 1000 B records to A at ``mb_per_s``
    for ``seconds`` while the engine mirrors them; RSS is sampled every 10 s. The rate is bounded by
    the disk: until the brokers' first retention check, both clusters keep everything written."""
    alias = runs.alias()
    topic = f"soak-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topic(a, topic, PARTITIONS, SOAK_TOPIC_CONFIG))
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, topic, tasks))
    running = Engine(engine, props, tmp / f"{alias}-{engine}-soak.log")
    writer = subprocess.Popen(kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", a,
                                         "--topic", topic, "--num-records", str(10 ** 10), "--record-size", "1000",
                                         "--throughput", str(int(mb_per_s * 1000)), "--reporting-interval", "600000",
                                         "--command-property", "acks=1", "linger.ms=5", "batch.size=262144"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples: list[tuple[float, int]] = []
    offsets = Offsets(b)
    try:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            running.check_alive()
            time.sleep(10)
            samples.append((time.monotonic() - start, running.rss_kb()))
        mirrored = sum(offsets.ends(f"{alias}.{topic}", PARTITIONS).values())
    finally:
        writer.kill()
        writer.wait()
        offsets.close()
        running.stop()
    rss = [kb / 1024 for _, kb in samples]
    after_warmup = [kb / 1024 for t, kb in samples if t >= min(120.0, seconds / 2)]
    log(f"  soak {engine}: RSS MiB every 10 s: {' '.join(f'{r:.0f}' for r in rss)}")
    return {"seconds": seconds, "offered_mb_s": mb_per_s, "mirrored_mb": mirrored * 1000 / 1e6, "first": rss[0], "max": max(rss),
            "last": rss[-1], "warm_min": min(after_warmup), "warm_max": max(after_warmup)}


# -- report --------------------------------------------------------------------------------

def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}x" if value and base else "-"


def print_table(results: list[Result], latencies: dict[str, dict[str, float]]) -> None:
    """One row per engine and run, with the ratios to MM2 at the same workload/tasks and to the ceiling."""
    header = (f"{'workload':<22} {'engine':<17} {'tasks':>5} {'MB/s':>7} {'rec/s':>10} {'CPU s':>7} "
              f"{'CPU s/GB':>8} {'RSS MiB':>8} {'vs MM2':>7} {'vs ceil':>8} {'CPU/GB vs MM2':>13} {'RSS vs MM2':>10}")
    log(header)
    log("-" * len(header))
    for r in results:
        base = next((m for m in results if m.engine == "mm2" and m.workload == r.workload and m.tasks == r.tasks), None)
        ceil = next((c for c in results if c.tasks is None and c.workload == r.workload), None)
        cpu_gb = r.cpu_s / (r.workload.value_bytes / 1e9) if r.cpu_s is not None else None
        base_cpu_gb = base.cpu_s / (base.workload.value_bytes / 1e9) if base and base.cpu_s else None
        rss = r.peak_rss_kb / 1024 if r.peak_rss_kb else None
        log(f"{r.workload.name:<22} {r.engine:<17} {r.tasks if r.tasks else '':>5} {r.mb_s:>7.1f} "
            f"{r.records_s:>10,.0f} {r.cpu_s if r.cpu_s is not None else float('nan'):>7.1f} "
            f"{cpu_gb if cpu_gb is not None else float('nan'):>8.1f} {rss if rss else float('nan'):>8.0f} "
            f"{ratio(r.mb_s, base.mb_s if base and r.tasks else None):>7} {ratio(r.mb_s, ceil.mb_s if ceil else None):>8} "
            f"{ratio(cpu_gb, base_cpu_gb if r.tasks else None):>13} "
            f"{ratio(r.peak_rss_kb, base.peak_rss_kb if base and r.tasks else None):>10}"
            + (f"  ({r.note})" if r.note else ""))
    if latencies:
        log("")
        log("end-to-end latency at a fixed 10 MB/s (1000 B records; arrival on B - CreateTime):")
        for engine, figures in latencies.items():
            if figures:
                log(f"  {engine:<12} p50 {figures['p50']:7.1f} ms   p99 {figures['p99']:7.1f} ms   ({figures['n']} records)")
        if latencies.get("mm2") and latencies.get("mirrorline"):
            log(f"  mirrorline p99 / MM2 p99: {latencies['mirrorline']['p99'] / latencies['mm2']['p99']:.2f}x")


def print_soak(soaks: dict[str, dict[str, float]]) -> None:
    """RSS over the soak runs: flat means the warm minimum and maximum stay close."""
    log("")
    log("RSS over a long run (1000 B records written to A at a fixed rate):")
    for engine, s in soaks.items():
        log(f"  {engine:<12} {s['seconds'] / 60:.0f} min, {s['offered_mb_s']:.0f} MB/s offered, "
            f"{s['mirrored_mb'] / s['seconds']:.1f} MB/s mirrored; "
            f"RSS first {s['first']:.0f} MiB, max {s['max']:.0f}, last {s['last']:.0f}; after warm-up "
            f"{s['warm_min']:.0f}-{s['warm_max']:.0f} MiB ({s['warm_max'] / s['warm_min'] - 1:+.1%})")


# -- main ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="record counts divided by 10 (a few minutes)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every record count (smoke runs)")
    parser.add_argument("--workloads", default="1k,1k-16k,100b,zstd",
                        help=f"comma list of {', '.join(WORKLOADS)} (empty: none, e.g. with --soak-seconds)")
    parser.add_argument("--tasks", default="1,2", help="comma list of tasks.max values (default 1,2)")
    parser.add_argument("--engines", default="mm2,mirrorline", help="comma list of mm2, mirrorline")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the brokers' ceiling")
    parser.add_argument("--no-latency", action="store_true", help="skip the fixed-rate latency runs")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="length of each latency run")
    parser.add_argument("--latency-mb-s", type=float, default=10.0, help="fixed rate of the latency runs")
    parser.add_argument("--keep-logs", default="", help="copy every engine's log into this directory")
    parser.add_argument("--timeout", type=float, default=1800, help="give up a mirror run after this many seconds")
    parser.add_argument("--soak-seconds", type=float, default=0,
                        help="also run each engine this long at full speed and report RSS over time (issue 13: 600)")
    parser.add_argument("--soak-mb-s", type=float, default=50.0,
                        help="rate the soak run writes to A (its topic keeps 256 MB per partition)")
    parser.add_argument("--mirrorline-processes", type=int, default=1,
                        help="run mirrorline as `mirrorline mm2 --processes N`")
    args = parser.parse_args(argv)
    global MIRRORLINE_PROCESSES
    MIRRORLINE_PROCESSES = args.mirrorline_processes
    engines = [e for e in args.engines.split(",") if e]
    unknown = [w for w in args.workloads.split(",") if w and w not in WORKLOADS] + [e for e in engines if e not in ("mm2", "mirrorline")]
    if unknown:
        parser.error(f"unknown workload or engine: {', '.join(unknown)}")
    tasks_values = [int(t) for t in args.tasks.split(",")]
    scale = args.scale * (0.1 if args.quick else 1.0)
    workloads = [WORKLOADS[w].scaled(scale) for w in args.workloads.split(",") if w]

    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-vs-mm2-"))
    manager = LocalKafka(tmp / "kafka", _base_port())
    results: list[Result] = []
    latencies: dict[str, dict[str, float]] = {}
    soaks: dict[str, dict[str, float]] = {}
    runs = Runs()
    try:
        log(f"Apache Kafka {KAFKA_VERSION} brokers and Java MM2 (connect-mirror {KAFKA_VERSION}); "
            f"{os.cpu_count()} cores; state under {tmp}")
        resolve_kafka_classpath()
        if "mm2" in engines:
            resolve_mm2_classpath()
        clusters = manager.start(["A", "B"])
        a, b = (c.spec.bootstrap_servers for c in clusters)
        log(f"clusters A ({a}) and B ({b}) started")
        for workload in workloads:
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            asyncio.run(create_topic(a, topic, PARTITIONS))
            offsets = Offsets(a)
            wait_for_leaders(offsets, topic, PARTITIONS)
            seconds = fill(a, topic, workload, tmp)
            held = sum(offsets.ends(topic, PARTITIONS).values())
            offsets.close()
            if held != workload.records:
                raise RuntimeError(f"A holds {held} records of {topic}, expected {workload.records}")
            log(f"[{workload.name}] filled {topic} in {seconds:.1f} s")
            if not args.no_ceiling:
                results.append(ceiling(a, b, topic, workload, tmp))
                log(f"  ceiling: {results[-1].mb_s:.1f} MB/s ({results[-1].note})")
            for tasks in tasks_values:
                for engine in engines:
                    result = mirror(engine, a, b, topic, workload, tasks, runs, tmp, args.timeout)
                    results.append(result)
                    steady = f"{result.steady_mb_s:.1f}" if result.steady_mb_s is not None else "?"
                    log(f"  {engine} tasks.max={tasks}: {result.mb_s:.1f} MB/s, {result.cpu_s:.1f} CPU s, "
                        f"peak RSS {result.peak_rss_kb / 1024:.0f} MiB; first record on B after "
                        f"{result.first_s or 0:.1f} s, then {steady} MB/s")
        if not args.no_latency:
            for engine in engines:
                latencies[engine] = latency(engine, a, b, runs, tmp, args.latency_seconds, args.latency_mb_s,
                                            max(tasks_values))
                log(f"  latency {engine}: {latencies[engine]}")
        if args.soak_seconds > 0:
            for engine in engines:
                soaks[engine] = soak(engine, a, b, runs, tmp, args.soak_seconds, max(tasks_values), args.soak_mb_s)
    finally:
        manager.stop()
        if args.keep_logs:
            keep = Path(args.keep_logs)
            keep.mkdir(parents=True, exist_ok=True)
            for engine_log in tmp.glob("*.log"):
                shutil.copy(engine_log, keep / engine_log.name)
            log(f"engine logs copied to {keep}")
        shutil.rmtree(tmp, ignore_errors=True)

    log("")
    log(f"=== mirrorline vs Java MirrorMaker 2 {KAFKA_VERSION}, {PARTITIONS} partitions ===")
    log(f"cores: {os.cpu_count()}; load average (1 min) at start / end: {load_start:.2f} / {os.getloadavg()[0]:.2f}")
    print_table(results, latencies)
    if soaks:
        print_soak(soaks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
