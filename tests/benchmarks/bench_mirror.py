"""Benchmark: MirrorSourceConnector throughput, mirroring >= 1 GB of 1 KB records A -> B.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_mirror.py                       # 1 GB, 1 KiB, 12 partitions, 2 tasks
    .venv/bin/python tests/benchmarks/bench_mirror.py --gb 0.2 --tasks 1    # quicker comparison runs
    .venv/bin/python tests/benchmarks/bench_mirror.py --mode inprocess --gb 0.1 --cprofile /tmp/mirror.prof

Steps:

1. Start two brand-new local clusters A and B (``LocalKafka``, temporary state directory,
   random free ports in 20000-40000, never the demo's 19092/19102); both are stopped in a
   ``finally`` block, even on failure or Ctrl-C.
2. Create a ``--partitions``-partition topic on A and fill it with
   N = ceil(gb * 1e9 / record_size) records *before* mirroring starts (timed separately; it
   is not the mirror figure). ``--fill python`` (default) uses confluent-kafka (librdkafka)
   with 16-byte keys, values cycled from 256 random blobs and partitions assigned
   round-robin, so every partition gets N/partitions records; ``--fill java`` uses Kafka's
   own ``ProducerPerformance`` from the cached jars (null keys, sticky partitioner).
3. Mirror A -> B with our MirrorSourceConnector. ``--mode subprocess`` (default) runs
   ``python -m mirrorline.cli.main mm2 mm2.properties`` as a separate process, so the
   benchmark's own polling does not count against the mirror; ``--mode inprocess`` runs a
   standalone worker in this process (``running_standalone``), which is what ``--cprofile``
   profiles. The wall time runs from launching the mirror until the sum of B's end offsets
   of ``A.<topic>`` reaches N, polled every 0.5 s. The time the first record appeared on B is
   the start-up overhead; the steady-state rate is (N - records at the first non-empty
   sample) / (time from that sample to the end).
4. Peak RSS (``VmHWM``) and CPU time (utime + stime) of the mirror process from ``/proc``,
   read just before it is stopped, and the CPU the two broker JVMs spent meanwhile.
5. Check B's end offset equals A's end offset for every partition.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))  # tests/support: the suite's Kafka helpers

warnings.filterwarnings("ignore", category=DeprecationWarning)

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from mirrorline.localkafka.artifacts import KAFKA_VERSION, java_executable, resolve_kafka_classpath  # noqa: E402
from mirrorline.localkafka.manager import DEFAULT_BASE_PORT, PORT_STRIDE, LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402
from support.kafka import create_topic  # noqa: E402

NAMES = ["A", "B"]
#: Ports a demo may hold (clusters A and B at the default base port): never used here.
_RESERVED_PORTS = {DEFAULT_BASE_PORT + i * PORT_STRIDE + j for i in range(len(NAMES)) for j in (0, 1)}
POLL_INTERVAL = 0.5
KEY_SIZE = 16
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(message, flush=True)


# -- /proc ---------------------------------------------------------------------------------

def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all its threads), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # fields from 3 (state) on
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # fields 14 and 15 of proc(5)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    return sum(proc_cpu_split(pid))


def proc_peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for pid {pid}")


def proc_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def proc_children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return children


# -- Kafka helpers -------------------------------------------------------------------------

def _base_port() -> int:
    base = _free_base_port(len(NAMES))
    ports = {base + i * PORT_STRIDE + j for i in range(len(NAMES)) for j in (0, 1)}
    assert not ports & _RESERVED_PORTS, f"base port {base} would collide with the demo's ports"
    return base


class Offsets:
    """End offsets of one topic's partitions on one cluster (ListOffsets via librdkafka)."""

    def __init__(self, bootstrap: str):
        # polls the remote topic before the mirror creates it: that must not auto-create it (1 partition)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "allow.auto.create.topics": False})

    def ends(self, topic: str, partitions: int) -> dict[int, int]:
        """``{partition: end offset}``; 0 for a partition (or topic) that does not exist yet."""
        out = {}
        for p in range(partitions):
            try:
                out[p] = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1]
            except KafkaException:
                out[p] = 0
        return out

    def close(self) -> None:
        self.consumer.close()


