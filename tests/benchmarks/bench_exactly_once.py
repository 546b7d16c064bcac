"""Benchmark: exactly-once mirroring (KIP-618) — its cost in throughput, and what a SIGKILL costs without it.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_exactly_once.py                  # issue 23's sizes (~15-25 min)
    .venv/bin/python tests/benchmarks/bench_exactly_once.py --scale 0.05 --kill-seconds 20   # a smoke run
    .venv/bin/python tests/benchmarks/bench_exactly_once.py --engines mirrorline,mirrorline-eos --no-kills

Engines, all on the *same* ``mm2.properties`` apart from the exactly-once lines:

- ``mirrorline`` / ``mm2``: at-least-once (``mirrorline mm2`` / Java MM2 in dedicated mode);
- ``mirrorline-eos`` / ``mm2-eos``: the file also says ``B.exactly.once.source.support = enabled``
  and ``dedicated.mode.enable.internal.rest = true`` (with a free ``listeners`` port), as a Java
  MM2 user writes it. Java MM2 is ``connect-mirror`` at the brokers' Kafka version.

1. **Throughput** (``--workload``, default 1M x 1000 B, 12 partitions, ``--tasks`` 2): a topic on A
   is filled with Kafka's ``ProducerPerformance`` first; each engine then mirrors it with a fresh
   source alias. The wall time runs from launch until B holds every record: for at-least-once
   runs when B's end offsets reach the count; for exactly-once runs when the engine's committed
   source offsets (read_committed, from ``mm2-offsets.<alias>.internal`` on B) reach A's end
   offsets — records become readable exactly when their offsets commit, and B's end offsets
   also count transaction markers. The table gives MB/s, CPU-s, peak RSS and the ratios
   exactly-once / at-least-once of the same engine and mirrorline-eos / mm2-eos.
2. **Duplicates per SIGKILL** (``--kill-seconds``, default 40): a producer writes plain records
   to a fresh 4-partition topic on A at a fixed rate; the engine is SIGKILLed and restarted twice,
   each time mid-copy (a quarter of the run after B grew by a second of records since the
   engine's last start); once B has caught up, a read_committed consumer
   (librdkafka) counts on B what was duplicated, missing and out of order. At-least-once runs
   use ``B.offset.flush.interval.ms = 1000`` (MM2's default is 60 s: ``--flush-ms``).

Figures depend on the machine and what else runs on it; the summary prints the core count and
load average. Compare runs only on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for path in (REPO_ROOT / "tests", Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

warnings.filterwarnings("ignore", category=DeprecationWarning)

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

from bench_mirror import Offsets, _base_port, log, wait_for_leaders  # noqa: E402
from bench_vs_mm2 import PARTITIONS, Engine, Result, Runs, Workload, fill, ratio  # noqa: E402
from mirrorline.localkafka.artifacts import KAFKA_VERSION, resolve_kafka_classpath, resolve_mm2_classpath  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from support.distributed import free_port  # noqa: E402
from support.eos import read_committed  # noqa: E402
from support.kafka import create_topic  # noqa: E402

ENGINES = ("mirrorline", "mirrorline-eos", "mm2", "mm2-eos")
POLL_INTERVAL = 0.25
KILL_PARTITIONS = 4


def properties(alias: str, a: str, b: str, topic: str, tasks: int, engine: str, flush_ms: int | None = None) -> str:
    """The flow's mm2.properties; ``-eos`` engines add the exactly-once lines a Java MM2 user writes."""
    text = f"""# written by tests/benchmarks/bench_exactly_once.py
clusters = {alias}, B
{alias}.bootstrap.servers = {a}
B.bootstrap.servers = {b}
{alias}->B.enabled = true
{alias}->B.topics = {topic}
{alias}->B.tasks.max = {tasks}
{SINGLE_BROKER_MM2_PROPERTIES}"""
    if engine.endswith("-eos"):
        text += (f"B.exactly.once.source.support = enabled\ndedicated.mode.enable.internal.rest = true\n"
                 f"listeners = http://127.0.0.1:{free_port()}\n")
    elif flush_ms is not None:
        text += f"B.offset.flush.interval.ms = {flush_ms}\n"
    return text


