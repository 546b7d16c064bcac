"""Benchmark: ``mirrorline reconcile`` of 1,000,000 source records against 1,000,000 target records.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_reconcile.py            # 1M x 1000 B, 12 partitions, local[2]
    .venv/bin/python tests/benchmarks/bench_reconcile.py --quick    # 100k records
    .venv/bin/python tests/benchmarks/bench_reconcile.py --master spark://127.0.0.1:7077

Steps:

1. Start two brand-new local clusters A and B (``LocalKafka``, temporary state, free ports).
2. Create ``--partitions`` partitions of topic ``bench-<id>`` on A and of its remote copy
   ``A.bench-<id>`` on B, and fill both with the same N records (16-byte keys, values cycled
   from 256 random blobs, explicit timestamps, one header on every 10th record) with
   confluent-kafka — except ``--missing`` records left out of B, spread over the partitions.
   Not timed as part of the figure.
3. Run ``mirrorline reconcile mm2.properties --flow A->B --json`` in a subprocess with
   ``spark.master`` = ``--master`` (default ``local[2]``). Wall time from launch to exit
   (Spark start-up included), the job's own time from its JSON, and the peak memory of the
   driver process and its JVM: the largest sum of their ``VmRSS`` sampled every 0.2 s, and the
   sum of each one's ``VmHWM`` (an upper bound).
4. Check the JSON: ``missing`` equals ``--missing``, ``matched`` equals N minus it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

import asyncio  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402
from support.kafka import create_topic  # noqa: E402

KEEP = {"retention.ms": "-1"}  # explicit old-ish timestamps must survive the broker's retention check


def log(message: str) -> None:
    print(message, flush=True)


def status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                children = [int(c) for c in (task / "children").read_text().split()]
                out += children
                todo += children
        except OSError:
            pass
    return out


def fill(bootstrap: str, topic: str, n: int, values: list[bytes], partitions: int, skip: set[int],
         base_ms: int) -> None:
    """N records (minus the indexes in ``skip``) with values cycled from ``values``, partitions round-robin,
    timestamps base_ms + i // 100."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                         "compression.type": "none", "enable.idempotence": False})
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(n):
        if i in skip:
            continue
        headers = [("n", b"%d" % i)] if i % 10 == 0 else None
        while True:
            try:
                producer.produce(topic, values[i & 255], b"%016d" % i, partition=i % partitions,
                                 timestamp=base_ms + i // 100, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError("fill: records still undelivered after 600 s")
    if errors:
        raise RuntimeError(f"fill: {len(errors)} delivery errors, first: {errors[0]}")


def reconcile(props: Path, master: str, driver_memory: str) -> dict:
    """Run the command, sampling memory; returns wall time, peak RSS figures and the parsed JSON."""
    cmd = [sys.executable, "-m", "mirrorline.cli.main", "reconcile", str(props), "--flow", "A->B", "--json",
           "--spark-conf", f"spark.master={master}", "--spark-conf", f"spark.driver.memory={driver_memory}",
           "--spark-conf", "spark.ui.enabled=false"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_sum, hwm = 0, {}
    while proc.poll() is None:
        pids = [proc.pid, *descendants(proc.pid)]
        peak_sum = max(peak_sum, sum(status_kb(p, "VmRSS") for p in pids))
        for p in pids:
            hwm[p] = max(hwm.get(p, 0), status_kb(p, "VmHWM"))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.communicate()
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"reconcile failed ({proc.returncode}): {stderr[-3000:]}")
    return {"wall": wall, "peak_rss_kb": peak_sum, "hwm_sum_kb": sum(hwm.values()), "summary": json.loads(stdout),
            "exit": proc.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records on the source (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="100,000 records instead")
    parser.add_argument("--record-size", type=int, default=1000, help="bytes per value (default 1000)")
    parser.add_argument("--partitions", type=int, default=12, help="partitions (default 12)")
    parser.add_argument("--missing", type=int, default=10, help="records left out of the target (default 10)")
    parser.add_argument("--master", default="local[2]", help="spark.master (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else args.records
    skip = {(n // (args.missing + 1)) * (k + 1) for k in range(args.missing)}
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-reconcile-"))
    manager = LocalKafka(tmp / "kafka", _free_base_port(2))
    try:
        t = time.perf_counter()
        clusters = manager.start(["A", "B"])
        a, b = (c.spec.bootstrap_servers for c in clusters)
        log(f"[1] clusters A ({a}) and B ({b}) started in {time.perf_counter() - t:.1f} s")
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topic(a, topic, args.partitions, KEEP))
        asyncio.run(create_topic(b, f"A.{topic}", args.partitions, KEEP))
        base_ms = int(time.time() * 1000) - 3_600_000
        t = time.perf_counter()
        values = [os.urandom(args.record_size) for _ in range(256)]  # the same records on both sides
        fill(a, topic, n, values, args.partitions, set(), base_ms)
        fill(b, f"A.{topic}", n, values, args.partitions, skip, base_ms)
        log(f"[2] filled A with {n} and B with {n - len(skip)} records of {args.record_size} B "
            f"in {time.perf_counter() - t:.1f} s")
        props = tmp / "mm2.properties"
        props.write_text(f"clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\n"
                         f"A->B.enabled = true\nA->B.topics = {topic}\n{SINGLE_BROKER_MM2_PROPERTIES}")
        log(f"[3] mirrorline reconcile --flow A->B on {args.master}")
        result = reconcile(props, args.master, args.driver_memory)
    finally:
        manager.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    totals = result["summary"]["totals"]
    ok = totals["missing"] == len(skip) and totals["matched"] == n - len(skip) and totals["duplicated"] == 0
    mb = 2 * n * args.record_size / 1e6
    log("")
    log("=== mirrorline reconcile benchmark ===")
    log(f"cores: {os.cpu_count()}; load average (1 min) at start / end: {load_start[0]:.2f} / {os.getloadavg()[0]:.2f}")
    log("| figure | value |\n|---|---|")
    log(f"| records | {n:,} source vs {n - len(skip):,} target, {args.record_size} B values, "
        f"{args.partitions} partitions |")
    log(f"| spark.master | {args.master} (driver memory {args.driver_memory}) |")
    log(f"| wall time, launch to exit (Spark start included) | {result['wall']:.1f} s |")
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in result["summary"].get("timings", {}).items())
    log(f"| job time (from the job's summary) | {result['summary']['seconds']:.1f} s ({timings}) |")
    log(f"| read rate over both sides | {mb / result['wall']:.0f} MB/s wall |")
    log(f"| peak RSS, driver + JVM (max of summed VmRSS) | {result['peak_rss_kb'] / 1024:.0f} MiB |")
    log(f"| sum of VmHWM of those processes | {result['hwm_sum_kb'] / 1024:.0f} MiB |")
    log(f"| offset map | {result['summary']['map']['runs']} runs |")
    log(f"| check | {'OK' if ok else 'MISMATCH'}: missing {totals['missing']} (planted {len(skip)}), "
        f"matched {totals['matched']}, exit status {result['exit']} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
