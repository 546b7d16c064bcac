"""Benchmark: how long local Apache Kafka clusters take to start, and how much memory they use.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_local_kafka.py          # warm figures only
    .venv/bin/python tests/benchmarks/bench_local_kafka.py --cold   # plus a cold start

Figures, all for a pair of clusters ("A" and "B", started in parallel by ``LocalKafka.start``):

1. ``--cold`` only: cold start with an empty jar cache (a temporary ``$MIRRORLINE_CACHE``)
   and an empty Maven local repository (a temporary one passed with
   ``MAVEN_OPTS=-Dmaven.repo.local=...``), so it includes downloading Maven's dependency
   plugin and Apache Kafka from Maven Central, formatting storage and starting both brokers.
2. Warm start of two brand-new clusters: jars cached, fresh state directory (so storage is
   formatted), median of ``--runs`` runs.
3. Warm restart of two existing, stopped clusters: median of ``--runs`` runs.
4. Memory: with both running, produce ``--records`` records of ``--record-size`` bytes to a
   ``--partitions``-partition topic on each cluster and read them back, then report each
   JVM's peak RSS (``VmHWM``) and current RSS (``VmRSS``) from ``/proc/<pid>/status``.

Every cluster lives in a temporary directory on free loopback ports chosen at random in
20000-40000 (never the default 19092/19102 that a running demo may use), and every cluster
started here is stopped in a ``finally`` block, even on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))  # tests/support: the suite's Kafka helpers

warnings.filterwarnings("ignore", category=DeprecationWarning)

from mirrorline.localkafka.artifacts import (  # noqa: E402
    KAFKA_VERSION,
    default_cache_dir,
    java_executable,
    resolve_kafka_classpath,
)
from mirrorline.localkafka.cluster import DEFAULT_HEAP  # noqa: E402
from mirrorline.localkafka.manager import DEFAULT_BASE_PORT, PORT_STRIDE, LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402
from support.kafka import create_topic, produce, read_all  # noqa: E402

NAMES = ["A", "B"]
#: Ports a demo may hold (clusters A and B at the default base port): never used here.
_RESERVED_PORTS = {DEFAULT_BASE_PORT + i * PORT_STRIDE + j for i in range(len(NAMES)) for j in (0, 1)}

#: Every manager this script started, so ``finally`` can stop them all.
_MANAGERS: list[LocalKafka] = []


def log(message: str) -> None:
    print(message, flush=True)


def _base_port() -> int:
    base = _free_base_port(len(NAMES))
    ports = {base + i * PORT_STRIDE + j for i in range(len(NAMES)) for j in (0, 1)}
    assert not ports & _RESERVED_PORTS, f"base port {base} would collide with the demo's ports"
    return base


def _manager(state_dir: Path) -> LocalKafka:
    manager = LocalKafka(state_dir, _base_port())
    _MANAGERS.append(manager)
    return manager


def _timed_start(manager: LocalKafka) -> float:
    """Seconds from the ``start()`` call until both brokers answer metadata requests."""
    t0 = time.perf_counter()
    manager.start(NAMES)
    return time.perf_counter() - t0


def _stop(manager: LocalKafka) -> None:
    manager.stop()
    if manager in _MANAGERS:
        _MANAGERS.remove(manager)
    if any(c.is_running() for c in manager.known().values()):
        raise RuntimeError(f"clusters under {manager.state_dir} still run after stop()")


def _dir_size_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 2**20


@contextmanager
def _environment(**values: str):
    """Set environment variables for the duration (the mvn subprocess inherits os.environ)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


# -- phases --------------------------------------------------------------------------------