def launch(engine: str, props: Path, log_path: Path) -> Engine:
    """An Engine process; ``-eos`` variants run the same program."""
    return Engine(engine.removesuffix("-eos"), props, log_path)


class CommittedOffsets:
    """The source offsets an engine committed for one flow, read (read_committed) from its offsets topic on B.

    The partitions are assigned (no consumer group, so no join delay) as soon as the topic exists.
    """

    def __init__(self, bootstrap: str, alias: str, topic: str):
        self.topic = topic
        self.offsets_topic = f"mm2-offsets.{alias}.internal"
        self.latest: dict[int, int] = {}
        self.assigned = False
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "allow.auto.create.topics": False})

    def poll(self) -> dict[int, int]:
        """Read what arrived since the last call; ``{partition: next offset to copy}``."""
        if not self.assigned:
            metadata = self.consumer.list_topics(self.offsets_topic, timeout=5).topics.get(self.offsets_topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                return self.latest
            self.consumer.assign([TopicPartition(self.offsets_topic, p, OFFSET_BEGINNING)
                                  for p in metadata.partitions])
            self.assigned = True
        while True:
            message = self.consumer.poll(0.05)
            if message is None:
                return self.latest
            if message.error() or message.key() is None or message.value() is None:
                continue
            try:
                _, partition = json.loads(message.key())
                if partition.get("topic") == self.topic:
                    offset = json.loads(message.value())["offset"] + 1
                    self.latest[partition["partition"]] = max(self.latest.get(partition["partition"], 0), offset)
            except (ValueError, KeyError, TypeError):
                continue

    def close(self) -> None:
        self.consumer.close()


def throughput(engine: str, a: str, b: str, topic: str, workload: Workload, tasks: int, runs: Runs, tmp: Path,
               timeout: float, source_ends: dict[int, int]) -> Result:
    """Mirror the filled topic; the wall ends when every record is readable on B (see the module docstring)."""
    alias = runs.alias()
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, topic, tasks, engine))
    eos = engine.endswith("-eos")
    ends = Offsets(b)
    committed = CommittedOffsets(b, alias, topic) if eos else None
    t0 = time.perf_counter()
    running = launch(engine, props, tmp / f"{alias}-{engine}.log")
    first: tuple[float, int] | None = None  # (time, records) at the first sample with records on B
    try:
        remote = f"{alias}.{topic}"
        while True:
            if eos:
                latest = committed.poll()
                done = all(latest.get(p, 0) >= end for p, end in source_ends.items())
                held = sum(min(latest.get(p, 0), end) for p, end in source_ends.items())
            else:
                held = sum(ends.ends(remote, PARTITIONS).values())
                done = held >= workload.records
            if first is None and held > 0:
                first = (time.perf_counter(), held)
            if done:
                break
            running.check_alive()
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{engine}: {held} of {workload.records} records on B after {timeout:.0f} s")
            time.sleep(POLL_INTERVAL)
        end = time.perf_counter()
        wall = end - t0
        steady = ""
        if first is not None and end > first[0] and workload.records > first[1]:
            steady = (f"steady {(workload.records - first[1]) * workload.size / 1e6 / (end - first[0]):.1f} MB/s, "
                      f"first records after {first[0] - t0:.1f} s")
        return Result(engine, workload, tasks, wall, running.cpu_s(), running.peak_rss_kb(), note=steady)
    finally:
        running.stop()
        ends.close()
        if committed is not None:
            committed.close()


# -- duplicates per SIGKILL ------------------------------------------------------------------

@dataclass
class KillResult:
    """What two SIGKILLs of one engine left on B."""

    engine: str
    produced: int
    copied: int
    duplicates: int
    missing: int
    out_of_order: int
    kills: int = 2

    @property
    def duplicates_per_kill(self) -> float:
        return self.duplicates / self.kills


