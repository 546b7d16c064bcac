"""Benchmark: catching up a new topic's history with Spark jobs of the worker cluster vs streaming alone.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_spark_jobs.py                    # 5,000,000 x 1000 B, 12 partitions
    .venv/bin/python tests/benchmarks/bench_spark_jobs.py --records 200000 --skip-standalone   # a smoke run

Fresh clusters A and B (free loopback ports, stopped at the end whatever happens), one topic of
N records of ``--size`` bytes filled on A once, and one standalone worker (``mirrorline
standalone``, REST) writing to B. Every run mirrors the same topic into a remote topic of its
own (each connector has its own ``replication.policy.separator``), so runs never see each
other's copies. Wall times run from the REST call (or the command's launch) until B holds all N
records of the run's remote topic.

1. **Streaming alone**: a MirrorSource connector (``tasks.max=2``) created on the worker.
2. **Automatic Spark backfill** (``backfill.spark.enabled``, ``local[2]``): the same connector
   with the topic's whole history above ``backfill.spark.min.records``: it hands the history to
   a backfill job and streams after it. Target: at least 1.5x faster than 1.
3. **The same on a Spark standalone cluster** (pyspark's master and workers on loopback), one
   worker of one core, then two workers of one core each (``--skip-standalone`` leaves them out).
4. **A REST job vs the command**: ``mirrorline backfill mm2.properties --flow A->B`` against
   ``POST /jobs`` with ``{"job.class": "backfill", "connector": ...}`` on a STOPPED connector, both
   ``local[2]``. Target: the REST job within 10 % of the command.

MB/s counts record values (1e6 bytes). The machine's other load matters: run it alone and read
the figures as ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mirror import Offsets, fill_python, wait_for_leaders  # noqa: E402

from mirrorline.localkafka.artifacts import java_executable, resolve_kafka_classpath  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from mirrorline.spark.standalone import free_port  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402

POLL_S = 0.25
SPARK = {"spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.executor.memory": "1g"}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def rest(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode() or "null")


def wait_total(b: str, topic: str, partitions: int, n: int, started: float, limit_s: float = 7200) -> float:
    """Seconds from ``started`` until B's ``topic`` holds ``n`` records."""
    offsets = Offsets(b)
    try:
        while time.perf_counter() - started < limit_s:
            if sum(offsets.ends(topic, partitions).values()) >= n:
                return time.perf_counter() - started
            time.sleep(POLL_S)
    finally:
        offsets.close()
    raise RuntimeError(f"{topic} did not reach {n} records within {limit_s:.0f} s")


