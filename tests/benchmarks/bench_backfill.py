"""Benchmark: ``mirrorline backfill`` throughput against the brokers' ceiling and streaming MirrorSource.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_backfill.py            # 1,000,000 x 1000 B, 12 partitions
    .venv/bin/python tests/benchmarks/bench_backfill.py --quick    # 100,000 x 1000 B
    .venv/bin/python tests/benchmarks/bench_backfill.py --quick --skip-standalone --skip-mirror

Steps (fresh clusters A and B on free loopback ports, stopped at the end whatever happens):

1. Fill a ``--partitions`` topic on A with N records of ``--size`` bytes (confluent-kafka,
   round-robin; not timed as a result).
2. **Ceiling**: Kafka's own ``ConsumerPerformance`` reading the N records from A and
   ``ProducerPerformance`` writing N records of the same size to B, side by side (what a copy
   from A to B does at best on this machine); the ceiling is the slower of the two rates the
   tools report (their JVMs' start-up excluded).
3. **Streaming**: ``mirrorline mm2`` (MirrorSource, 2 tasks) copying the topic, timed from the
   first record on B to the last (start-up excluded).
4. **Backfill** ``local[2]``: ``mirrorline backfill`` into another remote name (the flow's
   ``replication.policy.separator`` differs per run, so every run writes a fresh remote topic);
   the copy rate is timed the same way (first record on B to last), and the wall time including
   the Spark session's start is shown beside it.
5. **Backfill on a standalone cluster** (pyspark's master and workers on loopback): one worker
   of one core, then two workers of one core each; the speed-up is their ratio.

MB/s counts record values (1e6 bytes), as bench_mirror.py does. The machine's other load
matters: run it alone, and read the figures as ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests"))  # tests/support: the suite's Kafka helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mirror import Offsets, fill_python, wait_for_leaders  # noqa: E402

from mirrorline.localkafka.artifacts import java_executable, resolve_kafka_classpath  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402

POLL_S = 0.25


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def perf_tool(tool: str, *args: str) -> subprocess.Popen:
    classpath = f"{resolve_kafka_classpath()}/*"
    return subprocess.Popen([java_executable(), "-Xmx512m", "-cp", classpath, f"org.apache.kafka.tools.{tool}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ceiling(a: str, b: str, topic: str, n: int, size: int, partitions: int) -> dict:
    """Consume N records from A and produce N records to B at once, with Kafka's perf tools."""
    target = f"ceiling-{uuid.uuid4().hex[:6]}"
    subprocess.run([java_executable(), "-cp", f"{resolve_kafka_classpath()}/*", "org.apache.kafka.tools.TopicCommand",
                    "--bootstrap-server", b, "--create", "--topic", target, "--partitions", str(partitions),
                    "--replication-factor", "1"], check=True, capture_output=True)
    t0 = time.perf_counter()
    consumer = perf_tool("ConsumerPerformance", "--bootstrap-server", a, "--topic", topic, "--num-records", str(n),
                         "--timeout", "120000")
    producer = perf_tool("ProducerPerformance", "--bootstrap-server", b, "--topic", target, "--num-records", str(n),
                         "--record-size", str(size), "--throughput", "-1", "--command-property", "acks=all",
                         "linger.ms=20", "batch.size=1000000", "buffer.memory=268435456")
    outputs = {}
    for name, proc in (("consume", consumer), ("produce", producer)):
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{name} perf tool failed: {err[-2000:]}")
        outputs[name] = out
    # the tools' own rates (MiB/s: 1024 x 1024 bytes), so that their JVMs' start-up does not count
    produced = re.findall(r"\(([\d.]+) MB/sec\)", outputs["produce"])[-1]
    data = [line for line in outputs["consume"].splitlines() if line.count(",") >= 8 and line[:1].isdigit()][-1]
    consume = float(data.split(",")[8]) * 1.048576  # fetch.MB.sec
    produce = float(produced) * 1.048576
    return {"consume_mb_s": consume, "produce_mb_s": produce, "mb_s": min(consume, produce),
            "wall_s": time.perf_counter() - t0}


class Sampler(threading.Thread):
    """Samples B's total end offset of one topic until it reaches N: first and last non-empty times."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, n: int):
        super().__init__(daemon=True)
        self.offsets = Offsets(bootstrap)
        self.topic, self.partitions, self.n = topic, partitions, n
        self.first: float | None = None
        self.first_count = 0
        self.done: float | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            total = sum(self.offsets.ends(self.topic, self.partitions).values())
            now = time.perf_counter()
            if total and self.first is None:
                self.first, self.first_count = now, total
            if total >= self.n:
                self.done = now
                return
            time.sleep(POLL_S)

    def rate(self, size: int) -> float | None:
        """MB/s from the first non-empty sample to the end."""
        if self.first is None or self.done is None or self.done <= self.first:
            return None
        return (self.n - self.first_count) * size / 1e6 / (self.done - self.first)

    def close(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.offsets.close()


def properties(path: Path, a: str, b: str, topic: str, separator: str, extra: str = "") -> None:
    state = uuid.uuid4().hex[:8]
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = {topic}
A->B.tasks.max = 2
B->A.enabled = false
replication.policy.separator = {separator}
emit.heartbeats.enabled = false
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.topic = bench-offsets-{state}
config.storage.topic = bench-configs-{state}
status.storage.topic = bench-status-{state}
A.group.id = bench-{state}
B.group.id = bench-{state}-b
spark.ui.enabled = false
spark.driver.memory = 1g
{extra}""")