def wait_for_leaders(offsets: Offsets, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """ListOffsets answers for every partition once the broker leads them all."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            for p in range(partitions):
                offsets.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2, cached=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def fill_python(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> None:
    """N records: 16-byte keys, values cycled from 256 random blobs, partitions round-robin."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none"})
    values = [os.urandom(size) for _ in range(256)]
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    produce = producer.produce
    for i in range(n):
        while True:
            try:
                produce(topic, values[i & 255], b"%016d" % i, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let librdkafka send some
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("fill: records still undelivered after 300 s")
    if errors:
        raise RuntimeError(f"fill: {len(errors)} delivery errors, first: {errors[0]}")


def fill_java(bootstrap: str, topic: str, n: int, size: int) -> None:
    """N records of ``size`` bytes with Kafka's ProducerPerformance (null keys)."""
    classpath = f"{resolve_kafka_classpath()}/*"
    cmd = [java_executable(), "-Xmx512m", "-cp", classpath, "org.apache.kafka.tools.ProducerPerformance",
           "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n),
           "--record-size", str(size), "--throughput", "-1", "--reporting-interval", "10000",
           "--command-property", "acks=1", "linger.ms=20", "batch.size=1000000", "compression.type=none",
           "buffer.memory=268435456"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ProducerPerformance failed ({result.returncode}): {result.stderr[-2000:]}")
    last = [line for line in result.stdout.splitlines() if line.strip()][-1:]
    log(f"  ProducerPerformance: {last[0] if last else '(no output)'}")


# -- mirror --------------------------------------------------------------------------------

def mm2_properties(a: str, b: str, topic: str, tasks: int, extra: list[str] = ()) -> str:
    return "".join(f"{line}\n" for line in extra) + f"""# written by tests/benchmarks/bench_mirror.py
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = {topic}
A->B.tasks.max = {tasks}
{SINGLE_BROKER_MM2_PROPERTIES}"""


def connector_config(a: str, b: str, topic: str, tasks: int) -> dict[str, str]:
    """The same flow as a standalone worker's connector config (in-process mode)."""
    return {"name": "bench-mirror", "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": a, "target.cluster.bootstrap.servers": b,
            "topics": topic, "tasks.max": str(tasks),
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"}


class Progress:
    """Samples B's total end offset until it reaches N; keeps the figures the summary needs."""

    def __init__(self, offsets: Offsets, topic: str, partitions: int, n: int, t0: float, pid: int):
        self.offsets, self.topic, self.partitions, self.n, self.t0 = offsets, topic, partitions, n, t0
        self.pid = pid  # the mirror's process: its RSS is sampled with every offset sample
        self.rss_kb: list[tuple[int, int]] = []  # (records on B, VmRSS kB)
        self.first: tuple[float, int] | None = None  # (seconds since t0, records) at the first non-empty sample
        self.end: float | None = None
        self.last_log = 0.0
        self.samples: list[tuple[float, int]] = []

    def sample(self) -> bool:
        """One sample; True once B holds N records."""
        total = sum(self.offsets.ends(self.topic, self.partitions).values())
        now = time.perf_counter() - self.t0
        self.samples.append((now, total))
        try:
            self.rss_kb.append((total, proc_rss_kb(self.pid)))
        except OSError:
            pass
        if total > 0 and self.first is None:
            self.first = (now, total)
            log(f"  first records on B after {now:.1f} s ({total} records at that sample)")
        if now - self.last_log >= 10:
            self.last_log = now
            rss = f", mirror RSS {self.rss_kb[-1][1] / 1024:.0f} MiB" if self.rss_kb else ""
            log(f"  {now:6.1f} s: {total:>10} / {self.n} records on B ({100 * total / self.n:.0f}%){rss}")
        if total >= self.n:
            self.end = now
            return True
        return False


def mirror_subprocess(args, tmp: Path, a: str, b: str, topic: str, n: int, offsets: Offsets,
                      brokers: list[int]) -> dict:
    props = tmp / "mm2.properties"
    props.write_text(mm2_properties(a, b, topic, args.tasks, args.mm2_prop))
    log_path = tmp / "mm2.log"
    with open(log_path, "w") as mm2_log:
        t0 = time.perf_counter()
        broker_cpu0 = [proc_cpu_seconds(p) for p in brokers]
        proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(props)],
                                cwd=REPO_ROOT, stdout=mm2_log, stderr=subprocess.STDOUT)
    log(f"  mirror process pid {proc.pid} (log {log_path})")
    progress = Progress(offsets, f"A.{topic}", args.partitions, n, t0, proc.pid)
    try:
        deadline = t0 + args.timeout
        while not progress.sample():
            if proc.poll() is not None:
                raise RuntimeError(f"mirror exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            if time.perf_counter() > deadline:
                raise TimeoutError(f"B holds {progress.samples[-1][1]} of {n} records after {args.timeout} s")
            time.sleep(POLL_INTERVAL)
        children = proc_children(proc.pid)
        result = {"peak_rss_kb": proc_peak_rss_kb(proc.pid), "cpu_s": proc_cpu_seconds(proc.pid),
                  "broker_cpu_s": [proc_cpu_seconds(p) - c0 for p, c0 in zip(brokers, broker_cpu0)],
                  "progress": progress, "pid": proc.pid}
        if children:
            log(f"  note: the mirror process has child processes {children}; their CPU/RSS are not counted")
        return result
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                log(f"  warning: mirror exited with {code} on SIGTERM; log tail:\n{log_path.read_text()[-2000:]}")


def mirror_inprocess(args, tmp: Path, a: str, b: str, topic: str, n: int, offsets: Offsets,
                     brokers: list[int]) -> dict:
    from support.worker import running_standalone

    worker = {"bootstrap.servers": b, "offset.storage.file.filename": str(tmp / "offsets.json")}
    profiler = None
    if args.cprofile:
        import cProfile
        profiler = cProfile.Profile()

    async def run() -> dict:
        t0 = time.perf_counter()
        broker_cpu0 = [proc_cpu_seconds(p) for p in brokers]
        cpu0 = proc_cpu_seconds(os.getpid())
        progress = Progress(offsets, f"A.{topic}", args.partitions, n, t0, os.getpid())
        if profiler:
            profiler.enable()
        try:
            async with running_standalone(worker, [connector_config(a, b, topic, args.tasks)]):
                deadline = t0 + args.timeout
                while not await asyncio.to_thread(progress.sample):
                    if time.perf_counter() > deadline:
                        raise TimeoutError(f"B holds {progress.samples[-1][1]} of {n} records after {args.timeout} s")
                    await asyncio.sleep(POLL_INTERVAL)
                return {"peak_rss_kb": proc_peak_rss_kb(os.getpid()), "cpu_s": proc_cpu_seconds(os.getpid()) - cpu0,
                        "broker_cpu_s": [proc_cpu_seconds(p) - c0 for p, c0 in zip(brokers, broker_cpu0)],
                        "progress": progress, "pid": os.getpid()}
        finally:
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.cprofile)
                log(f"  cProfile stats written to {args.cprofile}")

    return asyncio.run(run())


# -- main ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="data to mirror, in 1e9 bytes of values (default 1.0)")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record value (default 1024)")
    parser.add_argument("--partitions", type=int, default=12, help="partitions of the source topic (default 12)")
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max of the mirror flow (default 2)")
    parser.add_argument("--mode", choices=["subprocess", "inprocess"], default="subprocess",
                        help="run the mirror as `mirrorline mm2` in a subprocess (default) or in this process")
    parser.add_argument("--fill", choices=["python", "java"], default="python",
                        help="fill A with confluent-kafka and 16-byte keys (default) or Kafka's ProducerPerformance")
    parser.add_argument("--mm2-prop", action="append", default=[], metavar="KEY=VALUE",
                        help="subprocess mode: extra mm2.properties line, e.g. B.producer.batch.size=1048576 "
                             "(repeatable; the benchmark's own settings come after and win)")
    parser.add_argument("--timeout", type=float, default=3600, help="give up mirroring after this many seconds")
    parser.add_argument("--cprofile", default=None, help="--mode inprocess only: write cProfile stats here")
    args = parser.parse_args(argv)
    if args.cprofile and args.mode != "inprocess":
        parser.error("--cprofile needs --mode inprocess")
    if args.mm2_prop and args.mode != "subprocess":
        parser.error("--mm2-prop needs --mode subprocess")

    n = math.ceil(args.gb * 1e9 / args.record_size)
    value_bytes = n * args.record_size
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-mirror-"))
    manager = LocalKafka(tmp / "kafka", _base_port())
    offsets_a = offsets_b = None
    try:
        log(f"Apache Kafka {KAFKA_VERSION}, {os.cpu_count()} cores; state under {tmp}")
        resolve_kafka_classpath()
        t = time.perf_counter()
        clusters = manager.start(NAMES)
        a, b = (c.spec.bootstrap_servers for c in clusters)
        brokers = [c.pid() for c in clusters]
        log(f"[1] clusters A ({a}) and B ({b}) started in {time.perf_counter() - t:.1f} s")

        topic = f"bench-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topic(a, topic, args.partitions))
        offsets_a, offsets_b = Offsets(a), Offsets(b)
        wait_for_leaders(offsets_a, topic, args.partitions)
        log(f"[2] filling {topic} on A: {n} records x {args.record_size} B over {args.partitions} partitions "
            f"({args.fill})")
        t = time.perf_counter()
        if args.fill == "java":
            fill_java(a, topic, n, args.record_size)
        else:
            fill_python(a, topic, n, args.record_size, args.partitions)
        fill_s = time.perf_counter() - t
        source_ends = offsets_a.ends(topic, args.partitions)
        if sum(source_ends.values()) != n:
            raise RuntimeError(f"A holds {sum(source_ends.values())} records, expected {n}")
        log(f"  filled in {fill_s:.1f} s ({value_bytes / 1e6 / fill_s:.0f} MB/s); per partition: "
            f"{min(source_ends.values())}..{max(source_ends.values())}")

        log(f"[3] mirroring A -> B ({args.mode}, tasks.max={args.tasks})")
        mirror = mirror_subprocess if args.mode == "subprocess" else mirror_inprocess
        result = mirror(args, tmp, a, b, topic, n, offsets_b, brokers)

        target_ends = offsets_b.ends(f"A.{topic}", args.partitions)
        mismatched = {p: (source_ends[p], target_ends.get(p)) for p in source_ends if source_ends[p] != target_ends.get(p)}
        log(f"[4] verify: {'OK, every partition of B ends where A does' if not mismatched else 'MISMATCH'}")
        if mismatched:
            log(f"  partitions whose end offsets differ (A, B): {mismatched}")
    finally:
        for offsets in (offsets_a, offsets_b):
            if offsets is not None:
                offsets.close()
        manager.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    progress: Progress = result["progress"]
    wall = progress.end
    first_t, first_n = progress.first
    steady_s = wall - first_t
    mb = value_bytes / 1e6
    log("")
    log("=== mirrorline MirrorSourceConnector benchmark ===")
    log(f"cores (os.cpu_count): {os.cpu_count()}; load average (1 min) at start / end: "
        f"{load_start:.2f} / {os.getloadavg()[0]:.2f}")
    log(f"Apache Kafka: {KAFKA_VERSION}")
    log(f"mode: {args.mode}; tasks.max: {args.tasks}; partitions: {args.partitions}"
        + (f"; extra mm2 properties: {', '.join(args.mm2_prop)}" if args.mm2_prop else ""))
    log(f"records: {n}; record size: {args.record_size} B values + {KEY_SIZE if args.fill == 'python' else 0} B keys; "
        f"value bytes: {value_bytes} ({mb:.0f} MB)")
    log(f"fill (A, {args.fill}, not part of the mirror figure): {fill_s:.1f} s ({mb / fill_s:.0f} MB/s)")
    log(f"mirror wall time (launch -> all {n} records on B): {wall:.1f} s")
    log(f"end-to-end: {mb / wall:.1f} MB/s, {n / wall:,.0f} records/s")
    log(f"start-up: first records on B after {first_t:.1f} s ({first_n} records at that sample)")
    if steady_s > 0:
        log(f"steady state ({n - first_n} records in {steady_s:.1f} s): "
            f"{(n - first_n) * args.record_size / 1e6 / steady_s:.1f} MB/s, {(n - first_n) / steady_s:,.0f} records/s")
    else:
        log("steady state: n/a (all records were on B at the first non-empty sample)")
    rss = progress.rss_kb
    quartiles = [next((kb for done, kb in rss if done >= q * n), rss[-1][1]) for q in (0.25, 0.5, 0.75)] if rss else []
    log(f"mirror process peak RSS (VmHWM): {result['peak_rss_kb'] / 1024:.0f} MiB; VmRSS at 25/50/75/100% of the "
        f"records: {' / '.join(f'{kb / 1024:.0f}' for kb in quartiles + [rss[-1][1]]) if rss else 'n/a'} MiB")
    log(f"mirror process CPU (utime+stime): {result['cpu_s']:.1f} s over {wall:.1f} s wall "
        f"({100 * result['cpu_s'] / wall:.0f}% of one core); {n / result['cpu_s']:,.0f} records per CPU-second")
    log(f"broker JVM CPU meanwhile: A {result['broker_cpu_s'][0]:.1f} s, B {result['broker_cpu_s'][1]:.1f} s")
    log(f"verify (end offset per partition, B == A): {'OK' if not mismatched else f'MISMATCH {mismatched}'}")
    return 0 if not mismatched else 1


if __name__ == "__main__":
    sys.exit(main())