def connector(a: str, b: str, topic: str, separator: str, **extra: str) -> dict:
    return {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": a, "target.cluster.bootstrap.servers": b, "topics": topic,
            "tasks.max": "2", "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "replication.policy.separator": separator, "sync.topic.acls.enabled": "false", **extra}


class Worker:
    """A ``mirrorline standalone`` worker process with its REST API, writing to cluster B."""

    def __init__(self, tmp: Path, b: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        props = tmp / "worker.properties"
        props.write_text(f"bootstrap.servers={b}\nlisteners=http://127.0.0.1:{self.port}\n"
                         f"offset.storage.file.filename={tmp / 'offsets.json'}\noffset.flush.interval.ms=1000\n")
        self.log = tmp / "worker.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "standalone", str(props)],
                                     cwd=REPO_ROOT, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if rest(self.url, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.5)
        raise RuntimeError("worker did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_connector(worker: Worker, name: str, config: dict, b: str, remote: str, partitions: int, n: int) -> float:
    started = time.perf_counter()
    status, body = rest(worker.url, "PUT", f"/connectors/{name}/config", config)
    if status not in (200, 201):
        raise RuntimeError(f"creating {name}: {status} {body}")
    seconds = wait_total(b, remote, partitions, n, started)
    rest(worker.url, "PUT", f"/connectors/{name}/stop")
    return seconds


def run_rest_job(worker: Worker, name: str, config: dict, b: str, remote: str, partitions: int, n: int) -> float:
    status, body = rest(worker.url, "POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})
    if status != 201:
        raise RuntimeError(f"creating {name}: {status} {body}")
    started = time.perf_counter()
    status, body = rest(worker.url, "POST", "/jobs", {"name": f"{name}-job", "config": {
        "job.class": "backfill", "connector": name, "spark.master": "local[2]", **SPARK}})
    if status != 201:
        raise RuntimeError(f"submitting the job: {status} {body}")
    while True:
        info = rest(worker.url, "GET", f"/jobs/{name}-job")[1]
        if info["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(POLL_S)
    seconds = time.perf_counter() - started
    if info["state"] != "SUCCEEDED":
        raise RuntimeError(f"REST job: {info['state']}: {info.get('trace')}")
    wait_total(b, remote, partitions, n, started)
    return seconds


def run_cli(tmp: Path, a: str, b: str, topic: str, separator: str) -> float:
    state = uuid.uuid4().hex[:8]
    props = tmp / "cli.properties"
    props.write_text(f"""clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = {topic}
B->A.enabled = false
replication.policy.separator = {separator}
emit.heartbeats.enabled = false
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.topic = bench-offsets-{state}
config.storage.topic = bench-configs-{state}
status.storage.topic = bench-status-{state}
{''.join(f'{k} = {v}' + chr(10) for k, v in SPARK.items())}""")
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "backfill", str(props), "--flow", "A->B",
                             "--json", "--spark-master", "local[2]"], capture_output=True, text=True, cwd=REPO_ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"CLI backfill failed: {result.stderr[-2000:]}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--skip-standalone", action="store_true", help="no runs on a Spark standalone cluster")
    parser.add_argument("--skip-streaming", action="store_true", help="no streaming-alone run")
    args = parser.parse_args(argv)
    n, size, partitions = args.records, args.size, args.partitions
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-jobs-") as tmp_name:
        tmp = Path(tmp_name)
        manager = LocalKafka(tmp / "kafka", _free_base_port(2))
        worker = None
        try:
            a, b = (c.spec.bootstrap_servers for c in manager.start(["A", "B"]))
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            subprocess.run([java_executable(), "-cp", f"{resolve_kafka_classpath()}/*",
                            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", a, "--create", "--topic",
                            topic, "--partitions", str(partitions), "--replication-factor", "1",
                            "--config", "retention.ms=-1"], check=True, capture_output=True)
            offsets = Offsets(a)
            wait_for_leaders(offsets, topic, partitions)
            offsets.close()
            t = time.perf_counter()
            fill_python(a, topic, n, size, partitions)
            log(f"filled {n:,} x {size} B in {partitions} partitions on A in {time.perf_counter() - t:.1f} s")
            worker = Worker(tmp, b)
            if not args.skip_streaming:
                seconds = run_connector(worker, "stream", connector(a, b, topic, "_s_"), b, f"A_s_{topic}",
                                        partitions, n)
                log(f"streaming alone: {seconds:.1f} s")
                rows.append(("streaming MirrorSource alone (2 tasks)", seconds, ""))
            auto = {"backfill.spark.enabled": "true", "backfill.spark.min.records": "1",
                    **{f"backfill.spark.conf.{k}": v for k, v in SPARK.items()}}
            seconds = run_connector(worker, "auto", connector(a, b, topic, "_a_", **auto,
                                                              **{"backfill.spark.conf.spark.master": "local[2]"}),
                                    b, f"A_a_{topic}", partitions, n)
            log(f"automatic Spark backfill local[2]: {seconds:.1f} s")
            rows.append(("automatic Spark backfill, local[2]", seconds, ""))
            if not args.skip_standalone:
                from mirrorline.spark.standalone import StandaloneCluster

                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
                for workers in (1, 2):
                    cluster = StandaloneCluster(tmp / f"spark-{workers}", workers=workers, cores=1).start()
                    try:
                        config = connector(a, b, topic, f"_a{workers}_", **auto,
                                           **{"backfill.spark.conf.spark.master": cluster.master_url})
                        seconds = run_connector(worker, f"auto{workers}", config, b, f"A_a{workers}_{topic}",
                                                partitions, n)
                    finally:
                        cluster.stop()
                    log(f"automatic Spark backfill, standalone x{workers}: {seconds:.1f} s")
                    rows.append((f"automatic Spark backfill, standalone {workers} x 1 core", seconds, ""))
            cli = run_cli(tmp, a, b, topic, "_c_")
            log(f"CLI backfill local[2]: {cli:.1f} s")
            rows.append(("mirrorline backfill (CLI), local[2]", cli, ""))
            job = run_rest_job(worker, "viarest", connector(a, b, topic, "_r_"), b, f"A_r_{topic}", partitions, n)
            log(f"REST job local[2]: {job:.1f} s")
            rows.append(("POST /jobs backfill, local[2]", job, f"{job / cli:.2f} x the CLI"))
        finally:
            if worker is not None:
                worker.stop()
            manager.stop()
    streaming = next((s for name, s, _ in rows if name.startswith("streaming")), None)
    print()
    print(f"Spark jobs benchmark: {n:,} records x {size} B, {partitions} partitions, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'run':<52} {'wall s':>8} {'MB/s':>8} {'vs stream':>10}  note")
    for name, seconds, note in rows:
        speed = f"{streaming / seconds:.2f}x" if streaming else "-"
        print(f"{name:<52} {seconds:>8.1f} {n * size / 1e6 / seconds:>8.1f} {speed:>10}  {note}")
    standalone = [s for name, s, _ in rows if "standalone" in name]
    if len(standalone) == 2:
        print(f"speed-up from one to two standalone workers: {standalone[0] / standalone[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