def run_backfill(tmp: Path, a: str, b: str, topic: str, n: int, size: int, partitions: int, separator: str,
                 master: str, env: dict | None = None) -> dict:
    props = tmp / f"backfill{separator}.properties"
    properties(props, a, b, topic, separator)
    sampler = Sampler(b, f"A{separator}{topic}", partitions, n)
    sampler.start()
    t0 = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "backfill", str(props), "--flow", "A->B",
                             "--json", "--spark-master", master], capture_output=True, text=True, cwd=REPO_ROOT,
                            env=env)
    wall = time.perf_counter() - t0
    sampler.join(10)
    sampler.close()
    if result.returncode != 0:
        raise RuntimeError(f"backfill on {master} failed: {result.stderr[-3000:]}")
    summary = json.loads(result.stdout)
    assert summary["records_written"] == n, summary
    return {"copy_mb_s": sampler.rate(size), "wall_s": wall, "wall_mb_s": n * size / 1e6 / wall}


def run_streaming(tmp: Path, a: str, b: str, topic: str, n: int, size: int, partitions: int) -> dict:
    props = tmp / "mm2.properties"
    properties(props, a, b, topic, "_mm2_")
    sampler = Sampler(b, f"A_mm2_{topic}", partitions, n)
    sampler.start()
    proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(props)], cwd=REPO_ROOT,
                            stdout=open(tmp / "mm2.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.perf_counter() + 1800
        while sampler.done is None and time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"mm2 exited: {(tmp / 'mm2.log').read_text()[-2000:]}")
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(60)
        sampler.close()
    return {"copy_mb_s": sampler.rate(size)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records instead of 1,000,000")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--skip-mirror", action="store_true", help="no streaming MirrorSource run")
    parser.add_argument("--skip-standalone", action="store_true", help="no standalone-cluster runs")
    args = parser.parse_args(argv)
    n = args.records or (100_000 if args.quick else 1_000_000)
    size, partitions = args.size, args.partitions
    rows: list[tuple[str, float | None, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp_name:
        tmp = Path(tmp_name)
        manager = LocalKafka(tmp / "kafka", _free_base_port(2))
        try:
            clusters = manager.start(["A", "B"])
            a, b = (c.spec.bootstrap_servers for c in clusters)
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            subprocess.run([java_executable(), "-cp", f"{resolve_kafka_classpath()}/*",
                            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", a, "--create", "--topic",
                            topic, "--partitions", str(partitions), "--replication-factor", "1"],
                           check=True, capture_output=True)
            offsets = Offsets(a)
            wait_for_leaders(offsets, topic, partitions)
            offsets.close()
            t = time.perf_counter()
            fill_python(a, topic, n, size, partitions)
            log(f"filled {n} x {size} B in {partitions} partitions on A in {time.perf_counter() - t:.1f} s")

            top = ceiling(a, b, topic, n, size, partitions)
            log(f"ceiling: consume A {top['consume_mb_s']:.1f} MB/s, produce B {top['produce_mb_s']:.1f} MB/s, "
                f"side by side {top['mb_s']:.1f} MB/s")
            rows.append(("brokers' ceiling (perf tools side by side)", top["mb_s"], ""))
            if not args.skip_mirror:
                streaming = run_streaming(tmp, a, b, topic, n, size, partitions)
                log(f"streaming MirrorSource: {streaming['copy_mb_s']:.1f} MB/s")
                rows.append(("streaming MirrorSource (mirrorline mm2, 2 tasks)", streaming["copy_mb_s"], ""))
            local = run_backfill(tmp, a, b, topic, n, size, partitions, "_l2_", "local[2]")
            log(f"backfill local[2]: {local['copy_mb_s']:.1f} MB/s copying, {local['wall_s']:.1f} s wall")
            rows.append(("backfill, Spark local[2]", local["copy_mb_s"],
                         f"wall {local['wall_s']:.0f} s incl. Spark start ({local['wall_mb_s']:.1f} MB/s)"))
            if not args.skip_standalone:
                from mirrorline.spark.standalone import StandaloneCluster

                env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
                for workers in (1, 2):
                    cluster = StandaloneCluster(tmp / f"spark-{workers}", workers=workers, cores=1).start()
                    try:
                        sa = run_backfill(tmp, a, b, topic, n, size, partitions, f"_s{workers}_", cluster.master_url,
                                          env)
                    finally:
                        cluster.stop()
                    log(f"backfill standalone x{workers}: {sa['copy_mb_s']:.1f} MB/s copying, {sa['wall_s']:.1f} s")
                    rows.append((f"backfill, standalone, {workers} worker(s) x 1 core", sa["copy_mb_s"],
                                 f"wall {sa['wall_s']:.0f} s"))
        finally:
            manager.stop()
    ceiling_mb_s = rows[0][1]
    streaming_mb_s = next((r[1] for r in rows if r[0].startswith("streaming")), None)
    print()
    print(f"backfill benchmark: {n:,} records x {size} B, {partitions} partitions, {os.cpu_count()} cores")
    print(f"{'run':<52} {'MB/s':>7} {'/ceiling':>9} {'/stream':>8}  note")
    for name, mb_s, note in rows:
        ratio = f"{mb_s / ceiling_mb_s:.2f}" if mb_s and ceiling_mb_s else "-"
        vs = f"{mb_s / streaming_mb_s:.2f}" if mb_s and streaming_mb_s else "-"
        print(f"{name:<52} {mb_s or 0:>7.1f} {ratio:>9} {vs:>8}  {note}")
    standalone = [r[1] for r in rows if r[0].startswith("backfill, standalone")]
    if len(standalone) == 2 and all(standalone):
        print(f"speed-up from one to two standalone workers: {standalone[1] / standalone[0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