def bench_cold(tmp: Path) -> float:
    cache = tmp / "cold-cache"
    m2 = tmp / "cold-m2-repository"
    cache.mkdir()
    m2.mkdir()
    maven_opts = f"{os.environ.get('MAVEN_OPTS', '')} -Dmaven.repo.local={m2}".strip()
    with _environment(MIRRORLINE_CACHE=str(cache), MAVEN_OPTS=maven_opts):
        assert default_cache_dir() == cache
        manager = _manager(tmp / "cold-state")
        try:
            seconds = _timed_start(manager)
        finally:
            _stop(manager)
    # Prove the download really went to the temporary places (i.e. the env was inherited).
    if not (cache / f"kafka-{KAFKA_VERSION}" / "complete").exists():
        raise RuntimeError(f"cold run did not populate the temporary jar cache {cache}")
    if not (m2 / "org" / "apache" / "kafka").is_dir():
        raise RuntimeError(f"cold run did not use the temporary Maven repository {m2} (MAVEN_OPTS ignored?)")
    log(f"  cold start: {seconds:.1f} s (downloaded {_dir_size_mb(m2):.0f} MiB into the Maven repo, "
        f"{_dir_size_mb(cache / f'kafka-{KAFKA_VERSION}' / 'libs'):.0f} MiB of broker jars)")
    return seconds


def bench_warm_new(tmp: Path, runs: int) -> list[float]:
    times = []
    for run in range(1, runs + 1):
        manager = _manager(tmp / f"warm-new-{run}")
        try:
            seconds = _timed_start(manager)
        finally:
            _stop(manager)
        log(f"  warm start of 2 new clusters, run {run}: {seconds:.2f} s")
        times.append(seconds)
    return times


def bench_warm_restart(tmp: Path, runs: int) -> list[float]:
    state = tmp / "warm-restart"
    first = _manager(state)
    try:
        first.start(NAMES)  # create + format once, untimed
    finally:
        _stop(first)
    times = []
    for run in range(1, runs + 1):
        # A fresh manager each time: the clusters keep the ports recorded in their cluster.json.
        manager = LocalKafka(state, first.base_port)
        _MANAGERS.append(manager)
        try:
            seconds = _timed_start(manager)
        finally:
            _stop(manager)
        log(f"  warm restart of 2 existing clusters, run {run}: {seconds:.2f} s")
        times.append(seconds)
    return times


async def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Wait until the broker leads every partition of a just-created topic, so producing starts clean.

    The metadata names a leader slightly before the broker's replica manager takes the role
    (Produce then fails with NotLeaderForPartition and is retried); ListOffsets needs the same
    leadership, and aiokafka retries it quietly, so ``end_offsets`` answering means ready.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from support.kafka import partitions_of

    deadline = time.monotonic() + timeout
    while len(await partitions_of(bootstrap, topic)) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} on {bootstrap} did not get {partitions} partitions")
        await asyncio.sleep(0.1)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()


async def _load(bootstrap: str, records: int, size: int, partitions: int) -> tuple[float, float]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    await create_topic(bootstrap, topic, partitions)
    await _wait_for_leaders(bootstrap, topic, partitions)
    payload = os.urandom(size)
    t0 = time.perf_counter()
    await produce(bootstrap, topic,
                  ((i % partitions, str(i).encode(), payload, None, None) for i in range(records)))
    produced = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = await read_all(bootstrap, topic, timeout=180, expect=records)
    consumed = time.perf_counter() - t0
    count = sum(len(v) for v in got.values())
    if count != records:
        raise RuntimeError(f"read back {count} of {records} records from {topic} on {bootstrap}")
    return produced, consumed