def produce_at_rate(bootstrap: str, topic: str, rate: float, seconds: float, stop: threading.Event) -> int:
    """Plain records ``<partition>:<seq>`` to each partition in turn at ``rate`` per second; returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    count, t0 = 0, time.perf_counter()
    total = int(rate * seconds)
    while count < total and not stop.is_set():
        partition = count % KILL_PARTITIONS
        producer.produce(topic, f"{partition}:{count // KILL_PARTITIONS}".encode(), partition=partition)
        count += 1
        if count % 500 == 0:
            producer.poll(0)
            ahead = count / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
    producer.flush(60)
    return count


def kills(engine: str, a: str, b: str, runs: Runs, tmp: Path, seconds: float, rate: float, tasks: int,
          flush_ms: int) -> KillResult:
    """Mirror a topic written at ``rate`` while the engine is SIGKILLed twice; count what B holds."""
    alias = runs.alias()
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topic(a, topic, KILL_PARTITIONS))
    props = tmp / f"{alias}.properties"
    props.write_text(properties(alias, a, b, topic, tasks, engine, flush_ms))
    stop = threading.Event()
    produced: list[int] = []
    writer = threading.Thread(target=lambda: produced.append(produce_at_rate(a, topic, rate, seconds, stop)))
    running = launch(engine, props, tmp / f"{alias}-{engine}-0.log")
    writer.start()
    remote = f"{alias}.{topic}"
    ends = Offsets(b)
    t0 = time.perf_counter()
    try:
        for kill in (1, 2):
            # kill mid-copy, not during start-up: a quarter of the run after B started growing again
            grown = sum(ends.ends(remote, KILL_PARTITIONS).values()) + rate
            while sum(ends.ends(remote, KILL_PARTITIONS).values()) < grown and writer.is_alive():
                running.check_alive()
                time.sleep(POLL_INTERVAL)
            time.sleep(seconds / 4)
            running.proc.send_signal(signal.SIGKILL)
            running.proc.wait()
            log(f"  {engine}: SIGKILL {kill} at {time.perf_counter() - t0:.0f} s; restarting")
            running = launch(engine, props, tmp / f"{alias}-{engine}-{kill}.log")
        writer.join()
        source_offsets = Offsets(a)
        source = source_offsets.ends(topic, KILL_PARTITIONS)
        source_offsets.close()
        expected = {p: [f"{p}:{i}".encode() for i in range(source[p])] for p in range(KILL_PARTITIONS)}
        deadline = time.monotonic() + 300
        while True:  # caught up: every expected record is on B (extra ones are what we count)
            held = read_committed(b, remote, timeout=120)  # {} while the remote topic does not exist
            if all(set(expected[p]) <= set(held.get(p, [])) for p in expected) or time.monotonic() > deadline:
                break
            running.check_alive()
            time.sleep(2)
    finally:
        stop.set()
        writer.join()
        running.stop()
        ends.close()
    duplicates = missing = out_of_order = copied = 0
    for p, values in expected.items():
        got = held.get(p, [])
        copied += len(got)
        duplicates += len(got) - len(set(got))
        missing += len(set(values) - set(got))
        first = {}
        for index, value in enumerate(got):
            first.setdefault(value, index)
        order = [first[v] for v in values if v in first]
        out_of_order += sum(1 for x, y in zip(order, order[1:]) if y < x)
    return KillResult(engine, sum(produced), copied, duplicates, missing, out_of_order)


# -- report --------------------------------------------------------------------------------

def print_tables(results: list[Result], kill_results: list[KillResult]) -> None:
    if results:
        header = (f"{'workload':<18} {'engine':<15} {'tasks':>5} {'MB/s':>7} {'rec/s':>10} {'CPU s':>7} "
                  f"{'RSS MiB':>8} {'EOS/ALOS':>9} {'vs mm2-eos':>10}")
        log(header)
        log("-" * len(header))
        by = {(r.engine, r.tasks): r for r in results}
        for r in results:
            alos = by.get((r.engine.removesuffix("-eos"), r.tasks)) if r.engine.endswith("-eos") else None
            java = by.get(("mm2-eos", r.tasks)) if r.engine == "mirrorline-eos" else None
            log(f"{r.workload.name:<18} {r.engine:<15} {r.tasks:>5} {r.mb_s:>7.1f} {r.records_s:>10,.0f} "
                f"{r.cpu_s or float('nan'):>7.1f} {(r.peak_rss_kb or 0) / 1024:>8.0f} "
                f"{ratio(r.mb_s, alos.mb_s if alos else None):>9} {ratio(r.mb_s, java.mb_s if java else None):>10}"
                + (f"  ({r.note})" if r.note else ""))
    if kill_results:
        log("")
        log("two SIGKILLs while a producer writes (read_committed consumer on B):")
        log(f"{'engine':<15} {'produced':>9} {'on B':>9} {'duplicates':>10} {'per kill':>9} {'missing':>8} "
            f"{'out of order':>12}")
        for k in kill_results:
            log(f"{k.engine:<15} {k.produced:>9} {k.copied:>9} {k.duplicates:>10} {k.duplicates_per_kill:>9.0f} "
                f"{k.missing:>8} {k.out_of_order:>12}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma list of {', '.join(ENGINES)}")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the record count (smoke runs)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument("--no-kills", action="store_true")
    parser.add_argument("--kill-seconds", type=float, default=40.0, help="length of the SIGKILL runs")
    parser.add_argument("--kill-rate", type=float, default=2000.0, help="records/s written during the SIGKILL runs")
    parser.add_argument("--kill-engines", default="mirrorline,mirrorline-eos,mm2-eos")
    parser.add_argument("--flush-ms", type=int, default=1000, help="at-least-once runs' B.offset.flush.interval.ms")
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    kill_engines = [e for e in args.kill_engines.split(",") if e and e in engines]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        parser.error(f"unknown engine: {', '.join(unknown)}")
    workload = Workload(max(PARTITIONS, int(args.records * args.scale)), args.size)

    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-eos-"))
    manager = LocalKafka(tmp / "kafka", _base_port())
    results: list[Result] = []
    kill_results: list[KillResult] = []
    runs = Runs()
    try:
        log(f"Apache Kafka {KAFKA_VERSION} brokers and Java MM2 (connect-mirror {KAFKA_VERSION}); "
            f"{os.cpu_count()} cores; state under {tmp}")
        resolve_kafka_classpath()
        if any(e.startswith("mm2") for e in engines):
            resolve_mm2_classpath()
        clusters = manager.start(["A", "B"])
        a, b = (c.spec.bootstrap_servers for c in clusters)
        if not args.no_throughput:
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            asyncio.run(create_topic(a, topic, PARTITIONS))
            offsets = Offsets(a)
            wait_for_leaders(offsets, topic, PARTITIONS)
            seconds = fill(a, topic, workload, tmp)
            source_ends = offsets.ends(topic, PARTITIONS)
            offsets.close()
            log(f"[{workload.name}] filled {topic} in {seconds:.1f} s")
            for engine in engines:
                result = throughput(engine, a, b, topic, workload, args.tasks, runs, tmp, args.timeout, source_ends)
                results.append(result)
                log(f"  {engine} tasks.max={args.tasks}: {result.mb_s:.1f} MB/s, {result.cpu_s:.1f} CPU s"
                    + (f" ({result.note})" if result.note else ""))
        if not args.no_kills:
            for engine in kill_engines:
                kill_results.append(kills(engine, a, b, runs, tmp, args.kill_seconds, args.kill_rate, args.tasks,
                                          args.flush_ms))
                log(f"  {kill_results[-1]}")
    finally:
        manager.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    log("")
    log(f"=== exactly-once mirroring, Java MirrorMaker 2 {KAFKA_VERSION}, {PARTITIONS} partitions ===")
    log(f"cores: {os.cpu_count()}; load average (1 min) at start / end: {load_start:.2f} / {os.getloadavg()[0]:.2f}")
    print_tables(results, kill_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