def _proc_status(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS of a process in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            fields[key] = int(value.split()[0])
    return fields


def bench_memory(tmp: Path, records: int, size: int, partitions: int) -> dict:
    manager = _manager(tmp / "memory")
    try:
        clusters = manager.start(NAMES)

        async def both():
            return await asyncio.gather(*(_load(c.spec.bootstrap_servers, records, size, partitions)
                                          for c in clusters))

        t0 = time.perf_counter()
        loads = asyncio.run(both())
        wall = time.perf_counter() - t0
        result = {"wall": wall, "jvms": {}}
        for cluster, (produced, consumed) in zip(clusters, loads):
            pid = cluster.pid()
            if pid is None:
                raise RuntimeError(f"cluster {cluster.spec.name} is not running after the load")
            status = _proc_status(pid)
            result["jvms"][cluster.spec.name] = {"pid": pid, "hwm_kb": status["VmHWM"],
                                                 "rss_kb": status["VmRSS"],
                                                 "produce_s": produced, "consume_s": consumed}
            log(f"  cluster {cluster.spec.name} (pid {pid}): produced {records} x {size} B in "
                f"{produced:.1f} s, read back in {consumed:.1f} s; VmHWM {status['VmHWM'] / 1024:.0f} MiB, "
                f"VmRSS {status['VmRSS'] / 1024:.0f} MiB")
        return result
    finally:
        _stop(manager)


# -- main ----------------------------------------------------------------------------------

def _java_version() -> str:
    out = subprocess.run([java_executable(), "-version"], capture_output=True, text=True).stderr
    return out.splitlines()[0] if out else "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true",
                        help="also time a cold start (empty jar cache and Maven repository; needs network)")
    parser.add_argument("--runs", type=int, default=3, help="runs per warm figure (median reported)")
    parser.add_argument("--records", type=int, default=50_000, help="records produced per cluster")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record value")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the load topic")
    args = parser.parse_args(argv)

    summary: list[str] = []
    load_start = os.getloadavg()[0]  # other work on the machine skews the figures: shown in the summary
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-"))
    try:
        log(f"Apache Kafka {KAFKA_VERSION}, {_java_version()}, broker heap '{DEFAULT_HEAP}', "
            f"{os.cpu_count()} cores; state under {tmp}")
        if args.cold:
            log("[1] cold start of 2 clusters (empty jar cache and Maven repository)")
            cold = bench_cold(tmp)
            summary.append(f"cold start, 2 clusters (Maven Central download + format + start): {cold:.1f} s")

        had_cache = (default_cache_dir() / f"kafka-{KAFKA_VERSION}" / "complete").exists()
        resolve_kafka_classpath()  # warm phases need the jars cached; untimed
        log(f"jar cache {default_cache_dir()} {'already complete' if had_cache else 'populated (untimed)'}")

        log(f"[2] warm start of 2 brand-new clusters x {args.runs}")
        new = bench_warm_new(tmp, args.runs)
        summary.append(f"warm start, 2 new clusters (format + start), median of {len(new)}: "
                       f"{statistics.median(new):.2f} s (runs: {', '.join(f'{t:.2f}' for t in new)})")

        log(f"[3] warm restart of 2 existing stopped clusters x {args.runs}")
        restart = bench_warm_restart(tmp, args.runs)
        summary.append(f"warm restart, 2 existing clusters, median of {len(restart)}: "
                       f"{statistics.median(restart):.2f} s (runs: {', '.join(f'{t:.2f}' for t in restart)})")

        log(f"[4] memory under load: {args.records} x {args.record_size} B to a {args.partitions}-partition "
            f"topic on each cluster, then read back")
        mem = bench_memory(tmp, args.records, args.record_size, args.partitions)
        for name, jvm in mem["jvms"].items():
            summary.append(f"JVM {name} peak RSS (VmHWM): {jvm['hwm_kb'] / 1024:.0f} MiB")
            summary.append(f"JVM {name} current RSS (VmRSS): {jvm['rss_kb'] / 1024:.0f} MiB")
        summary.append(f"both JVMs peak RSS total (sum of VmHWM): "
                       f"{sum(j['hwm_kb'] for j in mem['jvms'].values()) / 1024:.0f} MiB")
        summary.append(f"both JVMs current RSS total (sum of VmRSS): "
                       f"{sum(j['rss_kb'] for j in mem['jvms'].values()) / 1024:.0f} MiB")
        summary.append(f"load: {args.records} x {args.record_size} B per cluster, both clusters at once, "
                       f"produce + read back: {mem['wall']:.1f} s")
    finally:
        for manager in list(_MANAGERS):
            try:
                _stop(manager)
            except Exception as exc:  # keep stopping the others
                log(f"warning: stopping clusters under {manager.state_dir} failed: {exc}")
        shutil.rmtree(tmp, ignore_errors=True)

    log("")
    log("=== mirrorline local Kafka benchmark ===")
    log(f"cores (os.cpu_count): {os.cpu_count()}")
    log(f"load average (1 min) at start / end: {load_start:.2f} / {os.getloadavg()[0]:.2f}")
    log(f"Apache Kafka: {KAFKA_VERSION}; broker heap: {DEFAULT_HEAP}")
    for line in summary:
        log(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
